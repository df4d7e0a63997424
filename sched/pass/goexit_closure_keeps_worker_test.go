package pass

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestGoexitClosureBecomesErrorAndWorkerGoesOn: a closure that ends its
// goroutine with runtime.Goexit (as t.FailNow does) neither returns nor
// panics. Its pass is answered with an error result, as a panic's is, a
// worker takes the dead one's place, and Stop neither loses the lease nor
// gives back the worker's share of its wait group twice.
//
// Found by a review: before, the worker unwound with its run still marked
// executing and its lease neither acked nor released; a Stop whose
// context had ended then released that lease and called wg.Done a second
// time for the worker, and the process died of a negative WaitGroup
// counter (a Stop that did not time out left the lease held for good).
func TestGoexitClosureBecomesErrorAndWorkerGoesOn(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0)) // the submitter
	w := stallingScheduler(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
		if string(a) == "goexit" {
			runtime.Goexit()
		}
		return a, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, arg := range []string{"goexit", "after", "goexit", "again"} {
		tok, err := s.Submitter().Submit(ctx, closureStall, []byte(arg))
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Collector().Recv(ctx)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if r.Token != tok {
			t.Fatalf("%s: result of another pass: %+v", arg, r)
		}
		if arg == "goexit" {
			if !errors.Is(r.Err(), ErrFailed) || !strings.Contains(r.Err().Error(), "Goexit") {
				t.Fatalf("the Goexit pass: %+v (%v)", r, r.Err())
			}
			continue
		}
		if r.Err() != nil || string(r.Data) != arg {
			t.Fatalf("the pass after a Goexit: %+v (%v)", r, r.Err())
		}
	}
	// An ended context: Stop must not find a run it could abandon twice.
	stop, cancelStop := context.WithCancel(context.Background())
	cancelStop()
	w.Stop(stop)
	if st := w.Stats(); st.Released != 0 || st.Failed != 2 || st.Executed != 4 {
		t.Fatalf("stats %+v: want 4 executed, 2 failed, none released", st)
	}
}
