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

// ui is where progress goes: stderr, if it is a terminal.
type ui struct {
	w   io.Writer
	tty bool
}

func newUI(stderr io.Writer) *ui {
	return &ui{w: stderr, tty: cliutil.IsTerminal(stderr)}
}

// track shows a progress bar for a measurement of total units (current
// says how many are done), or, when d > 0, of d of wall time. It returns
// a stop function, safe to call more than once, that removes the bar.
func (u *ui) track(desc string, total int64, d time.Duration, current func() int64) (stop func()) {
	if u == nil || !u.tty {
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
			if bar == nil {
				if time.Since(began) < barDelay {
					continue
				}
				max, what := total, "msgs"
				if d > 0 {
					max, what = d.Milliseconds(), "ms"
				}
				bar = progressbar.NewOptions64(max,
					progressbar.OptionSetWriter(u.w),
					progressbar.OptionSetDescription(fmt.Sprintf("%-12s", desc)),
					progressbar.OptionSetItsString(what),
					progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(barTick),
					progressbar.OptionClearOnFinish(),
				)
			}
			if d > 0 {
				_ = bar.Set64(min(time.Since(began).Milliseconds(), d.Milliseconds()))
			} else {
				_ = bar.Set64(min(current(), total))
			}
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

// note prints one line of information on stderr, terminal or not.
func (u *ui) note(format string, args ...any) {
	if u == nil {
		return
	}
	fmt.Fprintf(u.w, "passbench: "+format+"\n", args...)
}
