package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// repairReport is repair's JSON output.
type repairReport struct {
	Path      string        `json:"path"`
	Heartbeat string        `json:"heartbeat,omitempty"`
	Applied   bool          `json:"applied"`
	ToRepair  int           `json:"to_repair"` // plan entries whose action is not none
	Plan      []findingJSON `json:"plan"`      // every finding of the file's Check, then the heartbeat table's members
	Backup    string        `json:"backup,omitempty"`
	// HeartbeatBackup is the heartbeat table's backup: --apply with
	// --heartbeat copies the table too before a watchdog reclaims its
	// members, as hbdump reap --apply does.
	HeartbeatBackup string        `json:"heartbeat_backup,omitempty"`
	Result          *repairResult `json:"result,omitempty"`

	participants uint64 // the table's size (check.Report.Participants): entry participants is the repairer entry
}

// repairResult is what an applied repair did.
type repairResult struct {
	DeadParticipants []deadJSON     `json:"dead_participants"`
	Counts           map[string]int `json:"counts"` // by action: how many times the repair took it
	Done             []findingJSON  `json:"done"`   // every action taken, in order
	Corrupt          int            `json:"corrupt"`
	Reclaimed        []deadJSON     `json:"heartbeat_reclaimed"`
	Problems         []string       `json:"problems"` // what could not be done
	done             repairDone     // for the text
}

type deadJSON struct {
	Index          int    `json:"index"`
	Repairer       bool   `json:"repairer,omitempty"` // the table's repairer entry (participants only)
	PID            int32  `json:"pid"`
	Start          uint64 `json:"start_ticks"`
	PidNS          uint64 `json:"pid_ns,omitempty"`          // the holder's pid namespace inode, when recorded
	OtherNamespace bool   `json:"other_namespace,omitempty"` // recorded in another pid namespace: pid names another process here
	Label          string `json:"label,omitempty"`
	Reason         string `json:"reason"`
}

// repairDone is what one kind's Repair reported, in the rows repair
// prints: each kind's repairRows builds it from the library's report.
type repairDone struct {
	dead         []check.Peer
	counts       []repairCount   // the kind's actions, in the order printed
	done         []check.Finding // every action taken
	corrupt      int
	corruptLabel string // "corrupt slots left alone"
	note         string // a line after the counts, or ""
}

// repairCount is how many times a repair took one action.
type repairCount struct {
	action check.Action
	label  string // for people: "messages requeued at the tail"
	n      int
}

// markRepairer marks the actions taken for the repairer entry of a
// table of participants entries (findingsJSON's Repairer).
func (res *repairResult) markRepairer(participants uint64) {
	for i := range res.Done {
		f := &res.Done[i]
		f.Repairer = f.Owner >= 0 && uint64(f.Owner) == participants && participants > 0
	}
}

// newRepairResult renders what a repair did; notDone says what it could not do.
func newRepairResult(d repairDone, notDone []string) *repairResult {
	res := &repairResult{DeadParticipants: []deadJSON{}, Counts: map[string]int{}, Done: findingsJSON(d.done, 0),
		Corrupt: d.corrupt, Reclaimed: []deadJSON{}, Problems: append([]string{}, notDone...), done: d}
	for _, p := range d.dead {
		res.DeadParticipants = append(res.DeadParticipants, deadJSON{Index: p.Index, Repairer: p.Repairer, PID: p.ID.PID, Start: p.ID.Start,
			PidNS: p.PidNS, OtherNamespace: p.OtherNS, Reason: p.Reason})
	}
	for _, n := range d.counts {
		res.Counts[string(n.action)] = n.n
	}
	return res
}

