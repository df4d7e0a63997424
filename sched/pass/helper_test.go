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
	return r
}

// stallingScheduler starts a scheduler in this process, with one worker,
// whose closureStall is stall.
func stallingScheduler(t *testing.T, f schedFiles, stall Closure) *Scheduler {
	t.Helper()
	cfg := f.config(1)
	cfg.Label = "stalling"
	cfg.Registry = NewRegistry()
	cfg.Registry.Register(closureStall, stall)
	return startSched(t, cfg)
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

// schedFiles names the three files of one test's scheduler.
type schedFiles struct{ submit, result, hb string }

func newSchedFiles(t testing.TB) schedFiles {
	t.Helper()
	base := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-pass-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f := schedFiles{submit: base + "-submit", result: base + "-result", hb: base + "-hb"}
	t.Cleanup(func() {
		os.Remove(f.submit)
		os.Remove(f.result)
		os.Remove(f.hb)
	})
	return f
}

func (f schedFiles) env() []string {
	return []string{"SCHED_SUBMIT=" + f.submit, "SCHED_RESULT=" + f.result, "SCHED_HB=" + f.hb}
}

func (f schedFiles) config(workers int) Config {
	return Config{SubmitPath: f.submit, ResultPath: f.result, HeartbeatPath: f.hb,
		Ring: transport.RingConfig{Capacity: 256}, Heartbeat: heartbeat.Config{Capacity: 16},
		Workers: workers, Registry: testRegistry(), BeatInterval: 20 * time.Millisecond}
}

// TestPassHelperProcess is the child side of the Pass scheduler's
// multi-process tests.
func TestPassHelperProcess(t *testing.T) { passHelper.Serve(schedChild) }

func schedChild(role string) error {
	f := schedFiles{submit: os.Getenv("SCHED_SUBMIT"), result: os.Getenv("SCHED_RESULT"), hb: os.Getenv("SCHED_HB")}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	switch role {
	case "worker":
		cfg := f.config(max(proctest.EnvInt("WORKERS"), 1))
		cfg.Label = "test-worker"
		if c := proctest.EnvInt("RING_CAPACITY"); c > 0 { // rings the test created smaller
			cfg.Ring.Capacity = uint64(c)
		}
		var s *Scheduler
		var err error
		if os.Getenv("SCHED_STEAL") == "1" {
			// Workers stealing from a deque the submitter owns, results
			// streamed back through a ring.
			s, _, _, err = StartByWorkloadShape(cfg, transport.WorkStealingShape(2), transport.StreamingShape(2, 1))
		} else {
			s, err = Start(cfg)
		}
		if err != nil {
			return err
		}
		fmt.Println("ready", s.Member().Slot())
		<-ctx.Done()
		return s.Stop(context.Background())
	case "deque-worker":
		// One worker over a streaming submit ring and a work-stealing
		// result deque: it creates the deque (and owns it) unless another
		// process already does, in which case the start is refused.
		cfg := f.config(1)
		cfg.Label = "deque-worker"
		s, _, _, err := StartByWorkloadShape(cfg, transport.StreamingShape(1, 1), transport.WorkStealingShape(1))
		if errors.Is(err, ErrResultDequeOwner) {
			fmt.Println("refused:", err)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Println("ready", s.Member().Slot())
		<-ctx.Done()
		return s.Stop(context.Background())
	case "submitter":
		count := proctest.EnvInt("COUNT")
		s, err := Start(f.config(0))
		if err != nil {
			return err
		}
		sub := s.Submitter()
		for i := 0; i < count; i++ {
			tok, err := sub.Submit(ctx, closureEcho, []byte(strconv.Itoa(i)))
			if err != nil {
				return err
			}
			fmt.Println("token", tok)
		}
		return s.Stop(context.Background())
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
