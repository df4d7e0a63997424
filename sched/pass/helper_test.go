package pass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

var passHelper = proctest.Helper{Test: "TestPassHelperProcess", Prefix: "pass-"}

// Closures every test process registers.
const (
	closureEcho      = 1 // returns its arguments
	closureFail      = 2 // fails with "boom: ARGS"
	closureCrash     = 3 // crash point test.pass.executing, then echo
	closureLongError = 4 // fails with a 200-byte message
	closureBigResult = 5 // returns 100 bytes
	closurePanic     = 6 // panics with "kaboom: ARGS"
	// closureStall returns its arguments in worker processes; a test's own
	// scheduler registers a version that blocks (stallingScheduler).
	closureStall = 7
	// closureSlowEcho returns its arguments after a millisecond: long
	// enough runs for a test to kill processes in the middle of them.
	closureSlowEcho = 8
	// closureAwaitCancel prints "running ARGS", blocks until its context
	// is cancelled, prints "saw cancel ARGS: CAUSE" and fails.
	closureAwaitCancel = 9
	// closureGate returns its arguments once the file named by the
	// worker's GATE variable exists (polled every millisecond).
	closureGate = 10
)

func testRegistry() *Registry {
	r := NewRegistry()
	r.Register(closureEcho, func(_ context.Context, a []byte) ([]byte, error) { return a, nil })
	r.Register(closureFail, func(_ context.Context, a []byte) ([]byte, error) { return nil, fmt.Errorf("boom: %s", a) })
	r.Register(closureCrash, func(_ context.Context, a []byte) ([]byte, error) {
		shm.CrashPoint("test.pass.executing")
		return a, nil
	})
	r.Register(closureLongError, func(_ context.Context, a []byte) ([]byte, error) { return nil, errors.New(strings.Repeat("e", 200)) })
	r.Register(closureBigResult, func(_ context.Context, a []byte) ([]byte, error) { return make([]byte, 100), nil })
	r.Register(closurePanic, func(_ context.Context, a []byte) ([]byte, error) { panic("kaboom: " + string(a)) })
	r.Register(closureStall, func(_ context.Context, a []byte) ([]byte, error) { return a, nil })
	r.Register(closureAwaitCancel, func(ctx context.Context, a []byte) ([]byte, error) {
		fmt.Printf("running %s\n", a)
		<-ctx.Done()
		fmt.Printf("saw cancel %s: %v\n", a, context.Cause(ctx))
		return nil, context.Cause(ctx)
	})
	r.Register(closureGate, func(ctx context.Context, a []byte) ([]byte, error) {
		for !proctest.Exists(os.Getenv("GATE")) {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(time.Millisecond):
			}
		}
		return a, nil
	})
	r.Register(closureSlowEcho, func(_ context.Context, a []byte) ([]byte, error) {
		time.Sleep(time.Millisecond)
		return a, nil
	})
	return r
}

// stallingPool starts a pool in this process, with one worker, whose
// closureStall is stall.
func stallingPool(t *testing.T, f schedFiles, stall Closure) *Pool {
	t.Helper()
	cfg := f.pool(1)
	cfg.Label = "stalling"
	cfg.Registry = NewRegistry()
	cfg.Registry.Register(closureStall, stall)
	return startPool(t, cfg)
}

// await receives from ch, failing the test if nothing comes in a minute
// (a hang guard, not a bound on speed).
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("never: %s", what)
	}
	var zero T
	return zero
}

// eventually polls cond, failing the test if it stays false for a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// stopped returns a context that has already ended.
func stopped() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// schedFiles names the shared files of one test's queue. Reply rings
// (ReplyPath) and the cancel board (BoardPath) are named after submit.
type schedFiles struct{ submit, hb string }

func newSchedFiles(t testing.TB) schedFiles {
	t.Helper()
	base := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-pass-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f := schedFiles{submit: base + "-submit", hb: base + "-hb"}
	t.Cleanup(func() {
		os.Remove(f.submit)
		os.Remove(f.hb)
		os.Remove(BoardPath(f.submit))
		for i := 0; i < 16; i++ {
			os.Remove(ReplyPath(f.submit, i))
		}
	})
	return f
}

func (f schedFiles) env() []string {
	return []string{"SCHED_SUBMIT=" + f.submit, "SCHED_HB=" + f.hb}
}

func (f schedFiles) shared(label string) Shared {
	return Shared{SubmitPath: f.submit, HeartbeatPath: f.hb, Label: label,
		Ring: transport.RingConfig{Capacity: 256}, Heartbeat: heartbeat.Config{Capacity: 16},
		BeatInterval: 20 * time.Millisecond}
}

func (f schedFiles) pool(workers int) PoolConfig {
	return PoolConfig{Shared: f.shared("test-pool"), Workers: workers, Registry: testRegistry()}
}

