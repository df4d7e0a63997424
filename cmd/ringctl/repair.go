package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "recover what dead processes left in a ring, deque or hash map (dry run unless --apply)",
		Description: "Lists every slot and participant entry whose owner is proven dead (pid and start time, or\n" +
			"another boot; never a timeout) and exactly what a repair does to each; without --apply\n" +
			"nothing is changed, and the exit status is 1 when there is something to repair. With\n" +
			"--apply the file is first copied to a backup (PATH.bak-<UTC time> unless --backup or\n" +
			"--no-backup; an existing file is never overwritten), then the file's own Repair runs and\n" +
			"what it did is printed. With --heartbeat HB a watchdog also reclaims the table's slots of\n" +
			"dead members once their leases are back in the ring (rings only). A deque whose owner died\n" +
			"is left without an owner, for a process to Adopt: ringctl never adopts. Safe while live\n" +
			"processes use the file, and idempotent: a second run finds nothing (and makes no backup).",
		ArgsUsage: "PATH [--heartbeat HB] [--apply [--backup FILE | --no-backup]] [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "heartbeat", Usage: "also reclaim dead members of heartbeat table `HB`"},
			&cli.BoolFlag{Name: "apply", Usage: "repair (after making a backup); without it, only show what would be done"},
			&cli.StringFlag{Name: "backup", Usage: "copy the file to `FILE` before repairing (default PATH.bak-<UTC time>)"},
			&cli.BoolFlag{Name: "no-backup", Usage: "repair without a backup"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (schema in docs/cli.md)"},
			cliutil.AllowModeFlag(),
		},
		Action: cliutil.WithPath(runRepair),
	}
}

// repairReport is repair's JSON output.
type repairReport struct {
	Path      string         `json:"path"`
	Heartbeat string         `json:"heartbeat,omitempty"`
	Applied   bool           `json:"applied"`
	ToRepair  int            `json:"to_repair"`
	Plan      []repairAction `json:"plan"`
	Backup    string         `json:"backup,omitempty"`
	Result    *repairResult  `json:"result,omitempty"`
	deque     bool           // for the text: the file is a deque
	hashmap   bool           // or a hash map
}

// repairAction is one thing found and what a repair does about it.
type repairAction struct {
	Target   string  `json:"target"`
	Kind     string  `json:"kind"`
	Position *uint64 `json:"position,omitempty"`
	PID      int32   `json:"pid,omitempty"`
	Action   string  `json:"action"`
	Detail   string  `json:"detail"`
}

// repairResult is what an applied repair did.
type repairResult struct {
	DeadParticipants []deadJSON `json:"dead_participants"`
	Abandoned        int        `json:"abandoned"`
	Requeued         int        `json:"requeued"`
	RequeuedInPlace  int        `json:"requeued_in_place"`
	Deferred         int        `json:"deferred"`
	Corrupt          int        `json:"corrupt"`
	Reclaimed        []deadJSON `json:"heartbeat_reclaimed"`
	Problems         []string   `json:"problems"`
	Published        *int       `json:"published,omitempty"`  // deques only
	OwnerDied        *bool      `json:"owner_died,omitempty"` // deques only
	// Hash maps only.
	Tombstoned        *int `json:"tombstoned,omitempty"`
	Unlocked          *int `json:"unlocked,omitempty"`
	HomeLocksReleased *int `json:"home_locks_released,omitempty"`
}

type deadJSON struct {
	Index  int    `json:"index"`
	PID    int32  `json:"pid"`
	Start  uint64 `json:"start_ticks"`
	Label  string `json:"label,omitempty"`
	Reason string `json:"reason"`
}

