package transport

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// Issue 15, item 2: a live process in another pid namespace (a container
// sharing /dev/shm) records a pid that means another process here, so the
// pid witness called it dead ("pid 1, alive: no (pid reused)") and repairs,
// including a blocked consumer's inline one, took its live lease. Death is
// now proven by the entry lock, which the kernel releases only when the
// holder dies, in whatever namespace. These tests start holders under
// `unshare --pid --fork --mount-proc --kill-child` (they record pid 1) and
// judge them from this process and from a third namespace: alive while
// they run, whatever repairs run; proven dead and repaired (from here and
// from another namespace) once killed.

// nsChild runs a child of tableHelper on path in a pid namespace of its
// own to a clean exit and returns its log.
func nsChild(t *testing.T, path, role string, env ...string) proctest.Log {
	t.Helper()
	c := tableHelper.StartInPidNamespace(t, role, append(env, proctest.PathArg(path))...)
	c.MustSucceed(t)
	return c.Log()
}

// startNSHolder starts role on path in a pid namespace of its own and
// waits until it holds what it took.
func startNSHolder(t *testing.T, path, role string, env ...string) (*proctest.Child, proctest.Log) {
	t.Helper()
	c := tableHelper.StartInPidNamespace(t, role, append(env, proctest.PathArg(path), "HOLD=1")...)
	c.WaitLine(t, "holding")
	l := c.Log()
	if pid := only(t, l, "pid"); pid != 1 && pid != 2 {
		t.Fatalf("the holder sees itself as pid %d: not in a new pid namespace", pid)
	}
	return c, l
}

// requireAliveElsewhere fails unless p, judged from here, is a live holder
// in another pid namespace recorded as pid 1.
func requireAliveElsewhere(t *testing.T, p check.Peer) {
	t.Helper()
	if p.Lock != shm.LockHeld || !p.OtherNS || p.Dead || p.Unknown || p.State != "active" {
		t.Fatalf("holder in another pid namespace judged from here: %+v, want active, lock held, other namespace, alive", p)
	}
	if w := p.Where(); !strings.HasPrefix(w, "pid 1 in another pid namespace") {
		t.Fatalf("Where() = %q, want pid 1 in another pid namespace", w)
	}
}

// requireJudgedAlive fails unless a judge's log says the entry is alive,
// in another namespace than the judge's, with nothing orphaned.
func requireJudgedAlive(t *testing.T, l proctest.Log, from string) {
	t.Helper()
	want := map[string]uint64{"dead": 0, "unknown": 0, "otherns": 1, "lockheld": 1, "recordedpid": 1, "orphaned": 0, "deadentries": 0, "deadowner": 0}
	for w, v := range want {
		if got := l[w]; len(got) != 1 || got[0] != v {
			t.Errorf("judged from %s: %s = %v, want %d (log %v)", from, w, got, v, l)
		}
	}
}

// nsKill kills a namespace's holder (SIGKILL to unshare; --kill-child
// takes the namespace down) and waits until the kernel has released its
// entry lock.
func nsKill(t *testing.T, c *proctest.Child, peer func() check.Peer) {
	t.Helper()
	c.Kill()
	c.Wait()
	waitUntil(t, 30*time.Second, "saw the killed holder's entry lock released", func() bool { return peer().Lock == shm.LockReleased })
}

