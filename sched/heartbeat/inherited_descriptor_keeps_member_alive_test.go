package heartbeat

import (
	"fmt"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
)

// The invariant: a member's entry lock belongs to the open file
// description, not to the process. A child handed the table's descriptor
// (Table.InheritableFile through exec.Cmd.ExtraFiles, or a fork without
// exec) keeps the member alive after the registering process dies, until
// that child exits too; then the member is proven dead.

// TestInheritedDescriptorKeepsMemberAlive: child A registers and hands the
// table's descriptor to a grandchild B; A is SIGKILLed. The member (pid A,
// gone) is alive while B lives, and no watchdog reclaims it; once B is
// killed it is dead and reclaimed.
func TestInheritedDescriptorKeepsMemberAlive(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a := startChild(t, f, "inherit")
	var slot, bpid int
	if _, err := fmt.Sscanf(a.WaitLine(t, "slot "), "slot %d grandchild %d", &slot, &bpid); err != nil {
		t.Fatal(err)
	}
	b := proctest.OpenPidFD(t, bpid) // B is running: A printed its line after B's
	a.Kill()
	a.Wait()

	p, _ := h.Snapshot(slot)
	if p.ID.PID != int32(a.PID()) {
		t.Fatalf("slot %d names pid %d, not A (%d)", slot, p.ID.PID, a.PID())
	}
	if st, _ := p.ID.Status(); !st.Dead() {
		t.Fatalf("A (%s) is %s after its SIGKILL", p.ID, st)
	}
	if v := p.Verdict; v.Dead || v.Unknown || v.Lock != shm.LockHeld || p.Health(0) != "alive" {
		t.Fatalf("member whose descriptor B keeps open: %+v", v)
	}
	wd := NewWatchdog(h, WatchdogConfig{})
	if rep := wd.Scan(true); rep.Alive != 1 || len(rep.Reclaimed) != 0 {
		t.Fatalf("watchdog while B lives: %+v", rep)
	}

	b.Kill(t)
	b.WaitExited(t)
	p, _ = h.Snapshot(slot)
	if v := p.Verdict; !v.Dead || v.Lock != shm.LockReleased || v.State != shm.ProcGone {
		t.Fatalf("member after B exited: %+v", v)
	}
	if rep := wd.Scan(true); len(rep.Reclaimed) != 1 {
		t.Fatalf("watchdog after B exited: %+v", rep)
	}
}
