package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

func (e *env) reapCommand() *cli.Command {
	return command(&cli.Command{
		Name:      "reap",
		Usage:     "reclaim dead participants: requeue their leased messages and free their slots",
		UsageText: "hbdump reap PATH [--ring R ...] [--apply [--no-backup]] [--format text|json | --json]",
		Description: "Without --apply, shows what would be done and changes nothing: exit 1 when there is\n" +
			"something to reap, 0 when not. With --apply, runs the library's watchdog (heartbeat.Watchdog):\n" +
			"each --ring (a ring or a deque) is repaired, which requeues every lease of a dead\n" +
			"participant of that file, and each dead participant whose leases are all in files given\n" +
			"here is freed. A ring or deque a dead participant leased from that was not given is looked\n" +
			"for by its id beside the table and in /dev/shm, and used (its path is printed) when exactly\n" +
			"one file has that id; otherwise the participant is kept (reclaiming) and reported. Before\n" +
			"changing anything, --apply copies the table and each ring to PATH.bak-<UTC time>-<random>\n" +
			"(unless --no-backup), as ringctl repair --apply does; with nothing to do, no backup.\n" +
			"Dead means proven dead: its entry lock is released (in whatever pid namespace it ran).\n" +
			"Live participants, stale or not, and unknown ones (neither proven alive nor dead) are\n" +
			"never touched. Exit 0 when every dead participant was reclaimed, 1 otherwise.",
		Flags: append([]cli.Flag{
			ringFlag("a ring or deque the participants lease from: dead participants' leases are requeued into it (repeatable)"),
			&cli.BoolFlag{Name: "apply", Usage: "do it (maps the table and rings read-write), after backing up every file it may change"},
			&cli.BoolFlag{Name: "no-backup", Usage: "with --apply: change the files without backing them up first"},
			staleFlag(),
			cliutil.AllowModeFlag(),
		}, cliutil.FormatFlags("text or json (format hbdump.reap/1)", cliutil.FormatText, cliutil.FormatJSON)...),
		Action: e.reap,
	})
}

// reapAction is what happens, or would, to one dead participant: the
// watchdog's decision, as hbdump shows it.
type reapAction struct {
	Row       row
	Plan      string // reclaim or keep
	Why       string // for keep
	Reclaimed bool
}

// actionsOf renders the watchdog's decisions, one per dead participant:
// the library judges (heartbeat.Decision), hbdump only words it.
func actionsOf(ds []heartbeat.Decision, stale time.Duration, fd finding) []reapAction {
	var out []reapAction
	for _, d := range ds {
		a := reapAction{Row: newRow(d.Participant, stale), Plan: d.Action.String(), Reclaimed: d.Reclaimed}
		if d.Action == heartbeat.ActionKeep {
			a.Why = keepText(d, fd)
		}
		out = append(out, a)
	}
	return out
}

// keepText says why the watchdog keeps a dead participant's slot.
func keepText(d heartbeat.Decision, fd finding) string {
	switch d.Why {
	case heartbeat.KeepQueueNotGiven:
		if paths := fd.found[d.Queue]; len(paths) > 1 {
			return fmt.Sprintf("lease in ring %016x, not given with --ring and found at %s: give the one in use with --ring",
				d.Queue, strings.Join(paths, " and "))
		}
		return fmt.Sprintf("lease in ring %016x, not given with --ring and not found in %s: give it with --ring",
			d.Queue, strings.Join(fd.dirs, " or "))
	case heartbeat.KeepQueueNotRepaired:
		return fmt.Sprintf("lease in ring %016x, whose repair failed", d.Queue)
	case heartbeat.KeepSlotChanged:
		return "the slot changed during the scan (another watchdog has it)"
	}
	return d.Why.String()
}

// ringOutcome is one --ring (a ring or a deque): what its scan found
// before, and what its repair did.
type ringOutcome struct {
	Ring     *ring
	Orphans  map[transport.SlotProblem]int
	Owner    string // a deque's owner before: none, alive or dead; "" for a ring
	Repaired *heartbeat.QueueRepair
}

type jsonReap struct {
	Format     string       `json:"format"`
	Path       string       `json:"path"`
	Applied    bool         `json:"applied"`
	StaleAfter float64      `json:"stale_after_seconds"`
	Counts     counts       `json:"counts"`
	Actions    []jsonAction `json:"actions"`
	Rings      []jsonRing   `json:"rings"`
	Problems   []string     `json:"problems"`
	Backups    []backupMade `json:"backups"`
}

type jsonAction struct {
	Participant jsonParticipant `json:"participant"`
	Action      string          `json:"action"`
	Why         string          `json:"why"`
	Reclaimed   bool            `json:"reclaimed"`
}

