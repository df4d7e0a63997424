package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/sched"
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
}

func newApp(stdout io.Writer) *cli.App {
	return newAppEnv(&env{stdout: stdout, readyTimeout: readyWait})
}

func newAppEnv(e *env) *cli.App {
	return &cli.App{
		Name:  "hbdump",
		Usage: "show, watch, check and reap the participants of a shmkit heartbeat table",
		UsageText: "hbdump PATH [--json] [--all] [--stale D] [--ring R ...]\n" +
			"hbdump watch PATH [--interval D] [--stale D] [--ring R ...] [--count N]\n" +
			"hbdump check PATH [--stale D] [--format text|json|prometheus] [--ring R ...]\n" +
			"hbdump reap PATH [--ring R ...] [--apply] [--json]\n" +
			"hbdump create PATH --capacity N [--leases L] [--mode MODE]",
		Description: "Without a command, prints one line per registered participant: slot, pid, process\n" +
			"start time, state (alive, stale, dead, free), beat age, label, the leases it holds and,\n" +
			"for the unhealthy, why. A bare name means /dev/shm/NAME. The table is mapped read-only\n" +
			"except by reap --apply and create. Flags may follow PATH. See docs/cli.md.",
		// The top level's flags are those of `hbdump PATH`, not global ones.
		CustomAppHelpTemplate: strings.ReplaceAll(cli.AppHelpTemplate, "GLOBAL OPTIONS:", "OPTIONS (hbdump PATH):") +
			"\n" + cliutil.ExitCodesHelp + "\n",
		Writer:      e.stdout,
		HideVersion: true,
		Flags:       dumpFlags(),
		Action:      e.dump,
		Commands:    []*cli.Command{e.watchCommand(), e.checkCommand(), e.reapCommand(), e.createCommand()},
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

const ringShowUsage = "a ring the participants lease from: its leases are shown by path and position (repeatable)"

// args returns the positional arguments of the running command, after
// applying the flags that follow them ("hbdump PATH --json"): urfave/cli
// stops reading flags at the first argument.
func args(c *cli.Context) ([]string, error) {
	var pos []string
	in := c.Args().Slice()
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			return append(pos, in[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "help" || name == "h" {
			return nil, showHelp(c)
		}
		f := lookupFlag(c.Command.Flags, name)
		if f == nil {
			return nil, cliutil.Usage("flag provided but not defined: -%s", name)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 >= len(in) {
				return nil, cliutil.Usage("flag needs an argument: -%s", name)
			}
			i++
			value = in[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, cliutil.Usage("invalid value %q for flag -%s: %v", value, name, err)
		}
	}
	return pos, nil
}

// errHelpShown ends a command that printed its help: exit 0, nothing more.
var errHelpShown = errors.New("")

func showHelp(c *cli.Context) error {
	var err error
	if c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		err = cli.ShowAppHelp(c)
	} else {
		err = cli.ShowCommandHelp(c, c.Command.Name)
	}
	if err != nil {
		return err
	}
	return errHelpShown
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func allowModeFlag() cli.Flag {
	return &cli.StringFlag{Name: "allow-mode", Value: "0600",
		Usage: "widest permission `MODE` accepted on an existing file (shmkit refuses files more open than this)"}
}

// pathArg returns the one PATH argument of a command, and applies
// --allow-mode when the command has it.
func (e *env) pathArg(c *cli.Context) (string, error) {
	pos, err := args(c)
	if err != nil {
		return "", err
	}
	if lookupFlag(c.Command.Flags, "allow-mode") != nil {
		m, err := strconv.ParseUint(c.String("allow-mode"), 8, 32)
		if err != nil || m > 0o777 {
			return "", cliutil.Usage("--allow-mode: %q is not an octal permission mode such as 0600", c.String("allow-mode"))
		}
		e.allowMode = os.FileMode(m)
	}
	switch len(pos) {
	case 0:
		return "", cliutil.Usage("missing PATH (a heartbeat table: a path, or a name in /dev/shm)")
	case 1:
		if pos[0] == "" {
			return "", cliutil.Usage("empty PATH")
		}
		return pos[0], nil
	}
	return "", cliutil.Usage("one PATH only, got %d arguments: %s", len(pos), strings.Join(pos, " "))
}

// staleOf reads --stale.
func staleOf(c *cli.Context) (time.Duration, error) {
	d := c.Duration("stale")
	if d < 0 {
		return 0, cliutil.Usage("--stale must not be negative (0 disables it), got %v", d)
	}
	return d, nil
}

// run wraps a command's action: a command that printed its help exits 0.
func run(action func(*cli.Context) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := action(c)
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
}

// shmOpts are the options of every open.
func (e *env) shmOpts(extra ...shm.Option) []shm.Option {
	if e.readyTimeout > 0 {
		extra = append(extra, shm.WithReadyTimeout(e.readyTimeout))
	}
	if e.allowMode != 0 {
		extra = append(extra, shm.WithMode(e.allowMode))
	}
	return extra
}

// openTable maps the heartbeat table: read-only unless write is set.
func (e *env) openTable(path string, write bool) (*sched.Heartbeat, error) {
	opts := e.shmOpts()
	if !write {
		opts = append(opts, shm.ReadOnly())
	}
	var hb *sched.Heartbeat
	err := shm.Guard(func() (err error) {
		hb, err = sched.OpenHeartbeat(path, opts...)
		return err
	})
	if err != nil {
		return nil, unusable(path, err)
	}
	return hb, nil
}

// unusable makes sure an error saying the file itself is bad exits 3 and
// names the path: the library's "corrupt" errors are not in cliutil's
// list, and a fault during open carries no path.
func unusable(path string, err error) error {
	if err == nil {
		return nil
	}
	if !strings.Contains(err.Error(), shm.Resolve(path)) {
		err = fmt.Errorf("%s: %w", shm.Resolve(path), err)
	}
	if !cliutil.IsUnusable(err) && (errors.Is(err, sched.ErrCorruptTable) || errors.Is(err, transport.ErrCorrupt)) {
		return cliutil.Exit(cliutil.ExitUnusable, err)
	}
	return err
}

// tableView is one read of the whole table.
type tableView struct {
	Path     string
	Capacity int
	Leases   int // lease records per slot
	Totals   sched.Totals
	Parts    []sched.Participant
	Taken    time.Time
}

// readTable snapshots every slot and the totals under shm.Guard: a table
// truncated underneath gives an error naming it, not a crash.
func readTable(hb *sched.Heartbeat) (tableView, error) {
	v := tableView{Path: hb.Path(), Capacity: hb.Capacity(), Leases: hb.LeasesPerSlot(), Taken: time.Now()}
	err := guard(hb.Path(), func() error {
		v.Parts = hb.Snapshots()
		v.Totals = hb.Totals()
		return nil
	})
	return v, err
}

// ring is one --ring: how leases in it are shown.
type ring struct {
	Name     string // as given on the command line
	Path     string // resolved
	ID       uint64
	Capacity uint64
	handle   *transport.Ring
}

// ringSet is the rings given with --ring, by id.
type ringSet struct {
	list []*ring
	byID map[uint64]*ring
}

// openRings opens each --ring: read-only views, or attached handles
// (attach) for reap --apply, whose repair needs them.
func (e *env) openRings(names []string, attach bool) (*ringSet, error) {
	rs := &ringSet{byID: map[uint64]*ring{}}
	for _, name := range names {
		var r *transport.Ring
		err := shm.Guard(func() (err error) {
			if attach {
				r, err = transport.OpenRing(name, e.shmOpts()...)
			} else {
				r, err = transport.OpenRingReadOnly(name, e.shmOpts()...)
			}
			return err
		})
		if err != nil {
			rs.Close()
			return nil, unusable(name, fmt.Errorf("--ring: %w", err))
		}
		if _, dup := rs.byID[r.ID()]; dup {
			r.Close()
			continue
		}
		x := &ring{Name: name, Path: r.Path(), ID: r.ID(), Capacity: r.Capacity(), handle: r}
		rs.list = append(rs.list, x)
		rs.byID[x.ID] = x
	}
	return rs, nil
}

// handles returns the open rings.
func (rs *ringSet) handles() []*transport.Ring {
	var out []*transport.Ring
	for _, r := range rs.list {
		out = append(out, r.handle)
	}
	return out
}

// Close closes every ring (an attached one detaches).
func (rs *ringSet) Close() error {
	if rs == nil {
		return nil
	}
	var first error
	for _, r := range rs.list {
		if err := r.handle.Close(); err != nil && first == nil {
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
