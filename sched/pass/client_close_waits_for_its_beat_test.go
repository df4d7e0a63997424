package pass

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Regression (found in review): NewClient starts c.beat, a goroutine that calls c.member.Beat()
// on every tick until its context ends, but Close only cancels that
// context: it waits for the receiving goroutine (<-c.done), not for the
// beating one, and then unregisters and unmaps the heartbeat table
// (seat.close). Beat checks m.gone and then stores into the table's
// mapping: a beat that passed the check before Unregister and stores after
// the munmap faults (SIGSEGV, "unexpected fault address"), killing the
// client's process. The Pool runs its beat under wg and has no such race.
//
// The child opens and closes clients with a fast beat until it has done
// ROUNDS of them; the parent fails if it died of a fault.
func TestClientCloseWaitsForItsBeat(t *testing.T) {
	f := newSchedFiles(t)
	c := passHelper.Start(t, "review-beat-close", append(f.env(), fmt.Sprintf("ROUNDS=%d", proctest.SoakLoops(t)/2))...)
	err := c.Wait()
	out, errOut := c.Output()
	if strings.Contains(errOut, "unexpected fault address") || strings.Contains(errOut, "SIGSEGV") {
		i := strings.Index(errOut, "goroutine")
		t.Fatalf("the client process faulted in Close (a beat after the unmap):\n%s", head(errOut[max(i, 0):], 25))
	}
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, errOut)
	}
}

func head(s string, lines int) string {
	ls := strings.SplitN(s, "\n", lines+1)
	return strings.Join(ls[:min(len(ls), lines)], "\n")
}

func init() {
	moreRoles["review-beat-close"] = func(ctx context.Context, f schedFiles) error {
		// More running threads than CPUs: the kernel deschedules the
		// beating thread often, and now and then between its check of
		// gone and its store, while Close runs to the unmap on another
		// CPU. (Spinners keep the CPUs oversubscribed.)
		runtime.GOMAXPROCS(8)
		var stop atomic.Bool
		defer stop.Store(true)
		for i := 0; i < 6; i++ {
			go func() {
				for n := 0; !stop.Load(); n++ {
				}
			}()
		}
		rounds := proctest.EnvInt("ROUNDS")
		for i := 0; i < rounds; i++ {
			cfg := f.client()
			cfg.BeatInterval = time.Nanosecond
			c, err := NewClient(cfg)
			if err != nil {
				return err
			}
			time.Sleep(time.Duration(i%3) * time.Millisecond)
			if err := c.Close(); err != nil {
				return err
			}
			time.Sleep(time.Millisecond) // let a preempted beat resume
		}
		fmt.Println("done")
		return nil
	}
}