func runRepair(c *cli.Context, path string) error {
	apply := c.Bool("apply")
	if c.IsSet("backup") && c.Bool("no-backup") {
		return cliutil.Usage("repair: --backup and --no-backup exclude each other")
	}
	if !apply && (c.IsSet("backup") || c.Bool("no-backup")) {
		return cliutil.Usage("repair: --backup and --no-backup apply only with --apply")
	}
	hbPath := ""
	if c.IsSet("heartbeat") {
		hbPath = shm.Resolve(c.String("heartbeat"))
	}
	k, err := kindOf(c, path)
	if err != nil {
		return err
	}
	if hbPath != "" && !k.watched() {
		return cliutil.Usage("repair: --heartbeat applies to rings and deques (a watchdog repairs queues); %s is a %s", path, k.kind)
	}
	rep, err := planRepair(c, k, path, hbPath)
	if err != nil {
		return err
	}
	if apply && rep.ToRepair > 0 {
		if err := backupFirst(c, path, &rep); err != nil {
			return err
		}
		if rep.Result, err = k.apply(c, path, hbPath); err != nil {
			return err
		}
		rep.Result.markRepairer(rep.participants)
	}
	if err := output(c, rep); err != nil {
		return err
	}
	switch {
	case !apply && rep.ToRepair > 0:
		return cliutil.Problems(fmt.Sprintf("%s: %s to repair; nothing changed (use --apply)", path, plural(rep.ToRepair, "thing", "things")))
	case rep.Result != nil && len(rep.Result.Problems) > 0:
		return cliutil.Problems(fmt.Sprintf("%s: repair incomplete: %s", path, rep.Result.Problems[0]))
	}
	return nil
}

// planRepair is the dry run: the file's Check, read-only, and with a
// heartbeat table its members a watchdog would reclaim.
func planRepair(c *cli.Context, k *kind, path, hbPath string) (repairReport, error) {
	rep := repairReport{Path: path, Heartbeat: hbPath}
	v, err := k.open(c, path)
	if err != nil {
		return rep, err
	}
	defer v.Close()
	var hb *heartbeat.Table
	if hbPath != "" {
		opts, err := cliutil.OpenOptions(c)
		if err != nil {
			return rep, err
		}
		if hb, err = heartbeat.Open(hbPath, append(opts, shm.ReadOnly())...); err != nil {
			return rep, cliutil.FileError(hbPath, err)
		}
		defer hb.Close()
	}
	if err := guard(path, func() error {
		cr := v.Check()
		rep.Plan = findingsJSON(cr.Findings, cr.Participants)
		rep.participants = cr.Participants
		return cr.Fault
	}); err != nil {
		return rep, cliutil.FileError(path, err)
	}
	if hb != nil {
		if err := guard(hbPath, func() error {
			rep.Plan = append(rep.Plan, k.members(v, hb)...)
			return nil
		}); err != nil {
			return rep, err
		}
	}
	rep.ToRepair = actionable(rep.Plan)
	return rep, nil
}

// memberPlan renders the watchdog's dry-run decisions about the table's
// dead members (Watchdog.Scan(false)): the library judges, ringctl words it.
func memberPlan(wr heartbeat.WatchReport) []findingJSON {
	out := []findingJSON{}
	for _, d := range wr.Decisions {
		p := d.Participant
		who := p.ID.String()
		if p.OtherNamespace() {
			who = p.Where()
		}
		why := p.Verdict.Reason
		f := findingJSON{Kind: "dead_member", Location: fmt.Sprintf("heartbeat.slot[%d]", p.Slot), Owner: -1, PID: p.ID.PID,
			Verdict: p.Verdict.Reason, Action: "reclaim",
			Detail: fmt.Sprintf("%s member %q, %s, proven dead (%s), %s recorded: freed once the ring repair has requeued what it held",
				p.State, p.Label, who, why, plural(len(p.Leases), "lease", "leases"))}
		if d.Action == heartbeat.ActionKeep {
			f.Action = string(check.ActionNone)
			f.Detail = fmt.Sprintf("%s member %q, %s, proven dead (%s): kept, a lease is in ring %016x, which a watchdog given that ring reclaims",
				p.State, p.Label, who, why, d.Queue)
		}
		out = append(out, f)
	}
	return out
}

// labelled is one action a kind's repair takes and how repair names it.
type labelled struct {
	action check.Action
	label  string
}

// repairRows counts what a Repair did, action by action, in the order the
// kind prints them.
func repairRows(rr check.RepairReport, corruptLabel string, actions []labelled) repairDone {
	d := repairDone{dead: rr.DeadPeers, done: rr.Done, corrupt: rr.Corrupt, corruptLabel: corruptLabel}
	for _, a := range actions {
		d.counts = append(d.counts, repairCount{a.action, a.label, rr.Count(a.action)})
	}
	return d
}

