package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport/check"
)

var errEnough = errors.New("enough frames")

func runWatch(c *cli.Context, path string) error {
	interval, count := c.Duration("interval"), c.Int("count")
	if interval <= 0 {
		return cliutil.Usage("watch: --interval must be positive")
	}
	if count < 0 {
		return cliutil.Usage("watch: --count must not be negative")
	}
	k, v, err := openView(c, path)
	if err != nil {
		return err
	}
	defer v.Close()
	frame := v.watch(path, interval)
	if frame == nil {
		return k.refuse(path, "watch", "rings and deques")
	}
	if err := warnStranded(c, path, v); err != nil {
		return err
	}
	tty := cliutil.IsTerminal(c.App.Writer)
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	err = cliutil.Watch(ctx, c.App.Writer, interval, func(n int) (string, error) {
		if count > 0 && n >= count {
			return "", errEnough
		}
		out, err := frame(tty)
		if err != nil {
			return "", err
		}
		if count > 0 && n == count-1 {
			cancel()
		}
		return out, nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// frames makes a kind's frame function: check the file (a file truncated,
// grown or holed since the last frame ends the watch, exit 3, before a
// page is touched), sample under the guard, render against the previous
// sample.
func frames[S any](path string, file interface{ CheckFile() error }, sample func() (S, error), render func(prev *S, cur S, tty bool) string) func(tty bool) (string, error) {
	var prev *S
	return func(tty bool) (string, error) {
		if err := file.CheckFile(); err != nil {
			return "", cliutil.FileError(path, err)
		}
		var s S
		if err := guard(path, func() (err error) { s, err = sample(); return err }); err != nil {
			return "", cliutil.FileError(path, err)
		}
		out := render(prev, s, tty)
		prev = &s
		return out, nil
	}
}

// rate is n per second over dt, "-" without an interval.
func rate(dt time.Duration, n uint64) string {
	if dt <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/dt.Seconds(), 'f', 1, 64)
}

// watchCol is one column of a frame: its name (in the plain line; the
// table header has spaces for underscores) and its value.
type watchCol struct{ name, val string }

func num(name string, v uint64) watchCol { return watchCol{name, strconv.FormatUint(v, 10)} }

// peerCounts is what a frame shows of the participant table: the
// participant entries in use by live processes, proven dead, and of
// unknown liveness (treated as alive, never repaired), and the repairer
// entry's state: free, repairing (a live repair without an entry of its
// own), dead (a repair died: the next one finishes its work) or unknown.
type peerCounts struct {
	Alive, Dead, Unknown int
	Repairer             string
}

// countPeers counts a scan's participant table (check.Peer, every entry).
func countPeers(peers []check.Peer) peerCounts {
	n := peerCounts{Repairer: "free"}
	for _, p := range peers {
		var class string
		switch {
		case p.State == "free":
			continue
		case p.Dead:
			class = "dead"
		case p.Unknown:
			class = "unknown"
		default:
			class = "alive"
		}
		if p.Repairer {
			if class == "alive" {
				class = "repairing"
			}
			n.Repairer = class
			continue
		}
		switch class {
		case "dead":
			n.Dead++
		case "unknown":
			n.Unknown++
		default:
			n.Alive++
		}
	}
	return n
}

// cols are the frame's columns for the participant table.
func (n peerCounts) cols() []watchCol {
	return []watchCol{num("alive", uint64(n.Alive)), num("dead", uint64(n.Dead)), num("unknown", uint64(n.Unknown)), {"repairer", n.Repairer}}
}

// renderFrame draws one frame: on a terminal a title and a table, else
// one line "TIME name=value ...".
func renderFrame(path string, interval time.Duration, at time.Time, tty bool, cols []watchCol) string {
	var b strings.Builder
	if !tty {
		b.WriteString(at.UTC().Format(time.RFC3339))
		for _, c := range cols {
			fmt.Fprintf(&b, " %s=%s", c.name, c.val)
		}
		b.WriteByte('\n')
		return b.String()
	}
	fmt.Fprintf(&b, "ringctl watch %s   every %s   %s   (Ctrl-C to quit)\n\n", path, interval, at.Format("15:04:05"))
	var heads, vals []string
	for _, c := range cols {
		heads, vals = append(heads, strings.ReplaceAll(c.name, "_", " ")), append(vals, c.val)
	}
	cliutil.Table(&b, heads, [][]string{vals})
	return b.String()
}

func watchCommand() *cli.Command {
	return command("watch", "a live view of a ring's or deque's depth, rates, leases and orphans (read-only)", "PATH [--interval D] [--count N]", runWatch,
		`Redrawn in place on a terminal; one plain line per interval otherwise:
  TIME depth=D/CAPACITY push/s=R pop/s=R leased=N orphaned=N full_hits=N empty_hits=N PEERS
pop/s counts messages consumed: pops plus acked leases. For a deque:
  TIME len=L/CAPACITY top=T bottom=B push/s=R take/s=R leased=N returned=N orphaned=N owner=O full_hits=N empty_hits=N PEERS
take/s counts owner pops, steals and acked leases; O is alive, dead or none.
PEERS is alive=N dead=N unknown=N repairer=S: the participant entries of live processes,
of processes proven dead, and of undecided liveness (left alone), and the repairer entry's
state S (free, repairing, dead or unknown).
Rates are "-" in the first frame.
Ctrl-C ends it (exit 0).`,
		&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between frames"},
		&cli.IntFlag{Name: "count", Usage: "exit 0 after `N` frames (0: until Ctrl-C)"},
		cliutil.AllowModeFlag(), cliutil.OwnerFlag())
}
