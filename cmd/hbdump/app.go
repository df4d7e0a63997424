package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// defaultStale is how long a live participant may go without beating
// before it is reported stale.
const defaultStale = 5 * time.Second

// readyWait bounds how long an open waits for a file whose ready word is
// not set (a creator that died mid-way, or a file made in place by another
// tool): an inspector reports it rather than wait the library's 2 s.
const readyWait = 250 * time.Millisecond

// env is what every command shares: where results go, and the open
// options.
type env struct {
	stdout io.Writer
	// readyTimeout bounds the wait for a file that is not initialised.
	// The fuzz target shortens it.
	readyTimeout time.Duration
	// allowMode is the widest mode accepted on an existing file (--allow-mode).
	allowMode os.FileMode
	// owner accepts files of another user (--owner, read-only commands).
	owner shm.Option
}

func newApp(stdout io.Writer) *cli.App {
	return newAppEnv(&env{stdout: stdout, readyTimeout: readyWait})
}

func newAppEnv(e *env) *cli.App {
	return &cli.App{
		Name:  "hbdump",
		Usage: "show, watch, check and reap the participants of a shmkit heartbeat table",
		UsageText: "hbdump PATH [--json] [--all] [--stale D] [--ring R ...]   (or: hbdump dump PATH ...)\n" +
			"hbdump watch PATH [--interval D] [--stale D] [--ring R ...] [--count N]\n" +
			"hbdump check PATH [--stale D] [--format text|json|prometheus] [--ring R ...]\n" +
			"hbdump reap PATH [--ring R ...] [--apply] [--json]\n" +
			"hbdump create PATH --capacity N [--leases L] [--mode MODE] [--group G]",
		Description: "Without a command, prints one line per registered participant: slot, pid, process\n" +
			"start time, state (alive, stale, dead, free), beat age, label, the leases it holds and,\n" +
			"for the unhealthy, why. A bare name means /dev/shm/NAME. The table is mapped read-only\n" +
			"except by reap --apply and create. Flags may follow PATH. See docs/cli.md.",
		// The top level's flags are those of `hbdump PATH`, not global ones.
		CustomAppHelpTemplate: strings.ReplaceAll(cli.AppHelpTemplate, "GLOBAL OPTIONS:", "OPTIONS (hbdump PATH):") +
			"\n" + cliutil.ExitCodesHelp + "\n",
		Writer:   e.stdout,
		Flags:    dumpFlags(),
		Action:   e.rootDump,
		Commands: []*cli.Command{e.dumpCommand(), e.watchCommand(), e.checkCommand(), e.reapCommand(), e.createCommand()},
	}
}

// command fills in what every command shares.
func command(c *cli.Command) *cli.Command {
	c.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + cliutil.ExitCodesHelp + "\n"
	return c
}

func staleFlag() cli.Flag {
	return &cli.DurationFlag{Name: "stale", Value: defaultStale,
		Usage: "a live participant that has not beaten for this long is stale (0 disables)"}
}

func ringFlag(usage string) cli.Flag {
	return &cli.StringSliceFlag{Name: "ring", Usage: usage}
}

const ringShowUsage = "a ring or deque the participants lease from: its leases are shown by path and position (repeatable)"

// pathArg returns the one PATH argument of a command, and applies
// --allow-mode when the command has it.
func (e *env) pathArg(c *cli.Context) (string, error) {
	if slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "allow-mode") }) {
		m, err := cliutil.ParseMode(c.String("allow-mode"))
		if err != nil {
			return "", cliutil.Usage("--allow-mode: %v", err)
		}
		e.allowMode = m
	}
	var err error
	if e.owner, err = cliutil.OwnerOption(c); err != nil {
		return "", err
	}
	return cliutil.PathArg(c, "a heartbeat table: a path, or a name in /dev/shm")
}

// staleOf reads --stale.
func staleOf(c *cli.Context) (time.Duration, error) {
	d := c.Duration("stale")
	if d < 0 {
		return 0, cliutil.Usage("--stale must not be negative (0 disables it), got %v", d)
	}
	return d, nil
}

