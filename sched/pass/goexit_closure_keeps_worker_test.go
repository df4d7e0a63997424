package pass

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestGoexitClosureBecomesErrorAndWorkerGoesOn: a closure that ends its
// goroutine with runtime.Goexit (as t.FailNow does) neither returns nor
// panics. Its pass is answered with an error result, as a panic's is, a
// worker takes the dead one's place (the pool has one worker: the passes
// after a Goexit run only if it does), and Stop neither loses the lease
// nor gives back the worker's share of its wait group twice.
//
// Found by a review of the old scheduler: the worker unwound with its run
// still marked executing and its lease neither acked nor released; a Stop
// whose context had ended then released that lease and called wg.Done a
// second time for the worker, and the process died of a negative
// WaitGroup counter.
func TestGoexitClosureBecomesErrorAndWorkerGoesOn(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	w := stallingPool(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
		if string(a) == "goexit" {
			runtime.Goexit()
		}
		return a, nil
	})
	for _, arg := range []string{"goexit", "after", "goexit", "again"} {
		h, err := c.Submit(context.Background(), closureStall, []byte(arg))
		if err != nil {
			t.Fatal(err)
		}
		if arg == "goexit" {
			if err := waitErr(t, h); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "Goexit") {
				t.Fatalf("the Goexit pass: %v", err)
			}
			continue
		}
		if got := awaitAll(t, []*Handle{h}); string(got[0]) != arg {
			t.Fatalf("the pass after a Goexit: %q, want %q", got[0], arg)
		}
	}
	// An ended context: Stop must not find a run it could abandon twice.
	if err := w.Stop(stopped()); err != nil {
		t.Fatalf("Stop with nothing running: %v", err)
	}
	if st := w.Stats(); st.Released != 0 || st.Failed != 2 || st.Executed != 4 || st.LateResults != 0 {
		t.Fatalf("stats %+v: want 4 executed, 2 failed, none released", st)
	}
	if st := settled(t, f, c, 4); st.Resolved != 4 || st.Unmatched != 0 {
		t.Fatalf("client stats %+v: want each pass answered once", st)
	}
}
