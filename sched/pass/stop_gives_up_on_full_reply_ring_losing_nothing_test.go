package pass

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A result that waits for room in the reply ring of a submitter that
// stopped reading (alive, so its result is kept for it) does not hold
// Stop past its context: Stop returns (its error wraps the context's),
// the pass is handed back to the submit queue rather than its result
// dropped, and once the submitter reads again a worker in another process
// runs it again: every pass submitted gets its result, once.
func TestStopGivesUpOnFullReplyRingLosingNothing(t *testing.T) {
	f := newSchedFiles(t)
	w := startPool(t, f.pool(1))
	m := newMuteClient(t, f, 2) // two results fill its ring
	want := map[uint64]string{}
	for i := 0; i < 3; i++ {
		arg := fmt.Sprint(i)
		want[m.push(t, closureEcho, []byte(arg))] = arg
	}
	eventually(t, "a result parked for room", func() bool { return w.Stats().Parked == 1 })

	// A short context: the ring stays full however long Stop waits.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopErr := make(chan error, 1)
	go func() { stopErr <- w.Stop(ctx) }()
	if err := await(t, stopErr, "Stop returned"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if st := w.Stats(); st.Executed != 3 || st.Parked != 1 || st.Released != 1 || st.LateResults != 0 || st.OrphanedResults != 0 {
		t.Fatalf("stats after Stop: %+v, want 3 executed, the one whose result had no room parked and released", st)
	}
	submit := ringView(t, f.submit)
	if c := submit.Counters(); c.Acked != 2 {
		t.Fatalf("%d passes acked after Stop, want the two whose results were delivered", c.Acked)
	}

	startWorkers(t, f, 1)
	got := map[uint64]string{}
	for len(got) < len(want) {
		r := m.recv(t)
		if _, dup := got[r.token]; dup {
			t.Fatalf("token %d answered twice", r.token)
		}
		if r.err() != nil {
			t.Fatalf("token %d: %v", r.token, r.err())
		}
		got[r.token] = string(r.data)
	}
	for tok, arg := range want {
		if got[tok] != arg {
			t.Fatalf("pass %d (%q): got %q", tok, arg, got[tok])
		}
	}
	eventually(t, "every pass acked", func() bool { return submit.Counters().Acked == 3 })
	if n := m.reply.Counters().Pushed; n != 3 {
		t.Fatalf("%d results pushed for 3 passes", n)
	}
}
