package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func (e *env) watchCommand() *cli.Command {
	return command(&cli.Command{
		Name:      "watch",
		Usage:     "a live view of the table, unhealthy participants first",
		UsageText: "hbdump watch PATH [--interval D] [--stale D] [--ring R ...] [--count N]",
		Description: "Redraws the participant table every --interval: in place on a terminal, with states\n" +
			"coloured; as successive plain frames otherwise. Dead and corrupt first, then unknown and\n" +
			"stale, then alive; free slots are not listed. CHANGE marks participants that appeared\n" +
			"(+new), died (!died) or left (-left: unregistered or reclaimed); a mark stays 5 s (at least\n" +
			"one frame), and a participant that left stays listed, marked, as long.\n" +
			"The footer has the totals. The table is mapped read-only: watching never writes it or\n" +
			"takes a lock.\n" +
			"Ctrl-C exits 0.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between frames"},
			staleFlag(),
			ringFlag(ringShowUsage),
			&cli.IntFlag{Name: "count", Usage: "stop after this many frames (0: until interrupted)"},
			cliutil.AllowModeFlag(),
			cliutil.OwnerFlag(),
		},
		Action: e.watch,
	})
}

func (e *env) watch(c *cli.Context) error {
	path, err := e.pathArg(c)
	if err != nil {
		return err
	}
	stale, err := staleOf(c)
	if err != nil {
		return err
	}
	interval, count := c.Duration("interval"), c.Int("count")
	if interval <= 0 {
		return cliutil.Usage("--interval must be positive, got %v", interval)
	}
	if count < 0 {
		return cliutil.Usage("--count must not be negative, got %d", count)
	}
	hb, err := e.openTable(path, false)
	if err != nil {
		return err
	}
	defer hb.Close()
	rings, err := e.openRings(c.StringSlice("ring"), false)
	if err != nil {
		return err
	}
	defer rings.Close()
	// The rings of the leases held when the view starts, found beside
	// the table by their ids (later ones are shown by id).
	if v, err := readTable(hb); err == nil {
		e.findLeaseRings(path, v.Parts, rings)
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	opts := watchOptions{Stale: stale, Interval: interval, Rings: rings, Colour: cliutil.IsTerminal(e.stdout)}
	var state watchState
	err = cliutil.Watch(ctx, e.stdout, interval, func(frame int) (string, error) {
		if count > 0 && frame >= count {
			// Watch may tick once more after the last frame cancelled ctx.
			return "", errWatchDone
		}
		v, err := readTable(hb)
		if err != nil {
			return "", err
		}
		var out string
		out, state = renderWatch(state, v, opts)
		if count > 0 && frame+1 >= count {
			cancel() // this frame is the last
		}
		return out, nil
	})
	if errors.Is(err, errWatchDone) {
		return nil
	}
	return err
}

// errWatchDone ends a watch that has drawn its --count frames.
var errWatchDone = errors.New("watch: frames drawn")

// watchOptions are what a frame depends on besides the table.
type watchOptions struct {
	Stale    time.Duration
	Interval time.Duration
	Rings    *ringSet
	Colour   bool
}

// identity names one registration: a slot reused by another process, or
// by the same pid after a free (which bumps the generation), is another
// participant. The start time is left out: a slot being registered shows
// 0 until the registrant writes it.
type identity struct {
	Slot int
	PID  int32
	Gen  uint32
}

func identityOf(r row) identity {
	return identity{Slot: r.P.Slot, PID: r.P.ID.PID, Gen: r.P.Gen}
}

// markHold is how long a CHANGE mark stays (and a participant that left
// stays listed, marked -left): long enough to be read on a watch redrawn
// every 500 ms, and never less than one frame.
const markHold = 5 * time.Second

// watchState is what the renderer keeps from one frame to the next.
type watchState struct {
	primed bool
	seen   map[identity]row      // the participants of the previous frame
	marks  map[identity]heldMark // the marks still shown, by participant
}

// heldMark is a CHANGE mark and the frame that first showed it (the time
// the table was read, so that the renderer stays a function of its
// inputs); a participant that left keeps its last row here.
type heldMark struct {
	text string
	at   time.Time
	row  row // -left only
}

// renderWatch draws one frame from the previous frame's state and a read
// of the table, and returns the state for the next. It is a pure function
// of its arguments, so tests feed it canned snapshots.
func renderWatch(prev watchState, v tableView, o watchOptions) (string, watchState) {
	rows := rowsOf(v.Parts, o.Stale, false)
	next := watchState{primed: true, seen: make(map[identity]row, len(rows)), marks: map[identity]heldMark{}}
	var newN, diedN, leftN int
	for _, r := range rows {
		id := identityOf(r)
		next.seen[id] = r
		if !prev.primed {
			continue
		}
		before, ok := prev.seen[id]
		switch {
		case !ok:
			next.marks[id] = heldMark{text: "+new", at: v.Taken}
			newN++
			if r.Health == hDead {
				diedN++
			}
		case r.Health == hDead && before.Health != hDead:
			next.marks[id] = heldMark{text: "!died", at: v.Taken}
			diedN++
		}
	}
	// Participants of the previous frame that are gone now.
	if prev.primed {
		for id, r := range prev.seen {
			if _, still := next.seen[id]; still {
				continue
			}
			r.Reason = leftReason(id, v)
			r.Health = hLeft
			next.marks[id] = heldMark{text: "-left", at: v.Taken, row: r}
			leftN++
		}
	}
	// Earlier marks stay for markHold: a mark of a participant still
	// listed (unless this frame marked it again), and a participant that
	// left, listed once more.
	for id, m := range prev.marks {
		if _, again := next.marks[id]; again || v.Taken.Sub(m.at) >= markHold {
			continue
		}
		_, listed := next.seen[id]
		if listed == (m.text == "-left") {
			continue // back in the table after it left, or left after its mark
		}
		next.marks[id] = m
	}
	var left []row
	for _, m := range next.marks {
		if m.text == "-left" {
			left = append(left, m.row)
		}
	}
	sort.Slice(left, func(i, j int) bool { // a slot may have been left twice
		if left[i].P.Slot != left[j].P.Slot {
			return left[i].P.Slot < left[j].P.Slot
		}
		return left[i].P.Gen < left[j].P.Gen
	})
	sortUnhealthyFirst(rows)
	sortUnhealthyFirst(left)
	rows = append(rows, left...)

	var b strings.Builder
	fmt.Fprintf(&b, "hbdump watch %s  %s  every %v, %s\n", v.Path, v.Taken.Format("2006-01-02 15:04:05"), o.Interval, staleText(o.Stale))
	if err := writeParticipants(&b, rows, o.Rings, o.Colour, func(r row) string { return next.marks[identityOf(r)].text }); err != nil {
		fmt.Fprintf(&b, "(table: %v)\n", err)
	}
	n := countOf(v.Parts, o.Stale)
	health := []string{
		cliutil.Colour(o.Colour && n.Alive > 0, cliutil.Green, fmt.Sprintf("%d alive", n.Alive)),
		cliutil.Colour(o.Colour && n.Stale > 0, cliutil.Yellow, fmt.Sprintf("%d stale", n.Stale)),
	}
	if n.Unknown > 0 {
		health = append(health, cliutil.Colour(o.Colour, cliutil.Yellow, fmt.Sprintf("%d unknown", n.Unknown)))
	}
	health = append(health,
		cliutil.Colour(o.Colour && n.Dead > 0, cliutil.Red, fmt.Sprintf("%d dead", n.Dead)),
		fmt.Sprintf("%d free", n.Free))
	if n.Corrupt > 0 {
		health = append(health, cliutil.Colour(o.Colour, cliutil.Red, fmt.Sprintf("%d corrupt", n.Corrupt)))
	}
	fmt.Fprintf(&b, "%s | totals: %d registered, %d unregistered, %d reclaimed | since last frame: %d new, %d died, %d left\n",
		strings.Join(health, ", "), v.Totals.Registered, v.Totals.Unregistered, v.Totals.Reclaimed, newN, diedN, leftN)
	return b.String(), next
}

// leftReason says how a participant of the previous frame left its slot,
// from the slot's last-exit word when it names that participant.
func leftReason(id identity, v tableView) string {
	if id.Slot < 0 || id.Slot >= len(v.Parts) {
		return ""
	}
	e := v.Parts[id.Slot].LastExit
	if e.PID == uint32(id.PID) && e.Gen == id.Gen && e.Reason != 0 {
		return exitReasonName(e.Reason)
	}
	return "slot reused"
}