func (f schedFiles) client() ClientConfig {
	return ClientConfig{Shared: f.shared("test-client"), Reply: transport.RingConfig{Capacity: 256}}
}

func startPool(t testing.TB, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

func startClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startWorkers starts n worker processes (two workers each) and waits
// until each is registered.
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

// TestPassHelperProcess is the child side of the Pass scheduler's
// multi-process tests.
func TestPassHelperProcess(t *testing.T) { passHelper.Serve(schedChild) }

func schedChild(role string) error {
	f := schedFiles{submit: os.Getenv("SCHED_SUBMIT"), hb: os.Getenv("SCHED_HB")}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if run, ok := moreRoles[role]; ok { // roles of helper_roles_test.go
		return run(ctx, f)
	}
	switch role {
	case "worker":
		cfg := f.pool(max(proctest.EnvInt("WORKERS"), 1))
		cfg.Label = "test-worker"
		if c := proctest.EnvInt("RING_CAPACITY"); c > 0 { // rings the test created smaller
			cfg.Ring.Capacity = uint64(c)
		}
		if n := proctest.EnvInt("DELIVERY_LIMIT"); n > 0 { // a submit ring the test created so
			cfg.Ring.DeliveryLimit = uint32(n)
		}
		if os.Getenv("SCHED_STEAL") == "1" {
			// Workers stealing from a deque the client owns.
			cfg.Submit = transport.WorkStealingShape(2)
		}
		if os.Getenv("WATCHDOG") == "1" {
			cfg.Watchdog, cfg.WatchdogInterval = true, 50*time.Millisecond
		}
		p, err := NewPool(cfg)
		if err != nil {
			return err
		}
		fmt.Println("ready", p.Member().Slot())
		<-ctx.Done()
		err = p.Stop(context.Background())
		st := p.Stats()
		fmt.Printf("stats orphaned=%d orphaned-results=%d cancelled=%d\n", st.Orphaned, st.OrphanedResults, st.Cancelled)
		return err
	case "client":
		// Submits COUNT slow echo passes of "LABEL-i" (from two
		// goroutines), awaits every one, checks it got its own result
		// back (printing "got N" every 100), then prints "done".
		count, label := proctest.EnvInt("COUNT"), os.Getenv("LABEL")
		closure := uint32(closureSlowEcho)
		if id := proctest.EnvInt("CLOSURE"); id > 0 {
			closure = uint32(id)
		}
		cfg := f.client()
		cfg.Label = label
		if n := proctest.EnvInt("REPLY_CAPACITY"); n > 0 {
			cfg.Reply.Capacity = uint64(n)
		}
		c, err := NewClient(cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Println("ready", c.Ticket().Slot)
		hs := make([]*Handle, count)
		errs := make(chan error, 2)
		for g := 0; g < 2; g++ {
			go func() {
				for i := g; i < count; i += 2 {
					h, err := c.Submit(ctx, closure, []byte(label+"-"+strconv.Itoa(i)))
					if err != nil {
						errs <- err
						return
					}
					hs[i] = h
				}
				errs <- nil
			}()
		}
		got := 0
		for g := 0; g < 2; g++ {
			if err := <-errs; err != nil {
				return err
			}
		}
		fmt.Println("submitted", count)
		for i, h := range hs {
			v, err := h.Wait(ctx)
			if err != nil {
				return fmt.Errorf("pass %d: %w", i, err)
			}
			if want := label + "-" + strconv.Itoa(i); string(v) != want {
				return fmt.Errorf("pass %d: result %q, want %q", i, v, want)
			}
			if got++; got%100 == 0 {
				fmt.Println("got", got)
			}
		}
		st := c.Stats()
		fmt.Printf("done resolved=%d unmatched=%d\n", st.Resolved, st.Unmatched)
		<-ctx.Done()
		return nil
	case "canceller":
		// Submits one closureAwaitCancel pass, waits for the file named
		// by GATE, then cancels it (and is killed there when armed).
		c, err := NewClient(f.client())
		if err != nil {
			return err
		}
		defer c.Close()
		h, err := c.Submit(ctx, closureAwaitCancel, []byte("c"))
		if err != nil {
			return err
		}
		fmt.Println("ready", c.Ticket().Slot)
		for !proctest.Exists(os.Getenv("GATE")) {
			time.Sleep(time.Millisecond)
		}
		h.Cancel()
		fmt.Println("cancelled")
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

func startBenchChild(tb testing.TB, f schedFiles) *proctest.Child {
	tb.Helper()
	c := passHelper.Start(tb, "worker", append(f.env(), "WORKERS=1")...)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out, _ := c.Output(); strings.Contains(out, "ready") {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatal("worker never became ready")
	return nil
}
