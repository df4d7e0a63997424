package sched

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
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

const schedHelper = "TestSchedHelperProcess"

// Closures every test process registers.
const (
	closureEcho      = 1 // returns its arguments
	closureFail      = 2 // fails with "boom: ARGS"
	closureCrash     = 3 // crash point test.pass.executing, then echo
	closureLongError = 4 // fails with a 200-byte message
	closureBigResult = 5 // returns 100 bytes
)

func testRegistry() *Registry {
	r := NewRegistry()
	r.Register(closureEcho, func(a []byte) ([]byte, error) { return a, nil })
	r.Register(closureFail, func(a []byte) ([]byte, error) { return nil, fmt.Errorf("boom: %s", a) })
	r.Register(closureCrash, func(a []byte) ([]byte, error) {
		shm.CrashPoint("test.pass.executing")
		return a, nil
	})
	r.Register(closureLongError, func(a []byte) ([]byte, error) { return nil, errors.New(strings.Repeat("e", 200)) })
	r.Register(closureBigResult, func(a []byte) ([]byte, error) { return make([]byte, 100), nil })
	return r
}

// schedFiles names the three files of one test's scheduler.
type schedFiles struct{ submit, result, hb string }

func newSchedFiles(t testing.TB) schedFiles {
	t.Helper()
	base := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-sched-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
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

func (f schedFiles) config(workers int) PassConfig {
	return PassConfig{SubmitPath: f.submit, ResultPath: f.result, HeartbeatPath: f.hb,
		Ring: transport.RingConfig{Capacity: 256}, Heartbeat: HeartbeatConfig{Capacity: 16},
		Workers: workers, Registry: testRegistry(), BeatInterval: 20 * time.Millisecond}
}

// TestSchedHelperProcess is the child side of sched's multi-process tests.
func TestSchedHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || !strings.HasPrefix(role, "sched-") {
		return
	}
	if err := schedChild(strings.TrimPrefix(role, "sched-")); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func schedChild(role string) error {
	f := schedFiles{submit: os.Getenv("SCHED_SUBMIT"), result: os.Getenv("SCHED_RESULT"), hb: os.Getenv("SCHED_HB")}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	switch role {
	case "worker":
		workers, _ := strconv.Atoi(os.Getenv("WORKERS"))
		cfg := f.config(max(workers, 1))
		cfg.Label = "test-worker"
		var s *PassScheduler
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
	case "submitter":
		count, _ := strconv.Atoi(os.Getenv("COUNT"))
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
	case "hold":
		// Register, claim one message from the submit ring, record the
		// lease, report, and wait to be killed.
		hb, err := OpenHeartbeat(f.hb)
		if err != nil {
			return err
		}
		m, err := hb.Register("holder")
		if err != nil {
			return err
		}
		r, err := transport.OpenRing(f.submit)
		if err != nil {
			return err
		}
		l, err := r.Claim(ctx)
		if err != nil {
			return err
		}
		if _, err := m.RecordLease(r.ID(), l.Slot(), l.Lap(), l.Deliveries); err != nil {
			return err
		}
		fmt.Println("holding", string(l.Data()))
		<-ctx.Done()
		return nil
	case "watchdog":
		hb, err := OpenHeartbeat(f.hb)
		if err != nil {
			return err
		}
		r, err := transport.OpenRing(f.submit)
		if err != nil {
			return err
		}
		rep := NewWatchdog(hb, WatchdogConfig{Rings: []*transport.Ring{r}}).Scan(true)
		fmt.Println("reclaimed", len(rep.Reclaimed))
		return nil
	case "register":
		hb, err := OpenHeartbeat(f.hb)
		if err != nil {
			return err
		}
		m, err := hb.Register("registered")
		if err != nil {
			return err
		}
		fmt.Println("slot", m.Slot())
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// waitLine waits until the child has printed a line starting with prefix.
func waitLine(t *testing.T, c *proctest.Child, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := c.Output()
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		select {
		case <-c.Done():
			out, errOut := c.Output()
			t.Fatalf("child exited before printing %q: %v\n%s\n%s", prefix, c.Wait(), out, errOut)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("child never printed %q", prefix)
	return ""
}

func stopChild(t *testing.T, c *proctest.Child) {
	t.Helper()
	c.Cmd.Process.Signal(syscall.SIGTERM)
	c.MustSucceed(t)
}

func startBenchChild(tb testing.TB, f schedFiles) *proctest.Child {
	tb.Helper()
	c := proctest.Start(tb, schedHelper, "sched-worker", append(f.env(), "WORKERS=1")...)
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
