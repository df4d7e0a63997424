package transport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// Issue 15, item 2: the entry lock belongs to the open file description,
// not to the process, so a child that inherited the descriptor keeps it:
// the participant stays alive, with its lease and its entry, until that
// child has exited too (documented in the package doc). Only then is it
// proven dead and repaired.
func TestInheritedDescriptorKeepsEntryAlive(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, Participants: 4})
	promised := seq(1, 3)
	for _, id := range promised {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	stop, gclog := filepath.Join(dir, "stop"), filepath.Join(dir, "grandchild.log")
	// Whatever happens, the grandchild (not our child: we cannot kill it
	// by its exec.Cmd) is told to go; it is bounded by its own deadline.
	t.Cleanup(func() { os.WriteFile(stop, nil, 0o600) })
	// A attaches, leases message 1 and hands its descriptor to B.
	a := startTableChild(t, r.Path(), "ring-inherit", "STOP="+stop, "GRANDCHILD_LOG="+gclog)
	a.WaitLine(t, "holding")
	l := a.Log()
	idx, leased := only(t, l, "attached"), only(t, l, "got")
	waitUntil(t, 30*time.Second, "saw the grandchild hold the descriptor", func() bool {
		b, _ := os.ReadFile(gclog)
		return strings.Contains(string(b), "holdingfd 1")
	})
	a.Kill()
	a.Wait() // reaped: A's pid is gone
	if st, _ := (shm.ProcessID{PID: int32(a.PID())}).Status(); !st.Dead() {
		t.Fatalf("A (pid %d) is %v after its SIGKILL and reaping", a.PID(), st)
	}

	tool, err := OpenRingForRepair(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	p := r.Peers()[idx]
	if p.State != "active" || p.Lock != shm.LockHeld || p.Dead || p.Unknown || int(p.ID.PID) != a.PID() {
		t.Fatalf("A's entry while B holds the inherited descriptor: %+v, want active, lock held, alive, pid %d", p, a.PID())
	}
	if rep := tool.Check(); !rep.Clean() {
		t.Fatalf("check while B holds A's descriptor: %+v", rep.Findings)
	}
	for _, rp := range []func() (check.RepairReport, error){r.Repair, tool.Repair} {
		if rep, err := rp(); err != nil || rep.Changed() {
			t.Fatalf("repair while B holds A's descriptor: %+v %v", rep, err)
		}
	}

	// B exits: the last descriptor of A's open file closes.
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "saw A's entry lock released after B exited", func() bool { return r.Peers()[idx].Lock == shm.LockReleased })
	if p := r.Peers()[idx]; !p.Dead {
		t.Fatalf("A's entry after B exited: %+v, want proven dead", p)
	}
	rep, err := tool.Repair()
	if err != nil || rep.Count(check.ActionRequeue) != 1 || rep.Count(check.ActionFreeEntry) != 1 ||
		len(rep.DeadPeers) != 1 || int(rep.DeadPeers[0].ID.PID) != a.PID() {
		t.Fatalf("repair after B exited: %+v %v", rep, err)
	}
	checkDelivery(t, promised, drain(t, r), map[uint64]bool{leased: true})
	assertHealthy(t, r)
}