// Actions, as JSON names them.
const (
	actRelease  = "release"
	actRequeue  = "requeue"
	actFree     = "free_entry"
	actTakeLock = "take_over_lock"
	actReclaim  = "reclaim"
	actNone     = "none"
	// Deques only.
	actReturn    = "return"
	actRollBack  = "roll_back"
	actFreeOwner = "free_owner"
	actFixHint   = "raise_hint"
)

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
	kind, err := fileKind(c, path)
	if err != nil {
		return err
	}
	var rep repairReport
	if kind == layout.KindHashMap {
		if hbPath != "" {
			return cliutil.Usage("repair: --heartbeat applies to rings (a watchdog repairs rings only); %s is a hashmap", path)
		}
		if rep, err = planMapRepair(c, path); err != nil {
			return err
		}
		if apply && rep.ToRepair > 0 {
			if err := applyMapRepair(c, path, &rep); err != nil {
				return err
			}
		}
	} else if kind == layout.KindDeque {
		if hbPath != "" {
			return cliutil.Usage("repair: --heartbeat applies to rings (a watchdog repairs rings only); %s is a deque", path)
		}
		if rep, err = planDequeRepair(c, path); err != nil {
			return err
		}
		if apply && rep.ToRepair > 0 {
			if err := applyDequeRepair(c, path, &rep); err != nil {
				return err
			}
		}
	} else {
		if rep, err = planRepair(c, path, hbPath); err != nil {
			return err
		}
		if apply && rep.ToRepair > 0 {
			if err := applyRepair(c, path, hbPath, &rep); err != nil {
				return err
			}
		}
	}
	if c.Bool("json") {
		err = cliutil.WriteJSON(c.App.Writer, rep)
	} else {
		err = writeRepair(c.App.Writer, rep)
	}
	if err != nil {
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

// planRepair scans the ring (and table) read-only and says what a repair
// would do, following the ring's Repair (docs/design.md, "Recovery").
func planRepair(c *cli.Context, path, hbPath string) (repairReport, error) {
	rep := repairReport{Path: path, Heartbeat: hbPath, Plan: []repairAction{}}
	r, reg, err := openViewBytes(c, path)
	if err != nil {
		return rep, err
	}
	defer r.Close()
	defer reg.Close()
	var hb *heartbeat.Table
	if hbPath != "" {
		opts, err := cliutil.OpenOptions(c)
		if err != nil {
			return rep, err
		}
		if hb, err = heartbeat.Open(hbPath, append(opts, shm.ReadOnly())...); err != nil {
			return rep, fileErr(hbPath, err)
		}
		defer hb.Close()
	}
	l, err := ringLayout(path, r.Header())
	if err != nil {
		return rep, err
	}
	err = guard(path, func() error {
		scan := r.Scan()
		planSlots(&rep, &l, scan)
		planPeers(&rep, scan, lockHolder(reg, &l, scan))
		return nil
	})
	if err != nil {
		return rep, err
	}
	if hb != nil {
		if err := guard(hbPath, func() error {
			wr := heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{r}}).Scan(false)
			planMembers(&rep, r.ID(), wr)
			return nil
		}); err != nil {
			return rep, err
		}
	}
	for _, a := range rep.Plan {
		if a.Action != actNone {
			rep.ToRepair++
		}
	}
	return rep, nil
}

func planSlots(rep *repairReport, l *layout.RingLayout, scan transport.ScanReport) {
	for _, s := range scan.Slots {
		if s.Problem == transport.SlotOK {
			continue
		}
		pos := position(l, s.Index, s.Word.Lap, scan.Counters.Head)
		a := repairAction{Target: fmt.Sprintf("slot[%d]", s.Index), Kind: problemName(s.Problem), Position: &pos}
		owner := ""
		if s.Owner >= 0 && uint64(s.Owner) < l.Participants {
			a.PID = s.OwnerID.PID
			owner = fmt.Sprintf(" by participant %d (pid %d, start %d; dead: %s)", s.Owner, s.OwnerID.PID, s.OwnerID.Start, scan.Peers[s.Owner].Reason)
		}
		switch s.Problem {
		case transport.SlotOrphanedWrite:
			a.Action = actRelease
			a.Detail = fmt.Sprintf("slot being written%s: the push never returned, so nobody was promised the message; the slot is freed for the next lap and position %d is skipped", owner, pos)
		case transport.SlotOrphanedRead:
			a.Action = actRequeue
			a.Detail = fmt.Sprintf("%d-byte message being popped%s, and the pop never returned: a copy is pushed at the tail (delivery count %d kept) and the slot freed; if the ring is full it is republished in place when it is what stops the producers, and deferred until there is room otherwise", s.Word.Length, owner, s.Word.Deliveries)
		case transport.SlotOrphanedLease:
			a.Action = actRequeue
			a.Detail = fmt.Sprintf("%d-byte message leased%s and never acked: a copy is pushed at the tail (delivery count %d kept) and the slot freed; if the ring is full it is deferred until there is room", s.Word.Length, owner, s.Word.Deliveries)
		case transport.SlotPoison:
			a.Action = actNone
			a.Detail = fmt.Sprintf("message delivered %d times, set aside as poison: left alone; take it with ringctl drain --poisoned", s.Word.Deliveries)
		default:
			a.Action = actNone
			a.Detail = fmt.Sprintf("word %#016x, which no ring operation writes (%s): left alone; see ringctl verify and hexdump --slot %d", s.Raw, strip(s.Err), s.Index)
		}
		rep.Plan = append(rep.Plan, a)
	}
}

