package pass

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Regression (found in review): runPass marks its run executing (under r.mu) and only then, with
// no lock and no share of anything Stop waits for, reads the cancel board
// (p.board.has). Stop's abandon() can come in between: it marks the run
// abandoned and gives back the worker's share of wg, and Stop goes on to
// unmap the board (seat.close) without waiting for that worker, which then
// reads unmapped memory: SIGSEGV in the pool's process.
//
// has() scans the whole board when a request is posted and the token is
// not on it; with a 65536-entry board that scan is long enough for Stop to
// run to the unmap while it lasts. The child stops ROUNDS pools, each the
// moment its worker is seen executing a pass.
func TestStopNeverUnmapsTheBoardUnderAWorker(t *testing.T) {
	f := newSchedFiles(t)
	c := passHelper.Start(t, "review-stop-under-runpass", append(f.env(), "ROUNDS=300")...)
	err := c.Wait()
	out, errOut := c.Output()
	if strings.Contains(errOut, "unexpected fault address") || strings.Contains(errOut, "SIGSEGV") {
		i := strings.Index(errOut, "goroutine")
		t.Fatalf("the pool process faulted (board read after Stop unmapped it):\n%s", head(errOut[max(i, 0):], 14))
	}
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, errOut)
	}
}

func init() {
	moreRoles["review-stop-under-runpass"] = func(ctx context.Context, f schedFiles) error {
		rounds := proctest.EnvInt("ROUNDS")
		for i := 0; i < rounds; i++ {
			cfg := f.pool(1)
			cfg.CancelEntries = 1 << 16
			cfg.Registry = NewRegistry()
			cfg.Registry.Register(closureStall, func(ctx context.Context, a []byte) ([]byte, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
			p, err := NewPool(cfg)
			if err != nil {
				return err
			}
			cc := f.client()
			cc.CancelEntries = 1 << 16
			c, err := NewClient(cc)
			if err != nil {
				return err
			}
			c.board.request(c.ticket, 1<<60) // requests > 0: has() scans every entry
			if _, err := c.Submit(ctx, closureStall, []byte("x")); err != nil {
				return err
			}
			r := p.runs[0]
			for !r.stateIs(runExecuting) {
			}
			_ = p.Stop(stopped())
			if err := c.Close(); err != nil {
				return err
			}
		}
		fmt.Println("done")
		return nil
	}
}
