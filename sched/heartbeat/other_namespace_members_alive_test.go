package heartbeat

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
)

// The invariant: a live member whose process runs in another pid
// namespace (a container sharing /dev/shm) is never judged dead, although
// the pid it recorded (1) means another process here; once it is killed,
// the same judges prove it dead and reclaim its slot.

// TestOtherNamespaceMemberAliveUntilKilled: a member registered as pid 1
// of its own pid namespace is alive to snapshots, watchdogs and Register
// in this namespace and to a judge in a third one, until it is SIGKILLed;
// then the same watchdog reclaims it.
func TestOtherNamespaceMemberAliveUntilKilled(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := hbHelper.StartInPidNamespace(t, "register", f.env()...)
	slot, err := strconv.Atoi(strings.TrimPrefix(c.WaitLine(t, "slot "), "slot "))
	if err != nil {
		t.Fatal(err)
	}
	inner := proctest.InnerOf(t, c)

	p, _ := h.Snapshot(slot)
	t.Logf("live member in another namespace: %s: %s", p.Where(), p.Verdict.Reason)
	if p.ID.PID != 1 || !p.OtherNamespace() || !strings.Contains(p.Where(), "pid 1 in another pid namespace (pid:[") {
		t.Fatalf("member recorded as %s (pid_ns %d, ours %d), want pid 1 in another pid namespace", p.Where(), p.PidNS, shm.PidNamespace())
	}
	if v := p.Verdict; v.Dead || v.Unknown || !v.OtherNS || v.Lock != shm.LockHeld || p.Health(0) != "alive" {
		t.Fatalf("live member in another namespace judged %+v (%s)", v, p.Health(0))
	}
	wd := NewWatchdog(h, WatchdogConfig{})
	if rep := wd.Scan(true); rep.Alive != 1 || rep.Dead != 0 || len(rep.Reclaimed) != 0 {
		t.Fatalf("watchdog with apply: %+v", rep)
	}
	// A full table: Register must not take the live member's slot.
	m, err := h.Register("host")
	if err != nil {
		t.Fatal(err)
	}
	var full *FullError
	if _, err := h.Register("third"); !errors.As(err, &full) || full.Live != 2 || full.Dead != 0 {
		t.Fatalf("Register on a table of two live members: %v", err)
	}
	if err := m.Unregister(); err != nil {
		t.Fatal(err)
	}
	// A judge in a third pid namespace agrees.
	judge := func() string {
		j := hbHelper.StartInPidNamespace(t, "judge", append(f.env(), "HB_SLOT="+strconv.Itoa(slot))...)
		v := j.WaitLine(t, "verdict ")
		j.Kill()
		j.Wait()
		return v
	}
	if v := judge(); v != "verdict alive lock=held otherns=true pid=1" {
		t.Fatalf("judge in a third namespace: %q", v)
	}

	c.Kill() // --kill-child: the namespace's pid 1 dies with unshare
	c.Wait()
	inner.WaitExited(t)
	p, _ = h.Snapshot(slot)
	if v := p.Verdict; !v.Dead || !v.OtherNS || v.Lock != shm.LockReleased || !strings.Contains(v.Reason, "in another pid namespace") {
		t.Fatalf("killed member judged %+v", v)
	}
	if v := judge(); v != "verdict dead lock=released otherns=true pid=1" {
		t.Fatalf("judge in a third namespace after the kill: %q", v)
	}
	rep := wd.Scan(true)
	if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].Slot != slot || len(rep.Problems) != 0 {
		t.Fatalf("watchdog after the kill: %+v", rep)
	}
	t.Logf("killed: %s; reclaimed", p.Verdict.Reason)
}
