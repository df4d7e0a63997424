package pass

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// A worker whose result waits for room in a full result ring that nobody
// reads does not hold Stop past its context: Stop returns (its error
// wraps the context's), the pass is released rather than its result
// dropped, and once a collector reads, a worker in another process runs
// it again: every pass submitted gets its result, once.
func TestStopGivesUpOnFullResultRingLosingNothing(t *testing.T) {
	f := newSchedFiles(t)
	small := func(workers int) Config {
		cfg := f.config(workers)
		cfg.Ring = transport.RingConfig{Capacity: 2} // both rings: two results fill it
		return cfg
	}
	s := startSched(t, small(0))
	w := startSched(t, small(1))
	want := map[uint64]string{}
	for i := 0; i < 3; i++ {
		arg := fmt.Sprint(i)
		tok, err := s.Submitter().Submit(context.Background(), closureEcho, []byte(arg))
		if err != nil {
			t.Fatal(err)
		}
		want[tok] = arg
	}
	eventually(t, "a result waiting for room", func() bool { return w.Stats().Backpressure > 0 })

	if err := w.Stop(stopped()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v, want an error wrapping context.Canceled", err)
	}
	if st := w.Stats(); st.Executed != 3 || st.Released != 1 || st.LateResults != 0 {
		t.Fatalf("stats after Stop: %+v, want 3 executed, the one whose result had no room released", st)
	}

	startWorkers(t, f, 1, "RING_CAPACITY=2")
	got := recvAll(t, s.Collector(), 3) // fails on a token delivered twice
	for tok, arg := range want {
		if r, ok := got[tok]; !ok || r.Err() != nil || string(r.Data) != arg {
			t.Fatalf("pass %d (%q): %+v", tok, arg, got)
		}
	}
}