// TestRingLeaseHolderInAnotherPidNamespaceIsAlive: a consumer in another
// pid namespace holds a lease. Judged from here and from a third
// namespace it is alive; Check reports nothing; repairs (attached,
// entry-less, from a third namespace) and a blocked consumer's inline
// repair leave its lease and entry alone. Killed, it is proven dead and
// its lease requeued, by a repair from here or from another namespace.
func TestRingLeaseHolderInAnotherPidNamespaceIsAlive(t *testing.T) {
	proctest.RequirePidNamespaces(t)
	for _, from := range []string{"host", "other-namespace"} {
		t.Run("repaired-from-"+from, func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 4, Participants: 8})
			if err := r.TryPush(encodeMsg(1)); err != nil {
				t.Fatal(err)
			}
			holder, l := startNSHolder(t, r.Path(), "ring-lease")
			idx := only(t, l, "attached")
			if only(t, l, "got") != 1 {
				t.Fatalf("holder log %v", l)
			}
			// Messages 2-4 pass through, so that the lease is the slot at
			// the head: a consumer that finds the ring empty waits right
			// behind it.
			buf := make([]byte, r.MaxPayload())
			for id := uint64(2); id <= 4; id++ {
				if err := r.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
				if _, err := r.TryPop(buf); err != nil {
					t.Fatal(err)
				}
			}
			peer := func() check.Peer { return r.Peers()[idx] }
			leaseHeld := func() bool {
				sw := layout.UnpackSlot(r.slotWord(0).Load())
				return sw.State == layout.SlotLeased && uint64(sw.Owner) == idx+1
			}
			requireAliveElsewhere(t, peer())
			tool, err := OpenRingForRepair(r.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer tool.Close()
			if rep := tool.Check(); !rep.Clean() {
				t.Fatalf("check with a live holder in another namespace: %+v", rep.Findings)
			}
			for _, rp := range []func() (check.RepairReport, error){r.Repair, tool.Repair} {
				rep, err := rp()
				if err != nil || rep.Changed() || rep.Count(check.ActionDefer) != 0 {
					t.Fatalf("repair with a live holder in another namespace: %+v %v", rep, err)
				}
			}
			// A blocked consumer: the ring is empty (the lease is in the
			// head's slot) and the deferred count says a repair may find
			// something, so its wait runs an inline repair.
			c, err := OpenRing(r.Path())
			if err != nil {
				t.Fatal(err)
			}
			r.deferred.Store(1)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err = c.Claim(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("blocked claim behind a live lease in another namespace: %v, want the deadline", err)
			}
			if r.deferred.Load() != 0 {
				t.Fatal("the blocked consumer ran no inline repair")
			}
			c.Close()
			// Judged, and repaired, from a third namespace.
			requireJudgedAlive(t, nsChild(t, r.Path(), "ring-judge", "ENTRY="+itoa(idx)), "a third namespace")
			if rl := nsChild(t, r.Path(), "ring-repair"); rl["requeued"][0] != 0 || rl["freed"][0] != 0 || len(rl["deadpeer"]) != 0 {
				t.Fatalf("repair from a third namespace with the holder alive: %v", rl)
			}
			if !leaseHeld() || peer().State != "active" {
				t.Fatalf("the live holder lost its lease or entry: slot %v, entry %+v", layout.UnpackSlot(r.slotWord(0).Load()), peer())
			}

			nsKill(t, holder, peer)
			if p := peer(); !p.Dead || !p.OtherNS {
				t.Fatalf("killed holder judged from here: %+v, want proven dead", p)
			}
			jl := nsChild(t, r.Path(), "ring-judge", "ENTRY="+itoa(idx))
			if jl["dead"][0] != 1 || jl["otherns"][0] != 1 || jl["orphaned"][0] != 1 {
				t.Fatalf("killed holder judged from another namespace: %v", jl)
			}
			switch from {
			case "host":
				rep, err := tool.Repair()
				if err != nil || rep.Count(check.ActionRequeue) != 1 || rep.Count(check.ActionFreeEntry) != 1 ||
					len(rep.DeadPeers) != 1 || rep.DeadPeers[0].ID.PID != 1 || !rep.DeadPeers[0].OtherNS {
					t.Fatalf("repair from here after the kill: %+v %v", rep, err)
				}
			case "other-namespace":
				rl := nsChild(t, r.Path(), "ring-repair")
				if rl["requeued"][0] != 1 || rl["freed"][0] != 1 || len(rl["deadpeer"]) != 1 || rl["deadpeer"][0] != 1 {
					t.Fatalf("repair from another namespace after the kill: %v", rl)
				}
			}
			checkDelivery(t, []uint64{1}, drain(t, r), nil)
			assertHealthy(t, r)
		})
	}
}