func planPeers(rep *repairReport, scan transport.ScanReport, lock int) {
	owns := map[int]int{}
	for _, s := range scan.Slots {
		if s.Problem >= transport.SlotOrphanedWrite && s.Problem <= transport.SlotOrphanedLease {
			owns[s.Owner]++
		}
	}
	for _, p := range scan.Peers {
		if !p.Dead || p.State == "free" {
			continue
		}
		detail := fmt.Sprintf("%s entry of pid %d (start %d), proven dead (%s): marked dead", p.State, p.ID.PID, p.ID.Start, p.Reason)
		switch n := owns[p.Index]; {
		case rep.deque && n == 0:
			detail += " and freed: it holds no slot"
		case rep.deque:
			detail += ", then freed once what it held (above) is recovered"
		case n == 0:
			detail += " and freed: it owns no slot"
		case n == 1:
			detail += ", then freed once its slot above is recovered (kept while that is deferred)"
		default:
			detail += fmt.Sprintf(", then freed once its %d slots above are recovered (kept while any is deferred)", n)
		}
		rep.Plan = append(rep.Plan, repairAction{Target: fmt.Sprintf("participant[%d]", p.Index), Kind: "dead_participant",
			PID: p.ID.PID, Action: actFree, Detail: detail})
	}
	if lock >= 0 && scan.Peers[lock].Dead {
		p := scan.Peers[lock]
		target := "ring.repair_lock"
		if rep.deque {
			target = "deque.repair_lock"
		}
		rep.Plan = append(rep.Plan, repairAction{Target: target, Kind: "dead_repairer", PID: p.ID.PID, Action: actTakeLock,
			Detail: fmt.Sprintf("held by participant %d (pid %d, start %d), proven dead: the repair takes the role over and finishes its work", lock, p.ID.PID, p.ID.Start)})
	}
}

// lockHolder returns the index of the participant holding the repair
// lock, or -1 (none, or a corrupt holder). It reads the mapping: run it
// under guard.
func lockHolder(reg *shm.Region, l *layout.RingLayout, scan transport.ScanReport) int {
	lock := decodeRole(load64(reg.Bytes(), uint64(reg.Header().HeaderSize)+layout.RingOffRepairLock), l.Participants)
	if lock.none || lock.corrupt || lock.index >= len(scan.Peers) {
		return -1
	}
	return lock.index
}

// planMembers renders the watchdog's dry-run decisions about the table's
// dead members: the library judges, ringctl words it.
func planMembers(rep *repairReport, ringID uint64, wr heartbeat.WatchReport) {
	for _, d := range wr.Decisions {
		p := d.Participant
		a := repairAction{Target: fmt.Sprintf("heartbeat.slot[%d]", p.Slot), Kind: "dead_member", PID: p.ID.PID, Action: actReclaim}
		other := 0
		for _, l := range p.Leases {
			if l.Ring != ringID {
				other++
			}
		}
		a.Detail = fmt.Sprintf("%s member %q, pid %d (start %d), proven dead (%s), %s recorded: freed once the ring repair has requeued what it held",
			p.State, p.Label, p.ID.PID, p.ID.Start, p.Verdict.Reason, plural(len(p.Leases), "lease", "leases"))
		if d.Action == heartbeat.ActionKeep {
			a.Action = actNone
			a.Detail = fmt.Sprintf("%s member %q, pid %d (start %d), proven dead (%s): kept, %s in other rings (a watchdog given those rings reclaims it)",
				p.State, p.Label, p.ID.PID, p.ID.Start, p.Verdict.Reason, plural(other, "lease is", "leases are"))
		}
		rep.Plan = append(rep.Plan, a)
	}
}