type jsonRing struct {
	Ring           string          `json:"ring"`
	Kind           string          `json:"kind"`
	RingID         string          `json:"ring_id"`
	OrphanedLeases int             `json:"orphaned_leases"`
	OrphanedReads  int             `json:"orphaned_reads"`
	OrphanedWrites int             `json:"orphaned_writes"`
	Owner          string          `json:"owner,omitempty"`
	FoundByID      bool            `json:"found_by_id"`
	Repair         *jsonRingRepair `json:"repair,omitempty"`
}

type jsonRingRepair struct {
	DeadPeers       int    `json:"dead_peers"`
	Requeued        int    `json:"requeued"`
	RequeuedInPlace int    `json:"requeued_in_place"`
	Abandoned       int    `json:"abandoned"`
	Deferred        int    `json:"deferred"`
	Published       int    `json:"published"`
	OwnerDied       bool   `json:"owner_died"`
	Corrupt         int    `json:"corrupt"`
	Error           string `json:"error"`
}

func (e *env) reap(c *cli.Context) error {
	path, err := e.pathArg(c)
	if err != nil {
		return err
	}
	stale, err := staleOf(c)
	if err != nil {
		return err
	}
	format, err := cliutil.Format(c)
	if err != nil {
		return err
	}
	apply := c.Bool("apply")
	if c.Bool("no-backup") && !apply {
		return cliutil.Usage("--no-backup applies only with --apply")
	}
	hb, err := e.openTable(path, apply)
	if err != nil {
		return err
	}
	defer hb.Close()
	rings, err := e.openRings(c.StringSlice("ring"), apply)
	if err != nil {
		return err
	}
	defer rings.Close()

	// The watchdog's plan (a dry run, which changes nothing) names the
	// rings it needs and was not given: look for them by id, beside the
	// table and in /dev/shm, and plan again with those found.
	plan, err := e.plan(hb, stale, rings)
	if err != nil {
		return err
	}
	var missing []uint64
	for _, d := range plan.Decisions {
		if d.Why == heartbeat.KeepQueueNotGiven && !slices.Contains(missing, d.Queue) {
			missing = append(missing, d.Queue)
		}
	}
	search := searchDirs(path)
	found := e.findQueues(path, search, missing)
	var used []*ring
	for _, id := range missing {
		if paths := found[id]; len(paths) == 1 && rings.lookup(id) == nil {
			x, err := e.openRing(paths[0], apply)
			if err != nil {
				return unusable(paths[0], err)
			}
			x.Found = true
			rings.add(x)
			used = append(used, x)
		}
	}
	if len(used) > 0 {
		if plan, err = e.plan(hb, stale, rings); err != nil {
			return err
		}
	}

	// What each ring holds for dead owners, before anything is done.
	outcomes := make([]ringOutcome, len(rings.list))
	work := len(plan.Decisions) > 0
	for i, r := range rings.list {
		outcomes[i] = ringOutcome{Ring: r, Orphans: map[transport.SlotProblem]int{}}
		var slots []transport.SlotReport
		if err := guard(r.Path, func() (err error) { slots, outcomes[i].Owner, err = r.scan(); return err }); err != nil {
			return err
		}
		for _, s := range slots {
			outcomes[i].Orphans[s.Problem]++
			work = work || s.Problem != transport.SlotOK
		}
		work = work || outcomes[i].Owner == "dead"
	}

	// Like ringctl repair --apply: every file the repair may change is
	// copied first (cliutil.BackupBefore, the one backup routine), unless
	// --no-backup; nothing to do, no backup.
	var backups []backupMade
	if apply && work && !c.Bool("no-backup") {
		files := []string{hb.Path()}
		for _, r := range rings.list {
			files = append(files, r.Path)
		}
		for _, f := range files {
			name, err := cliutil.BackupBefore(f, "")
			if err != nil {
				return err
			}
			backups = append(backups, backupMade{File: f, Backup: name})
		}
	}

	rep := plan
	if apply {
		wd := heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Stale: stale, Queues: rings.handles()})
		if err := guard(hb.Path(), func() error { rep = wd.Scan(true); return nil }); err != nil {
			return err
		}
	}
	fd := finding{dirs: search, found: found}
	actions := actionsOf(rep.Decisions, stale, fd)
	for _, rr := range rep.QueueRepairs {
		for i := range outcomes {
			if outcomes[i].Ring.ID == rr.ID {
				outcomes[i].Repaired = &rr
			}
		}
	}
	n := countOf(rep.Participants, stale)

	if format == cliutil.FormatJSON {
		j := reapJSON(hb.Path(), apply, stale.Seconds(), n, actions, outcomes, rep.Problems, rings)
		j.Backups = append([]backupMade{}, backups...)
		err = cliutil.WriteJSON(e.stdout, j)
	} else {
		for _, b := range backups {
			fmt.Fprintf(e.stdout, "backup: %s of %s\n", b.Backup, b.File)
		}
		for _, r := range used {
			fmt.Fprintf(e.stdout, "%s %016x (not given with --ring): found by its id at %s\n", r.Kind, r.ID, r.Path)
		}
		err = writeReapText(e.stdout, apply, n, actions, outcomes, rep.Problems, rings)
	}
	if err != nil {
		return err
	}
	if !apply {
		if len(actions) > 0 {
			return cliutil.Problems("")
		}
		return nil
	}
	if len(rep.Problems) > 0 || len(rep.Reclaimed) < len(actions) {
		return cliutil.Problems("")
	}
	return nil
}