// TestDequeOwnerInAnotherPidNamespaceIsAlive: the deque's owner runs in
// another pid namespace and holds a lease. Judged from here and from a
// third namespace it is alive: Check reports no dead owner, repairs free
// neither its role nor its lease, a blocked thief's inline repair leaves
// it alone, and Adopt returns ErrOwnerAlive. Killed, it is proven dead:
// a repair from here or from another namespace frees the role and hands
// the lease back, and the next owner gets every message.
func TestDequeOwnerInAnotherPidNamespaceIsAlive(t *testing.T) {
	proctest.RequirePidNamespaces(t)
	for _, from := range []string{"host", "other-namespace"} {
		t.Run("repaired-from-"+from, func(t *testing.T) {
			d := newDeque(t, DequeConfig{Capacity: 8, Participants: 8})
			for id := uint64(1); id <= 5; id++ {
				if err := d.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Disown(); err != nil {
				t.Fatal(err)
			}
			holder := tableHelper.StartInPidNamespace(t, "deque-own", proctest.PathArg(d.Path()), "CLAIM=1", "HOLD=1")
			holder.WaitLine(t, "holding")
			l := holder.Log()
			idx := only(t, l, "attached")
			leased := only(t, l, "got")
			peer := func() check.Peer { return d.Peers()[idx] }
			requireAliveElsewhere(t, peer())
			if !d.Scan().OwnerAlive {
				t.Fatal("Scan: the owner in another namespace is not alive")
			}
			// This process, a thief, takes all but the last.
			var delivered []uint64
			for range 3 {
				l, err := d.TryClaim()
				if err != nil {
					t.Fatal(err)
				}
				id, _ := decodeMsg(l.Data())
				delivered = append(delivered, id)
				if err := d.Ack(l); err != nil {
					t.Fatal(err)
				}
			}
			// The owner pops the last one at the bottom, and stops there
			// (as if descheduled): bottom announced, the slot READING and
			// stamped with the owner. A thief that finds the deque empty
			// waits behind that slot and after a while judges its owner
			// (it would roll the pop back if the owner were dead). Here
			// the owner lives.
			b := d.bottom.Load() - 1
			sw := layout.UnpackSlot(d.slotWord(b).Load())
			if sw.State != layout.SlotReady || d.top.Load() != b {
				t.Fatalf("slot at bottom-1: %+v, top %d", sw, d.top.Load())
			}
			d.bottom.Store(b)
			d.slotWord(b).Store(layout.SlotWord{State: layout.SlotReading, Deliveries: 1, Owner: uint16(idx + 1), Length: sw.Length, Lap: sw.Lap}.Pack())
			tool, err := OpenDequeForRepair(d.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer tool.Close()
			for _, f := range tool.Check().Findings {
				if f.Problem == check.ProblemDeadOwner || f.Problem == check.ProblemOrphanedLease || f.Problem == check.ProblemDeadParticipant {
					t.Fatalf("check with the owner alive in another namespace: %s: %s", f.Problem, f.Detail)
				}
			}
			for _, rp := range []func() (check.RepairReport, error){d.Repair, tool.Repair} {
				rep, err := rp()
				if err != nil || rep.Changed() {
					t.Fatalf("repair with the owner alive in another namespace: %+v %v", rep, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err = d.Claim(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("blocked thief behind the live owner's bottom: %v, want the deadline", err)
			}
			if _, err := d.Adopt(); !errors.Is(err, ErrOwnerAlive) {
				t.Fatalf("Adopt with the owner alive in another namespace: %v, want ErrOwnerAlive", err)
			}
			jl := nsChild(t, d.Path(), "deque-judge", "ENTRY="+itoa(idx))
			requireJudgedAlive(t, jl, "a third namespace")
			if jl["owneralive"][0] != 1 {
				t.Fatalf("a third namespace says the owner is not alive: %v", jl)
			}
			if rl := nsChild(t, d.Path(), "deque-repair"); rl["freeowner"][0] != 0 || rl["returned"][0] != 0 || rl["freed"][0] != 0 {
				t.Fatalf("repair from a third namespace with the owner alive: %v", rl)
			}
			if d.bottom.Load() != b || d.Counters().Owner != int(idx) || peer().State != "active" {
				t.Fatalf("the live owner lost something: bottom %d (was %d), counters %+v, entry %+v", d.bottom.Load(), b, d.Counters(), peer())
			}

			nsKill(t, holder, peer)
			jl = nsChild(t, d.Path(), "deque-judge", "ENTRY="+itoa(idx))
			if jl["dead"][0] != 1 || jl["owneralive"][0] != 0 || jl["deadowner"][0] != 1 || jl["orphaned"][0] != 2 { // its lease and its pop
				t.Fatalf("killed owner judged from another namespace: %v", jl)
			}
			switch from {
			case "host":
				rep, err := tool.Repair()
				if err != nil || rep.Count(check.ActionFreeOwner) != 1 || rep.Count(check.ActionReturn) != 1 || rep.Count(check.ActionRollBack) != 1 {
					t.Fatalf("repair from here after the kill: %+v %v", rep, err)
				}
			case "other-namespace":
				rl := nsChild(t, d.Path(), "deque-repair")
				if rl["freeowner"][0] != 1 || rl["returned"][0] != 1 || rl["freed"][0] != 1 || len(rl["deadpeer"]) != 1 || rl["deadpeer"][0] != 1 {
					t.Fatalf("repair from another namespace after the kill: %v", rl)
				}
			}
			if _, err := d.Adopt(); err != nil {
				t.Fatalf("Adopt after the owner was killed and repaired: %v", err)
			}
			delivered = append(delivered, drainDeque(t, d)...)
			checkDelivery(t, seq(1, 5), delivered, map[uint64]bool{leased: true})
		})
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
