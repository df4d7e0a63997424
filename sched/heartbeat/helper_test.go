package heartbeat

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

var hbHelper = proctest.Helper{Test: "TestHeartbeatHelperProcess", Prefix: "heartbeat-"}

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
	return hbHelper.Start(t, role, append(f.env(), env...)...)
}

// runToCrash runs a helper process in role armed to die at point and
// insists that it died there.
func runToCrash(t testing.TB, f testFiles, role, point string) *proctest.Child {
	t.Helper()
	return hbHelper.RunToCrash(t, role, point, 1, f.env()...)
}

// TestHeartbeatHelperProcess is the child side of the heartbeat table's
// and the watchdog's multi-process tests.
func TestHeartbeatHelperProcess(t *testing.T) { hbHelper.Serve(child) }

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