// applyRepair backs the file up, then repairs through the library: the
// ring's Repair, or with a heartbeat table a watchdog scan that repairs the
// ring and reclaims dead members.
func applyRepair(c *cli.Context, path, hbPath string, rep *repairReport) error {
	if err := backupFirst(c, path, rep); err != nil {
		return err
	}
	r, err := openAttached(c, path)
	if err != nil {
		return err
	}
	defer r.Close()
	res := &repairResult{DeadParticipants: []deadJSON{}, Reclaimed: []deadJSON{}, Problems: []string{}}
	rep.Result = res
	var rr transport.RepairReport
	repaired := false
	if hbPath != "" {
		opts, err := cliutil.OpenOptions(c)
		if err != nil {
			return err
		}
		hb, err := heartbeat.Open(hbPath, opts...)
		if err != nil {
			return fileErr(hbPath, err)
		}
		defer hb.Close()
		wr := heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{r}}).Scan(true)
		for _, p := range wr.Reclaimed {
			res.Reclaimed = append(res.Reclaimed, deadJSON{Index: p.Slot, PID: p.ID.PID, Start: p.ID.Start, Label: p.Label, Reason: p.Verdict.Reason})
		}
		res.Problems = append(res.Problems, wr.Problems...)
		if len(wr.QueueRepairs) > 0 {
			rr, repaired = wr.QueueRepairs[0].Report, wr.QueueRepairs[0].Err == ""
		}
	}
	if !repaired {
		// The watchdog repairs rings only when the table has dead members.
		if rr, err = r.Repair(); err != nil {
			if errors.Is(err, transport.ErrRepairBusy) {
				res.Problems = append(res.Problems, cause(path, fileErr(path, err)))
			} else {
				return fileErr(path, err)
			}
		}
	}
	for _, p := range rr.DeadPeers {
		res.DeadParticipants = append(res.DeadParticipants, deadJSON{Index: p.Index, PID: p.ID.PID, Start: p.ID.Start, Reason: p.Reason})
	}
	res.Abandoned, res.Requeued, res.RequeuedInPlace, res.Deferred, res.Corrupt = rr.Abandoned, rr.Requeued, rr.RequeuedInPlace, rr.Deferred, rr.Corrupt
	return fileErr(path, r.Close())
}

// backupFirst marks the report applied and, unless --no-backup, copies
// the file to its backup (--backup, or PATH.bak-<UTC time>) before any
// change.
func backupFirst(c *cli.Context, path string, rep *repairReport) error {
	rep.Applied = true
	if c.Bool("no-backup") {
		return nil
	}
	dst := c.String("backup")
	if dst == "" {
		dst = path + ".bak-" + time.Now().UTC().Format("20060102T150405Z")
	}
	if err := backup(path, dst); err != nil {
		return err
	}
	rep.Backup = dst
	return nil
}

// backup copies the file at src to a new file dst (mode 0600), refusing to
// overwrite anything. The copy is read with plain reads: on a ring in use
// it is not a consistent cut, only a record of the bytes before repair.
func backup(src, dst string) (err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fileErr(src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fileErr(dst, errors.New("backup file exists; refusing to overwrite it"))
		}
		return fileErr(dst, fmt.Errorf("backup: %w", err))
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fileErr(dst, cerr)
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fileErr(dst, fmt.Errorf("backup: %w", err))
	}
	if err := out.Sync(); err != nil {
		return fileErr(dst, fmt.Errorf("backup: %w", err))
	}
	return nil
}

func writeRepair(w io.Writer, rep repairReport) error {
	if rep.Backup != "" {
		fmt.Fprintf(w, "backup: %s\n", rep.Backup)
	}
	switch {
	case len(rep.Plan) == 0:
		fmt.Fprintf(w, "%s: nothing to repair\n", rep.Path)
	default:
		rows := [][]string{}
		for _, a := range rep.Plan {
			pos := "-"
			if a.Position != nil {
				pos = strconv.FormatUint(*a.Position, 10)
			}
			rows = append(rows, []string{a.Target, pos, a.Kind, a.Action, a.Detail})
		}
		verb := "found (dry run: nothing changed)"
		if rep.Applied {
			verb = "found, and repaired as counted below"
		}
		fmt.Fprintf(w, "%s: %s\n", rep.Path, verb)
		if err := cliutil.Table(w, []string{"target", "position", "found", "action", "detail"}, rows); err != nil {
			return err
		}
		if rep.ToRepair == 0 {
			fmt.Fprintln(w, "nothing to repair")
		}
	}
	res := rep.Result
	if res == nil {
		return nil
	}
	fmt.Fprintln(w)
	if rep.deque {
		return writeDequeResult(w, res)
	}
	if rep.hashmap {
		return writeMapResult(w, res)
	}
	rows := [][]string{
		{"dead participants freed or marked", strconv.Itoa(len(res.DeadParticipants))},
		{"half-written slots released", strconv.Itoa(res.Abandoned)},
		{"messages requeued at the tail", strconv.Itoa(res.Requeued)},
		{"messages requeued in place", strconv.Itoa(res.RequeuedInPlace)},
		{"messages deferred (no room yet)", strconv.Itoa(res.Deferred)},
		{"corrupt slots left alone", strconv.Itoa(res.Corrupt)},
	}
	if rep.Heartbeat != "" {
		rows = append(rows, []string{"heartbeat members reclaimed", strconv.Itoa(len(res.Reclaimed))})
	}
	if err := cliutil.Table(w, []string{"repaired", "count"}, rows); err != nil {
		return err
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "not done: %s\n", p)
	}
	return nil
}