// repairOnce runs a handle's Repair. Another live process holding the
// repair lock is not an error: it is what could not be done.
func repairOnce[R any](path string, repair func() (R, error)) (R, []string, error) {
	rr, err := repair()
	switch {
	case err == nil:
		return rr, nil, nil
	case errors.Is(err, transport.ErrRepairBusy):
		return rr, []string{cliutil.Cause(path, cliutil.FileError(path, err))}, nil
	}
	return rr, nil, cliutil.FileError(path, err)
}

// repairWith makes the apply of a kind without a heartbeat table: open
// for repair with open (no participant entry: the kind's ...ForRepair),
// run the handle's Repair, render what it did with rows.
func repairWith[H io.Closer, R any](open func(string, ...shm.Option) (H, error), repair func(H) (R, error), rows func(R) repairDone) func(*cli.Context, string, string) (*repairResult, error) {
	return func(c *cli.Context, path, _ string) (*repairResult, error) {
		h, err := openWith(c, path, open)
		if err != nil {
			return nil, err
		}
		rr, notDone, err := repairOnce(path, func() (R, error) { return repair(h) })
		if err != nil {
			h.Close()
			return nil, err
		}
		return newRepairResult(rows(rr), notDone), cliutil.FileError(path, h.Close())
	}
}

// watchedPlan is a watchdog's dry run over table hb with the one queue
// q (Watchdog.Scan(false)): the members it would reclaim or keep.
func watchedPlan(hb *heartbeat.Table, q heartbeat.Repairable) []findingJSON {
	return memberPlan(heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{q}}).Scan(false))
}

// repairWatched makes the apply of a kind a watchdog repairs (rings and
// deques): open for repair with open (no participant entry: a table full
// of dead entries must not stop the repair that frees them; the Repair
// runs as the table's repairer entry), then the queue's Repair, or with a
// heartbeat table a watchdog scan that repairs the queue and reclaims the
// table's dead members. The verb has made the backup before.
func repairWatched[Q interface {
	heartbeat.Repairable
	io.Closer
}](open func(string, ...shm.Option) (Q, error), rows func(check.RepairReport) repairDone) func(*cli.Context, string, string) (*repairResult, error) {
	return func(c *cli.Context, path, hbPath string) (*repairResult, error) {
		q, err := openWith(c, path, open)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		var rr check.RepairReport
		var reclaimed []deadJSON
		var notDone []string
		repaired := false
		if hbPath != "" {
			opts, err := cliutil.OpenOptions(c)
			if err != nil {
				return nil, err
			}
			hb, err := heartbeat.Open(hbPath, opts...)
			if err != nil {
				return nil, cliutil.FileError(hbPath, err)
			}
			defer hb.Close()
			wr := heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{q}}).Scan(true)
			for _, p := range wr.Reclaimed {
				reclaimed = append(reclaimed, deadJSON{Index: p.Slot, PID: p.ID.PID, Start: p.ID.Start, PidNS: p.PidNS,
					OtherNamespace: p.Verdict.OtherNS, Label: p.Label, Reason: p.Verdict.Reason})
			}
			notDone = append(notDone, wr.Problems...)
			if len(wr.QueueRepairs) > 0 {
				rr, repaired = wr.QueueRepairs[0].Report, wr.QueueRepairs[0].Err == ""
			}
		}
		if !repaired { // the watchdog repairs its queues only when the table has dead members
			var busy []string
			if rr, busy, err = repairOnce(path, q.Repair); err != nil {
				return nil, err
			}
			notDone = append(notDone, busy...)
		}
		res := newRepairResult(rows(rr), notDone)
		res.Reclaimed = append(res.Reclaimed, reclaimed...)
		return res, cliutil.FileError(path, q.Close())
	}
}

// backupFirst marks the report applied and, unless --no-backup, copies
// the file to its backup (--backup, or a fresh PATH.bak-<UTC time>-<random>:
// cliutil.Backup) before any change.
func backupFirst(c *cli.Context, path string, rep *repairReport) error {
	rep.Applied = true
	if c.Bool("no-backup") {
		return nil
	}
	name, err := cliutil.BackupBefore(path, c.String("backup"))
	if err != nil {
		return err
	}
	rep.Backup = name
	// The heartbeat table changes too when a member is reclaimed: the
	// same safety as hbdump reap --apply, which backs up both files.
	if rep.Heartbeat != "" && slices.ContainsFunc(rep.Plan, func(f findingJSON) bool {
		return f.Kind == "dead_member" && f.Action != string(check.ActionNone)
	}) {
		if rep.HeartbeatBackup, err = cliutil.BackupBefore(rep.Heartbeat, ""); err != nil {
			return err
		}
	}
	return nil
}

