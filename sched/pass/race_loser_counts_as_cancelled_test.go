package pass

import (
	"context"
	"testing"
)

// Regression (found in review): ClientStats.Cancelled counts "passes cancelled (by Cancel, a lost
// Race or Any, or Close) before their result came", and Late the results
// of those cancelled passes. A Race's loser is settled as cancelled by the
// task scheduler inside tasks.Race; the client's own cancel (which counts
// it) runs only afterwards, in cancelLosers. A loser whose result arrives
// in between is dropped by settle as late (Complete fails: Late+1,
// Resolved+1-1), and cancelLosers then finds it no longer pending and
// counts nothing: Late > Cancelled, and the loser is in no counter as
// cancelled though its task was cancelled before its result came.
func TestRaceLoserCountsAsCancelled(t *testing.T) {
	f := newSchedFiles(t)
	startPool(t, f.pool(2))
	c := startClient(t, f.client())
	ctx := context.Background()
	// Batches of races until the counters disagree (or 20000 races).
	for batch := 0; batch < 40; batch++ {
		for i := 0; i < 500; i++ {
			a, err := c.Submit(ctx, closureEcho, []byte("a"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Submit(ctx, closureEcho, []byte("b"))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Race(ctx, a, b); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "every pass settled", func() bool { return c.Pending() == 0 })
		st := c.Stats()
		if st.Late > st.Cancelled {
			t.Fatalf("%d late results of cancelled passes but only %d passes counted cancelled after %d races: %+v", st.Late, st.Cancelled, 500*(batch+1), st)
		}
		if st.Resolved+st.Cancelled != st.Submitted {
			t.Fatalf("resolved %d + cancelled %d != submitted %d: some passes are in neither counter", st.Resolved, st.Cancelled, st.Submitted)
		}
	}
}
