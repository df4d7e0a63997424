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
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "a live view of a ring's or deque's depth, rates, leases and orphans (read-only)",
		Description: "Redrawn in place on a terminal; one plain line per interval otherwise:\n" +
			"  TIME depth=D/CAPACITY push/s=R pop/s=R leased=N orphaned=N full_hits=N empty_hits=N\n" +
			"pop/s counts messages consumed: pops plus acked leases. For a deque:\n" +
			"  TIME len=L/CAPACITY top=T bottom=B push/s=R take/s=R leased=N returned=N orphaned=N owner=O full_hits=N empty_hits=N\n" +
			"take/s counts owner pops, steals and acked leases; O is alive, dead or none.\n" +
			"Rates are \"-\" in the first frame.\n" +
			"Ctrl-C ends it (exit 0).",
		ArgsUsage: "PATH [--interval D] [--count N]",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between frames"},
			&cli.IntFlag{Name: "count", Usage: "exit 0 after `N` frames (0: until Ctrl-C)"},
			cliutil.AllowModeFlag(),
		},
		Action: cliutil.WithPath(runWatch),
	}
}

// watchSample is what one frame shows.
type watchSample struct {
	At       time.Time
	Counters transport.Counters
	Leased   uint64 // leases held by live participants
	Orphaned uint64
}

var errEnough = errors.New("enough frames")

func runWatch(c *cli.Context, path string) error {
	interval, count := c.Duration("interval"), c.Int("count")
	if interval <= 0 {
		return cliutil.Usage("watch: --interval must be positive")
	}
	if count < 0 {
		return cliutil.Usage("watch: --count must not be negative")
	}
	kind, err := fileKind(c, path)
	if err != nil {
		return err
	}
	var frame func(tty bool) (string, error)
	if kind == layout.KindDeque {
		d, err := openDequeView(c, path)
		if err != nil {
			return err
		}
		defer d.Close()
		var prev *dequeSample
		frame = func(tty bool) (string, error) {
			var s dequeSample
			if err := guard(path, func() error { s = sampleDeque(d); return nil }); err != nil {
				return "", err
			}
			out := renderDequeWatch(path, d.Capacity(), interval, prev, s, tty)
			prev = &s
			return out, nil
		}
	} else {
		r, err := openView(c, path)
		if err != nil {
			return err
		}
		defer r.Close()
		var prev *watchSample
		frame = func(tty bool) (string, error) {
			var s watchSample
			if err := guard(path, func() error { s = sample(r); return nil }); err != nil {
				return "", err
			}
			out := renderWatch(path, r.Capacity(), interval, prev, s, tty)
			prev = &s
			return out, nil
		}
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

// sample reads one frame's numbers. It reads the mapping: run it under guard.
func sample(r *transport.Ring) watchSample {
	scan := r.Scan()
	n := countClasses(scan, r.Capacity())
	return watchSample{At: time.Now(), Counters: scan.Counters, Leased: n.Leased, Orphaned: n.Orphaned}
}

// renderWatch draws one frame: a table on a terminal, one line otherwise.
// Rates compare with the previous frame (none in the first).
func renderWatch(path string, capacity uint64, interval time.Duration, prev *watchSample, cur watchSample, tty bool) string {
	c := cur.Counters
	push, pop := "-", "-"
	if prev != nil {
		if dt := cur.At.Sub(prev.At).Seconds(); dt > 0 {
			p := prev.Counters
			push = strconv.FormatFloat(float64(c.Pushed-p.Pushed)/dt, 'f', 1, 64)
			pop = strconv.FormatFloat(float64(c.Popped+c.Acked-p.Popped-p.Acked)/dt, 'f', 1, 64)
		}
	}
	depth := fmt.Sprintf("%d/%d", c.Depth(), capacity)
	if !tty {
		return fmt.Sprintf("%s depth=%s push/s=%s pop/s=%s leased=%d orphaned=%d full_hits=%d empty_hits=%d\n",
			cur.At.UTC().Format(time.RFC3339), depth, push, pop, cur.Leased, cur.Orphaned, c.FullHits, c.EmptyHits)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ringctl watch %s   every %s   %s   (Ctrl-C to quit)\n\n", path, interval, cur.At.Format("15:04:05"))
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	cliutil.Table(&b, []string{"depth", "push/s", "pop/s", "leased", "orphaned", "full hits", "empty hits"},
		[][]string{{depth, push, pop, u(cur.Leased), u(cur.Orphaned), u(c.FullHits), u(c.EmptyHits)}})
	return b.String()
}

// dequeSample is what one frame of a deque shows.
type dequeSample struct {
	At       time.Time
	Counters transport.DequeCounters
	Leased   uint64 // leases held by live participants
	Returned uint64
	Orphaned uint64
	Owner    string // alive, dead, none
}

// sampleDeque reads one frame's numbers. It reads the mapping: run it
// under guard.
func sampleDeque(d *transport.Deque) dequeSample {
	scan := d.Scan()
	n := countDequeClasses(scan.Slots, d.Capacity())
	s := dequeSample{At: time.Now(), Counters: scan.Counters, Leased: n.Leased, Returned: n.Returned, Orphaned: n.Orphaned, Owner: "none"}
	switch {
	case scan.Counters.Owner >= 0 && scan.OwnerAlive:
		s.Owner = "alive"
	case scan.Counters.Owner >= 0:
		s.Owner = "dead"
	}
	return s
}

// renderDequeWatch draws one frame of a deque, as renderWatch does a ring's.
func renderDequeWatch(path string, capacity uint64, interval time.Duration, prev *dequeSample, cur dequeSample, tty bool) string {
	c := cur.Counters
	push, take := "-", "-"
	if prev != nil {
		if dt := cur.At.Sub(prev.At).Seconds(); dt > 0 {
			p := prev.Counters
			push = strconv.FormatFloat(float64(c.Pushed-p.Pushed)/dt, 'f', 1, 64)
			take = strconv.FormatFloat(float64(c.OwnerPopped+c.Stolen+c.Acked-p.OwnerPopped-p.Stolen-p.Acked)/dt, 'f', 1, 64)
		}
	}
	length := fmt.Sprintf("%d/%d", dequeLen(c, capacity), capacity)
	if !tty {
		return fmt.Sprintf("%s len=%s top=%d bottom=%d push/s=%s take/s=%s leased=%d returned=%d orphaned=%d owner=%s full_hits=%d empty_hits=%d\n",
			cur.At.UTC().Format(time.RFC3339), length, c.Top, c.Bottom, push, take, cur.Leased, cur.Returned, cur.Orphaned, cur.Owner, c.FullHits, c.EmptyHits)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ringctl watch %s   every %s   %s   (Ctrl-C to quit)\n\n", path, interval, cur.At.Format("15:04:05"))
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	cliutil.Table(&b, []string{"len", "top", "bottom", "push/s", "take/s", "leased", "returned", "orphaned", "owner", "full hits", "empty hits"},
		[][]string{{length, u(c.Top), u(c.Bottom), push, take, u(cur.Leased), u(cur.Returned), u(cur.Orphaned), cur.Owner, u(c.FullHits), u(c.EmptyHits)}})
	return b.String()
}