// plan is the watchdog's dry run over the table with rings.
func (e *env) plan(hb *heartbeat.Table, stale time.Duration, rings *ringSet) (heartbeat.WatchReport, error) {
	wd := heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Stale: stale, Queues: rings.handles()})
	var rep heartbeat.WatchReport
	err := guard(hb.Path(), func() error { rep = wd.Scan(false); return nil })
	return rep, err
}

// backupMade is one backup reap --apply made before changing a file.
type backupMade struct {
	File   string `json:"file"`
	Backup string `json:"backup"`
}

// finding is where reap looked for the rings it was not given, and what
// it found there, for the words of a kept participant.
type finding struct {
	dirs  []string
	found map[uint64][]string
}

func reapJSON(path string, apply bool, stale float64, n counts, actions []reapAction, outcomes []ringOutcome, problems []string, rings *ringSet) jsonReap {
	j := jsonReap{Format: "hbdump.reap/1", Path: path, Applied: apply, StaleAfter: stale, Counts: n,
		Actions: []jsonAction{}, Rings: []jsonRing{}, Problems: append([]string{}, problems...), Backups: []backupMade{}}
	for _, a := range actions {
		j.Actions = append(j.Actions, jsonAction{Participant: participantJSON(a.Row, rings), Action: a.Plan, Why: a.Why, Reclaimed: a.Reclaimed})
	}
	for _, o := range outcomes {
		jr := jsonRing{Ring: o.Ring.Path, Kind: o.Ring.Kind, RingID: fmt.Sprintf("%016x", o.Ring.ID),
			OrphanedLeases: o.Orphans[transport.SlotOrphanedLease], OrphanedReads: o.Orphans[transport.SlotOrphanedRead],
			OrphanedWrites: o.Orphans[transport.SlotOrphanedWrite], Owner: o.Owner, FoundByID: o.Ring.Found}
		if rr := o.Repaired; rr != nil {
			r := rr.Report
			n := countsOf(r)
			jr.Repair = &jsonRingRepair{DeadPeers: len(r.DeadPeers), Requeued: n.requeued, RequeuedInPlace: n.inPlace,
				Abandoned: n.abandoned, Deferred: n.deferred, Published: n.published, OwnerDied: n.ownerDied,
				Corrupt: r.Corrupt, Error: rr.Err}
		}
		j.Rings = append(j.Rings, jr)
	}
	return j
}

