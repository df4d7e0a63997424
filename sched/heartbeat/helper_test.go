package heartbeat

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

const hbHelper = "TestHeartbeatHelperProcess"

// testFiles names the files of one test: a ring the participants lease
// from, and the heartbeat table.
type testFiles struct{ ring, hb string }

func newTestFiles(t testing.TB) testFiles {
	t.Helper()
	base := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-heartbeat-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f := testFiles{ring: base + "-ring", hb: base + "-hb"}
	t.Cleanup(func() {
		os.Remove(f.ring)
		os.Remove(f.hb)
	})
	return f
}

func (f testFiles) env() []string {
	return []string{"HB_TEST_RING=" + f.ring, "HB_TEST_TABLE=" + f.hb}
}

// startChild starts a helper process in role (hold, watchdog, register).
func startChild(t testing.TB, f testFiles, role string, env ...string) *proctest.Child {
	t.Helper()
	return proctest.Start(t, hbHelper, "heartbeat-"+role, append(f.env(), env...)...)
}

// TestHeartbeatHelperProcess is the child side of the heartbeat table's
// and the watchdog's multi-process tests.
func TestHeartbeatHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || !strings.HasPrefix(role, "heartbeat-") {
		return
	}
	if err := child(strings.TrimPrefix(role, "heartbeat-")); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(role string) error {
	f := testFiles{ring: os.Getenv("HB_TEST_RING"), hb: os.Getenv("HB_TEST_TABLE")}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	switch role {
	case "hold":
		// Register, claim one message from the ring, record the lease,
		// report, and wait to be killed.
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		m, err := hb.Register("holder")
		if err != nil {
			return err
		}
		r, err := transport.OpenRing(f.ring)
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
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		r, err := transport.OpenRing(f.ring)
		if err != nil {
			return err
		}
		rep := NewWatchdog(hb, WatchdogConfig{Queues: []Repairable{r}}).Scan(true)
		fmt.Println("reclaimed", len(rep.Reclaimed))
		return nil
	case "register":
		hb, err := Open(f.hb)
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