// shmOpts are the options of every open.
func (e *env) shmOpts(extra ...shm.Option) []shm.Option {
	if e.readyTimeout > 0 {
		extra = append(extra, shm.WithReadyTimeout(e.readyTimeout))
	}
	if e.allowMode != 0 {
		extra = append(extra, shm.WithMode(e.allowMode))
	}
	if e.owner != nil {
		extra = append(extra, e.owner)
	}
	return extra
}

// readOnce reads the table once, read-only, with the --ring rings opened
// (read-only) for display; the caller closes the rings.
func (e *env) readOnce(c *cli.Context, path string) (tableView, *ringSet, error) {
	hb, err := e.openTable(path, false)
	if err != nil {
		return tableView{}, nil, err
	}
	defer hb.Close()
	rings, err := e.openRings(c.StringSlice("ring"), false)
	if err != nil {
		return tableView{}, nil, err
	}
	v, err := readTable(hb)
	if err != nil {
		rings.Close()
		return tableView{}, nil, err
	}
	e.findLeaseRings(path, v.Parts, rings)
	return v, rings, nil
}

// openTable maps the heartbeat table: read-only unless write is set.
func (e *env) openTable(path string, write bool) (*heartbeat.Table, error) {
	opts := e.shmOpts()
	if !write {
		opts = append(opts, shm.ReadOnly())
	}
	var hb *heartbeat.Table
	err := shm.Guard(func() (err error) {
		hb, err = heartbeat.Open(path, opts...)
		return err
	})
	if errors.Is(err, layout.ErrWrongKind) {
		// Name the tool for the file's kind (pread of its header: no
		// mapping; it validated, or the open would have said otherwise).
		if h, herr := shm.ReadHeader(path, e.shmOpts()...); herr == nil && h.Kind != layout.KindHeartbeat {
			return nil, cliutil.WrongKind(shm.Resolve(path), "hbdump", "heartbeat tables", h.Kind)
		}
	}
	if err != nil {
		return nil, unusable(path, err)
	}
	return hb, nil
}

// unusable words an error about the file at path as every shmkit tool
// does ("PATH: cause", cliutil.FileError), and makes sure one saying the
// file itself is bad exits 3: the library's "corrupt" errors are not in
// cliutil's list.
func unusable(path string, err error) error {
	if err == nil {
		return nil
	}
	if !cliutil.IsUnusable(err) && (errors.Is(err, heartbeat.ErrCorruptTable) || errors.Is(err, transport.ErrCorrupt)) {
		return cliutil.Exit(cliutil.ExitUnusable, cliutil.FileError(shm.Resolve(path), err))
	}
	return cliutil.FileError(shm.Resolve(path), err)
}

// tableView is one read of the whole table.
type tableView struct {
	Path     string
	ID       uint64 // layout.FileID
	Capacity int
	Leases   int // lease records per slot
	Totals   heartbeat.Totals
	Parts    []heartbeat.Participant
	Taken    time.Time
}

// readTable snapshots every slot and the totals under shm.Guard: a table
// truncated underneath gives an error naming it, not a crash.
func readTable(hb *heartbeat.Table) (tableView, error) {
	v := tableView{Path: hb.Path(), ID: hb.ID(), Capacity: hb.Capacity(), Leases: hb.LeasesPerSlot(), Taken: time.Now()}
	err := guard(hb.Path(), func() error {
		v.Parts = hb.Snapshots()
		v.Totals = hb.Totals()
		return nil
	})
	return v, err
}

// ring is one --ring: a ring or a deque (the deque shares the ring's
// slot words, lease records and positions), and how leases in it are
// shown.
type ring struct {
	Name     string // as given on the command line
	Path     string // resolved
	Kind     string // "ring" or "deque"
	ID       uint64
	Capacity uint64
	Found    bool             // not given with --ring: found by its id (findQueues)
	rh       *transport.Ring  // a ring's handle
	dh       *transport.Deque // a deque's handle
}

// ringSet is the files given with --ring, by id.
type ringSet struct {
	list []*ring
	byID map[uint64]*ring
}

