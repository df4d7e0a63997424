package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// Progress bars appear only on a terminal, and only for measurements that
// have already taken longer than barDelay.
const (
	barDelay = time.Second
	barTick  = 100 * time.Millisecond
)

// ui is where progress goes: stderr. On a terminal, a bar for every
// measurement that takes a while. When stdout is not a terminal (the
// results go to a file or a pipe, and nothing shows until the end), one
// line per stage besides: a measurement, or each run of a series.
type ui struct {
	w      io.Writer
	tty    bool // stderr is a terminal: progress bars
	stages bool // stdout is not a terminal: one line per stage
}

func newUI(stdout, stderr io.Writer) *ui {
	return &ui{w: stderr, tty: cliutil.IsTerminal(stderr), stages: !cliutil.IsTerminal(stdout)}
}

// stage announces one stage on stderr when stdout is not a terminal.
func (u *ui) stage(format string, args ...any) {
	if u != nil && u.stages {
		u.note(format, args...)
	}
}

// inSeries is the ui for the measurements of a series (the comparison)
// that announces each of them itself: bars, no stage lines of their own.
func (u *ui) inSeries() *ui {
	if u == nil {
		return nil
	}
	v := *u
	v.stages = false
	return &v
}

// track shows a progress bar for a measurement of total units (unit names
// them, current says how many are done), or, when d > 0, of d of wall
// time. When stdout is not a terminal it first prints the stage's line. It
// returns a stop function, safe to call more than once, that removes the
// bar.
func (u *ui) track(desc, unit string, total int64, d time.Duration, current func() int64) (stop func()) {
	if u == nil {
		return func() {}
	}
	if d > 0 {
		u.stage("%s: for %v", desc, d)
	} else {
		u.stage("%s: %d %s", desc, total, unit)
	}
	if !u.tty {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		began := time.Now()
		tick := time.NewTicker(barTick)
		defer tick.Stop()
		var bar *progressbar.ProgressBar
		for {
			select {
			case <-quit:
				if bar != nil {
					_ = bar.Clear()
				}
				return
			case <-tick.C:
			}
			max, done := total, int64(0)
			if d > 0 {
				max, done = d.Milliseconds(), min(time.Since(began).Milliseconds(), d.Milliseconds())
			} else {
				done = min(current(), total)
			}
			if bar == nil {
				if time.Since(began) < barDelay {
					continue
				}
				bar = progressbar.NewOptions64(max,
					progressbar.OptionSetWriter(u.w),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(barTick),
					progressbar.OptionClearOnFinish(),
				)
			}
			bar.Describe(progressText(desc, unit, done, total, d))
			_ = bar.Set64(done)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-finished
		})
	}
}

// progressText is the bar's description: what is measured and how far it
// is, with units: "ring/poll    1.9 of 3.0 s", "rtt uds/block 1900 of
// 20000 round trips". done is in milliseconds for a timed measurement.
func progressText(desc, unit string, done, total int64, d time.Duration) string {
	if d > 0 {
		return fmt.Sprintf("%-12s %.1f of %.1f s", desc, float64(done)/1e3, d.Seconds())
	}
	return fmt.Sprintf("%-12s %d of %d %s", desc, done, total, unit)
}

// note prints one line of information on stderr, terminal or not.
func (u *ui) note(format string, args ...any) {
	if u == nil {
		return
	}
	fmt.Fprintf(u.w, "passbench: "+format+"\n", args...)
}