// write prints the report as text. Each message is a line of its own:
// the problems line opens the report, and the summary of a dry run is the
// one line on stderr after it (runRepair), never run into it.
func (rep repairReport) write(w io.Writer) error {
	if rep.Backup != "" {
		fmt.Fprintf(w, "backup: %s\n", rep.Backup)
	}
	if rep.HeartbeatBackup != "" {
		fmt.Fprintf(w, "backup: %s\n", rep.HeartbeatBackup)
	}
	if len(rep.Plan) == 0 {
		fmt.Fprintf(w, "%s: nothing to repair\n", rep.Path)
	} else {
		verb := "dry run: nothing changed"
		if rep.Applied {
			verb = "repaired as counted below"
		}
		fmt.Fprintf(w, "%s: %s found, %d to repair (%s)\n", rep.Path, plural(len(rep.Plan), "problem", "problems"), rep.ToRepair, verb)
		if err := writeFindings(w, rep.Plan); err != nil {
			return err
		}
		if rep.ToRepair == 0 {
			fmt.Fprintln(w, "nothing to repair")
		}
	}
	if rep.Result == nil {
		return nil
	}
	fmt.Fprintln(w)
	return rep.Result.write(w, rep.Heartbeat != "")
}

// write prints what a repair did: the counts of the kind's actions, then
// what could not be done.
func (res *repairResult) write(w io.Writer, heartbeat bool) error {
	d := res.done
	rows := [][]string{{"dead participants freed or marked", strconv.Itoa(len(res.DeadParticipants))}}
	for _, n := range d.counts {
		rows = append(rows, []string{n.label, strconv.Itoa(n.n)})
	}
	rows = append(rows, []string{d.corruptLabel, strconv.Itoa(res.Corrupt)})
	if heartbeat {
		rows = append(rows, []string{"heartbeat members reclaimed", strconv.Itoa(len(res.Reclaimed))})
	}
	if err := cliutil.Table(w, []string{"repaired", "count"}, rows); err != nil {
		return err
	}
	if d.note != "" {
		fmt.Fprintln(w, d.note)
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "not done: %s\n", p)
	}
	return nil
}

func repairCommand() *cli.Command {
	return command("repair", "recover what dead processes left in a ring, deque or hash map (dry run unless --apply)", "PATH [--heartbeat HB] [--apply [--backup FILE | --no-backup]] [--format text|json | --json]", runRepair,
		`Lists every problem the file's own Check finds and exactly what a repair does about each
(an owner counts as dead only on proof: its entry lock released, in any pid namespace, with
pid and start time agreeing where they can be asked, or another boot; never a timeout; one
whose liveness cannot be decided is left alone); without --apply nothing is changed, and the
exit status is 1 when there is something to repair. With --apply the file is first copied to
a backup (PATH.bak-<UTC time>-<random> unless --backup or --no-backup; an existing file or
symlink is never written through), then the file's own Repair runs, without a participant
entry of its own (as the table's repairer entry: a table full of dead entries does not stop
it), and what it did is printed. With --heartbeat HB a watchdog also reclaims the table's
slots of dead members once their leases are back in the ring or deque. A deque whose
owner died is left without an owner, for a process to Adopt: ringctl never adopts. Safe while
live processes use the file, and idempotent: a second run finds nothing (and makes no backup).`,
		withFormat(&cli.StringFlag{Name: "heartbeat", Usage: "also reclaim dead members of heartbeat table `HB`"},
			&cli.BoolFlag{Name: "apply", Usage: "repair (after making a backup); without it, only show what would be done"},
			&cli.StringFlag{Name: "backup", Usage: "copy the file to `FILE` (which must not exist) before repairing (default PATH.bak-<UTC time>-<random>)"},
			&cli.BoolFlag{Name: "no-backup", Usage: "repair without a backup"},
			cliutil.AllowModeFlag())...)
}