func writeReapText(w io.Writer, apply bool, n counts, actions []reapAction, outcomes []ringOutcome, problems []string, rings *ringSet) error {
	if !apply {
		fmt.Fprintln(w, "dry run: nothing changed (--apply does it)")
	}
	if len(actions) == 0 {
		fmt.Fprintf(w, "nothing to reap: %s\n", n)
		return nil
	}
	last := "ACTION"
	if apply {
		last = "RESULT"
	}
	var cells [][]string
	for _, a := range actions {
		p := a.Row.P
		cells = append(cells, []string{strconv.Itoa(p.Slot), strconv.FormatInt(int64(p.ID.PID), 10), printable(p.Label),
			printable(a.Row.Reason), leasesCell(p, rings), actionText(a, apply)})
	}
	if err := cliutil.Table(w, []string{"SLOT", "PID", "LABEL", "REASON", "LEASES", last}, cells); err != nil {
		return err
	}
	if len(outcomes) > 0 {
		fmt.Fprintln(w)
		// With a deque among the files, a KIND column, and the deque's
		// own outcomes (its owner; with --apply, messages published
		// for a dead owner); rings alone keep the ring table.
		deques := rings.hasDeque()
		header := []string{"RING", "ID", "ORPHANED LEASES", "ORPHANED READS", "ORPHANED WRITES"}
		if deques {
			header = []string{"RING", "KIND", "ID", "ORPHANED LEASES", "ORPHANED READS", "ORPHANED WRITES", "OWNER"}
		}
		if apply {
			header = append(header, "REQUEUED", "IN PLACE", "ABANDONED", "DEFERRED")
			if deques {
				header = append(header, "PUBLISHED")
			}
			header = append(header, "ERROR")
		}
		var rows [][]string
		for _, o := range outcomes {
			r := []string{o.Ring.Name, fmt.Sprintf("%016x", o.Ring.ID), strconv.Itoa(o.Orphans[transport.SlotOrphanedLease]),
				strconv.Itoa(o.Orphans[transport.SlotOrphanedRead]), strconv.Itoa(o.Orphans[transport.SlotOrphanedWrite])}
			if deques {
				r = append([]string{r[0], o.Ring.Kind}, r[1:]...)
				r = append(r, ownerText(o, apply))
			}
			if apply {
				if rr := o.Repaired; rr != nil {
					n := countsOf(rr.Report)
					r = append(r, strconv.Itoa(n.requeued), strconv.Itoa(n.inPlace), strconv.Itoa(n.abandoned),
						strconv.Itoa(n.deferred))
					if deques {
						r = append(r, published(o))
					}
					r = append(r, printable(rr.Err))
				} else {
					r = append(r, "", "", "", "")
					if deques {
						r = append(r, "")
					}
					r = append(r, "not repaired")
				}
			}
			rows = append(rows, r)
		}
		if err := cliutil.Table(w, header, rows); err != nil {
			return err
		}
	}
	for _, p := range problems {
		fmt.Fprintf(w, "problem: %s\n", printable(p))
	}
	done, keep := 0, 0
	for _, a := range actions {
		if a.Reclaimed {
			done++
		}
		if a.Plan == "keep" {
			keep++
		}
	}
	left := fmt.Sprintf("%d alive and %d stale left alone", n.Alive, n.Stale)
	if n.Unknown > 0 {
		left = fmt.Sprintf("%d alive, %d stale and %d unknown left alone", n.Alive, n.Stale, n.Unknown)
	}
	if n.Corrupt > 0 {
		left += fmt.Sprintf(", %s left alone", plural(n.Corrupt, "corrupt slot", "corrupt slots"))
	}
	if apply {
		fmt.Fprintf(w, "reclaimed %d of %s; %s\n", done, plural(len(actions), "dead participant", "dead participants"), left)
	} else {
		fmt.Fprintf(w, "%s: %d to reclaim, %d to keep; %s\n", plural(len(actions), "dead participant", "dead participants"), len(actions)-keep, keep, left)
	}
	return nil
}

func actionText(a reapAction, apply bool) string {
	if apply {
		if a.Reclaimed {
			return "reclaimed"
		}
		return "kept"
	}
	if a.Plan == "keep" {
		return "keep: " + a.Why
	}
	var parts []string
	if k := len(a.Row.P.Leases); k > 0 {
		parts = append(parts, "requeue "+plural(k, "lease", "leases"))
	}
	return strings.Join(append(parts, "free the slot"), ", ")
}

// ownerText is a deque's OWNER cell: its owner as the scan before found
// it (none, alive, dead), "dead, freed" when the repair freed the role for
// Adopt; empty for a ring, which has no owner.
func ownerText(o ringOutcome, apply bool) string {
	if apply && o.Repaired != nil && countsOf(o.Repaired.Report).ownerDied {
		return "dead, freed"
	}
	return o.Owner
}

// published is a deque's PUBLISHED cell; empty for a ring.
func published(o ringOutcome) string {
	if o.Ring.Kind != "deque" {
		return ""
	}
	return strconv.Itoa(countsOf(o.Repaired.Report).published)
}

// repairCounts are the columns reap prints for a ring's or deque's repair,
// counted from the actions the library reports. A ring's requeue and a
// deque's return share a column, as do a ring's requeue in place and the
// rollback of a dead deque owner's pop: each kind takes only one of each.
type repairCounts struct {
	requeued, inPlace, abandoned, deferred, published int
	ownerDied                                         bool
}

func countsOf(r check.RepairReport) repairCounts {
	return repairCounts{
		requeued:  r.Count(check.ActionRequeue) + r.Count(check.ActionReturn),
		inPlace:   r.Count(check.ActionRequeueInPlace) + r.Count(check.ActionRollBack),
		abandoned: r.Count(check.ActionRelease),
		deferred:  r.Count(check.ActionDefer),
		published: r.Count(check.ActionCountIn),
		ownerDied: r.Count(check.ActionFreeOwner) > 0,
	}
}