// openRings opens each --ring, a ring or a deque (told apart by the
// kind in its header): read-only views, or writable handles without a
// participant entry (attach: OpenRingForRepair, whose Repair runs as the
// repairer entry, so a reap never needs a free entry) for
// reap --apply, whose repair needs them. A file of another kind is
// refused as unusable.
func (e *env) openRings(names []string, attach bool) (*ringSet, error) {
	rs := &ringSet{byID: map[uint64]*ring{}}
	for _, name := range names {
		x, err := e.openRing(name, attach)
		if err != nil {
			rs.Close()
			return nil, unusable(name, err)
		}
		if _, dup := rs.byID[x.ID]; dup {
			x.close()
			continue
		}
		rs.add(x)
	}
	return rs, nil
}

// add adds a ring not in the set.
func (rs *ringSet) add(x *ring) {
	rs.list = append(rs.list, x)
	rs.byID[x.ID] = x
}

// openRing opens one --ring after reading its kind from the header
// (shm.ReadHeader: pread, no mapping).
func (e *env) openRing(name string, attach bool) (*ring, error) {
	var x *ring
	err := shm.Guard(func() error {
		h, err := shm.ReadHeader(name, e.shmOpts()...)
		if err != nil {
			return err
		}
		kind := h.Kind
		switch kind {
		case layout.KindRing:
			var r *transport.Ring
			if attach {
				r, err = transport.OpenRingForRepair(name, e.shmOpts()...)
			} else {
				r, err = transport.OpenRingReadOnly(name, e.shmOpts()...)
			}
			if err != nil {
				return err
			}
			x = &ring{Name: name, Path: r.Path(), Kind: "ring", ID: r.ID(), Capacity: r.Capacity(), rh: r}
		case layout.KindDeque:
			var d *transport.Deque
			if attach {
				d, err = transport.OpenDequeForRepair(name, e.shmOpts()...)
			} else {
				d, err = transport.OpenDequeReadOnly(name, e.shmOpts()...)
			}
			if err != nil {
				return err
			}
			x = &ring{Name: name, Path: d.Path(), Kind: "deque", ID: d.ID(), Capacity: d.Capacity(), dh: d}
		default:
			return &shm.PathError{Op: "open", Path: shm.Resolve(name),
				Err: fmt.Errorf("%w: --ring takes rings and deques; file is %s", layout.ErrWrongKind, cliutil.KindNoun(kind))}
		}
		return nil
	})
	return x, err
}

// scan is the file's Scan: the slots that are not free, and for a deque
// its owner: "none", "alive" or "dead" (proven dead); "" for a ring. A
// scan that faulted (the file truncated or holed under it) is err.
func (r *ring) scan() (slots []transport.SlotReport, owner string, err error) {
	if r.dh == nil {
		s := r.rh.Scan()
		return s.Slots, "", s.Fault
	}
	s := r.dh.Scan()
	if s.Fault != nil {
		return nil, "", s.Fault
	}
	switch {
	case s.Counters.Owner < 0:
		owner = "none"
	case s.OwnerAlive:
		owner = "alive"
	default:
		owner = "dead"
	}
	return s.Slots, owner, nil
}

func (r *ring) close() error {
	if r.dh != nil {
		return r.dh.Close()
	}
	return r.rh.Close()
}

// handles returns the open rings and deques, for the watchdog: the rings
// first, then the deques, each in the order given.
func (rs *ringSet) handles() []heartbeat.Repairable {
	var rings, deques []heartbeat.Repairable
	for _, r := range rs.list {
		if r.dh != nil {
			deques = append(deques, r.dh)
		} else {
			rings = append(rings, r.rh)
		}
	}
	return append(rings, deques...)
}

// hasDeque reports whether a deque was given.
func (rs *ringSet) hasDeque() bool {
	for _, r := range rs.list {
		if r.dh != nil {
			return true
		}
	}
	return false
}

// Close closes every ring and deque (an attached one detaches).
func (rs *ringSet) Close() error {
	if rs == nil {
		return nil
	}
	var first error
	for _, r := range rs.list {
		if err := r.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lookup returns the ring with id, or nil.
func (rs *ringSet) lookup(id uint64) *ring {
	if rs == nil {
		return nil
	}
	return rs.byID[id]
}
