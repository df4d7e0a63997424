package heartbeat

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	case "crashloop":
		// A member of a crash loop: with HB_LEASE=1 it claims the message
		// its parent pushed, registers giving the ring to Register, records
		// the lease and dies there (armed at crashHbLeaseAfterRecord);
		// without, it registers and dies before Register returns (armed at
		// crashHbRegisterAfterActivate). The table is full of dead members
		// most of the time: every Register must recover a slot.
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		if os.Getenv("HB_LEASE") != "1" {
			if _, err := hb.Register("loop"); err != nil {
				return err
			}
			return fmt.Errorf("registered and survived crash point %s", shm.ArmedCrashPoint())
		}
		r, err := transport.OpenRing(f.ring)
		if err != nil {
			return err
		}
		l, err := r.TryClaim()
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if gate := os.Getenv("HB_GO"); gate != "" {
			// Register only once every child of the batch has claimed:
			// then no child claims a message another's Register requeued.
			fmt.Println("claimed")
			for !proctest.Exists(gate) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(200 * time.Microsecond)
			}
		}
		m, err := hb.Register("loop", r)
		if err != nil {
			return err
		}
		if _, err := m.RecordLease(r.ID(), l.Slot(), l.Lap(), l.Deliveries); err != nil {
			return err
		}
		return fmt.Errorf("recorded a lease and survived crash point %s", shm.ArmedCrashPoint())
	case "judge":
		// Judge slot $HB_SLOT from this process (run in a third pid
		// namespace by the other-namespace test), say what it found, and
		// wait to be killed.
		hb, err := Open(f.hb, shm.ReadOnly())
		if err != nil {
			return err
		}
		p, err := hb.Snapshot(proctest.EnvInt("HB_SLOT"))
		if err != nil {
			return err
		}
		fmt.Printf("verdict %s lock=%s otherns=%v pid=%d\n", p.Health(0), p.Verdict.Lock, p.Verdict.OtherNS, p.ID.PID)
		// Stay until killed (at most a minute): a child that exits right
		// after its line may be seen exiting before the line is read.
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return nil
	case "inherit":
		// Register, hand the table's descriptor to a grandchild (exec'd
		// with it in ExtraFiles), report both, and wait to be killed.
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		m, err := hb.Register("inheritor")
		if err != nil {
			return err
		}
		file, err := hb.InheritableFile()
		if err != nil {
			return err
		}
		gc := exec.Command(os.Args[0], "-test.run=^"+hbHelper.Test+"$", "-test.count=1")
		gc.Env = append(os.Environ(), proctest.RoleEnv+"="+hbHelper.Prefix+"keepfd")
		gc.ExtraFiles = []*os.File{file}
		out, err := gc.StdoutPipe() // not ours: our parent waits for our stdout to close
		if err != nil {
			return err
		}
		if err := gc.Start(); err != nil {
			return err
		}
		file.Close()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "keeping\n" {
			return fmt.Errorf("grandchild: %q %v", line, err)
		}
		fmt.Println("slot", m.Slot(), "grandchild", gc.Process.Pid)
		<-ctx.Done()
		return nil
	case "keepfd":
		// Keep the descriptor inherited as fd 3 open until killed (at
		// most a minute): the entry locks of its open file description
		// stay held.
		var st unix.Stat_t
		if err := unix.Fstat(3, &st); err != nil {
			return fmt.Errorf("fd 3: %w", err)
		}
		fmt.Println("keeping")
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return nil
	case "visit":
		// Register, report the slot, unregister and exit: a member that
		// comes and goes between two watchdog scans.
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		defer hb.Close()
		m, err := hb.Register("visitor")
		if err != nil {
			return err
		}
		fmt.Println("slot", m.Slot())
		return m.Unregister()
	case "register":
		// Register (with HB_QUEUE=1 giving the ring to Register), report
		// the slot, and wait to be killed.
		hb, err := Open(f.hb)
		if err != nil {
			return err
		}
		var queues []Repairable
		if os.Getenv("HB_QUEUE") == "1" {
			r, err := transport.OpenRing(f.ring)
			if err != nil {
				return err
			}
			queues = append(queues, r)
		}
		m, err := hb.Register("registered", queues...)
		if err != nil {
			return err
		}
		fmt.Println("slot", m.Slot())
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}
