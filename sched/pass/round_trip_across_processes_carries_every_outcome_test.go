package pass

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/shm"
)

// TestPassRoundTripAcrossProcesses: passes submitted here run in two
// worker processes, and each handle gets its own pass's outcome: its
// result, its closure's error, an unknown closure, an error message cut
// to fit the slot (flagged), or a result too large for the slot. When the
// workers stop, their heartbeat slots are free.
func TestPassRoundTripAcrossProcesses(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	workers := startWorkers(t, f, 2)
	const n = 300
	hs, expect := make([]*Handle, n), make([]string, n)
	for i := range hs {
		closure, arg := uint32(closureEcho), strconv.Itoa(i)
		expect[i] = "ok " + arg
		switch i % 10 {
		case 3:
			closure, expect[i] = closureFail, "error boom: "+arg
		case 7:
			closure, expect[i] = 99, "unknown"
		case 8:
			closure, expect[i] = closureLongError, "truncated"
		case 9:
			closure, expect[i] = closureBigResult, "too large"
		}
		var err error
		if hs[i], err = c.Submit(context.Background(), closure, []byte(arg)); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range hs {
		exp := expect[i]
		if strings.HasPrefix(exp, "ok ") {
			if got := awaitAll(t, []*Handle{h}); string(got[0]) != exp[3:] {
				t.Fatalf("pass %d: %q, want %q", i, got[0], exp[3:])
			}
			continue
		}
		err := waitErr(t, h)
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("pass %d: %v, not an ErrFailed", i, err)
		}
		switch {
		case strings.HasPrefix(exp, "error "):
			if !strings.Contains(err.Error(), exp[6:]) || errors.Is(err, ErrUnknownClosure) {
				t.Fatalf("pass %d: %v, want %q", i, err, exp)
			}
		case exp == "unknown":
			if !errors.Is(err, ErrUnknownClosure) {
				t.Fatalf("pass %d: %v", i, err)
			}
		case exp == "truncated":
			// 200 bytes of message, cut to the 44 a 56-byte payload
			// carries, and marked as cut.
			msg := err.Error()
			if !strings.HasSuffix(msg, ": "+strings.Repeat("e", MaxResult(56))+"…") {
				t.Fatalf("pass %d: %q, want the message cut to %d bytes", i, msg, MaxResult(56))
			}
		case exp == "too large":
			if !errors.Is(err, ErrResultTooLarge) {
				t.Fatalf("pass %d: %v", i, err)
			}
		}
	}
	if st := settled(t, f, c, n); st.Resolved != n || st.Unmatched != 0 || st.Undecoded != 0 {
		t.Fatalf("client stats %+v", st)
	}
	for _, w := range workers {
		w.Stop(t)
	}
	for _, p := range c.Heartbeat().Snapshots() {
		if p.State != "free" && p.ID != shm.Self() {
			t.Fatalf("slot %d still %s after the workers stopped: %+v", p.Slot, p.State, p)
		}
	}
}
