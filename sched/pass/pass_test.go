package pass

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

func startSched(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func startWorkers(t *testing.T, f schedFiles, n int, env ...string) []*proctest.Child {
	t.Helper()
	var cs []*proctest.Child
	for i := 0; i < n; i++ {
		c := passHelper.Start(t, "worker", append(append(f.env(), "WORKERS=2"), env...)...)
		c.WaitLine(t, "ready")
		cs = append(cs, c)
	}
	return cs
}

func recvAll(t *testing.T, col *Collector, n int) map[uint64]Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := map[uint64]Result{}
	for len(got) < n {
		r, err := col.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d of %d results: %v", len(got), n, err)
		}
		if _, dup := got[r.Token]; dup {
			t.Fatalf("token %d delivered twice", r.Token)
		}
		r.Data = append([]byte(nil), r.Data...) // valid only until the next Recv
		got[r.Token] = r
	}
	return got
}

// TestPassRoundTripAcrossProcesses: passes submitted here run in two
// worker processes; results come back matched by token.
func TestPassRoundTripAcrossProcesses(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0))
	workers := startWorkers(t, f, 2)
	sub, col := s.Submitter(), s.Collector()
	ctx := context.Background()
	want := map[uint64]string{}
	for i := 0; i < 300; i++ {
		closure, arg := uint32(closureEcho), strconv.Itoa(i)
		expect := "ok " + arg
		switch i % 10 {
		case 3:
			closure, expect = closureFail, "error boom: "+arg
		case 7:
			closure, expect = 99, "unknown"
		case 8:
			closure, expect = closureLongError, "truncated"
		case 9:
			closure, expect = closureBigResult, "too large"
		}
		tok, err := sub.Submit(ctx, closure, []byte(arg))
		if err != nil {
			t.Fatal(err)
		}
		want[tok] = expect
	}
	for tok, r := range recvAll(t, col, 300) {
		exp, ok := want[tok]
		if !ok {
			t.Fatalf("result for unknown token %d", tok)
		}
		err := r.Err()
		switch {
		case strings.HasPrefix(exp, "ok "):
			if err != nil || string(r.Data) != exp[3:] {
				t.Fatalf("token %d: %q %v, want %q", tok, r.Data, err, exp)
			}
		case strings.HasPrefix(exp, "error "):
			if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), exp[6:]) {
				t.Fatalf("token %d: %v, want %q", tok, err, exp)
			}
		case exp == "unknown":
			if !errors.Is(err, ErrUnknownClosure) {
				t.Fatalf("token %d: %v", tok, err)
			}
		case exp == "truncated":
			if r.Status&StatusTruncated == 0 || !errors.Is(err, ErrFailed) || len(r.Data) != MaxResult(56) {
				t.Fatalf("token %d: status %v, %d bytes", tok, r.Status, len(r.Data))
			}
		case exp == "too large":
			if !errors.Is(err, ErrResultTooLarge) {
				t.Fatalf("token %d: %v", tok, err)
			}
		}
	}
	for _, w := range workers {
		w.Stop(t)
	}
	for _, p := range s.Heartbeat().Snapshots() {
		if p.State != "free" && p.ID != shm.Self() {
			t.Fatalf("slot %d still %s after workers stopped", p.Slot, p.State)
		}
	}
}

func TestPassArgsTooLarge(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0))
	before := s.submit.(*transport.Ring).Counters().NextID
	_, err := s.Submitter().TrySubmit(closureEcho, make([]byte, 43))
	if !errors.Is(err, ErrArgsTooLarge) {
		t.Fatalf("43 bytes of arguments: %v", err)
	}
	if _, err := s.Submitter().TrySubmit(closureEcho, make([]byte, 42)); err != nil {
		t.Fatalf("42 bytes: %v", err)
	}
	if used := s.submit.(*transport.Ring).Counters().NextID - before; used != 1 {
		t.Fatalf("%d tokens used; a refused pass must take none", used)
	}
}

// TestPassTwoSubmitters: two processes submit at once; every token is
// distinct and every result arrives.
func TestPassTwoSubmitters(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(2))
	var subs []*proctest.Child
	for i := 0; i < 2; i++ {
		subs = append(subs, passHelper.Start(t, "submitter", append(f.env(), "COUNT=150")...))
	}
	tokens := map[uint64]bool{}
	for _, c := range subs {
		c.MustSucceed(t)
		out, _ := c.Output()
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			tok, err := strconv.ParseUint(strings.TrimPrefix(line, "token "), 10, 64)
			if err != nil {
				t.Fatalf("line %q", line)
			}
			if tokens[tok] {
				t.Fatalf("token %d handed out twice", tok)
			}
			tokens[tok] = true
		}
	}
	if len(tokens) != 300 {
		t.Fatalf("%d tokens", len(tokens))
	}
	for tok, r := range recvAll(t, s.Collector(), 300) {
		if !tokens[tok] || r.Err() != nil {
			t.Fatalf("token %d: %v", tok, r.Err())
		}
	}
}

// TestPassWorkerKilledMidPass: a worker process dies inside a closure. The
// watchdog requeues the pass, a surviving worker runs it, the result
// arrives, and the exit-event subscriber sees the death.
func TestPassWorkerKilledMidPass(t *testing.T) {
	f := newSchedFiles(t)
	ev := heartbeat.NewExitEvents(16)
	sub, _ := ev.Subscribe()
	cfg := f.config(0)
	cfg.Events = ev
	s := startSched(t, cfg)
	doomed := startWorkers(t, f, 1, proctest.Arm("test.pass.executing", 1)...)[0]
	tok, err := s.Submitter().Submit(context.Background(), closureCrash, []byte("survive me"))
	if err != nil {
		t.Fatal(err)
	}
	doomed.WaitKilled(t, "test.pass.executing")
	rep := s.ScanNow()
	if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].ID.PID != int32(doomed.PID()) || len(rep.Reclaimed[0].Leases) != 1 {
		t.Fatalf("watchdog report: %+v", rep)
	}
	e, err := sub.RecvTimeout(5 * time.Second)
	if err != nil || e.PID != int32(doomed.PID()) || e.Reason != heartbeat.ExitReclaimed {
		t.Fatalf("exit event: %v %v", e, err)
	}
	startWorkers(t, f, 1)
	res := recvAll(t, s.Collector(), 1)
	r, ok := res[tok]
	if !ok || r.Err() != nil || string(r.Data) != "survive me" {
		t.Fatalf("result %+v", res)
	}
}
