package transport

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// Issue 15, item 1: one live participant plus a fleet of consumers that
// crash-loop (each attaches, leases one message and is SIGKILLed holding
// it) on a table of 4 entries. Every attach must succeed: an attach that
// finds the table full of dead entries recovers them itself. Nothing may
// be lost: at the end a consumer drains, and every message pushed is
// delivered at least once. The live participant never calls Repair, so
// every recovery is an attach's (or, once leases wait for room, a
// consumer's inline one).
//
// The children run two at a time, so attaches also race each other's
// recoveries (one waits while the other holds the repairer entry).

// Each crash loop runs proctest.SoakLoops children (scripts/soak.sh runs
// 1000). With SHMKIT_SOAK_KEEP=FILE a failing loop copies the file there
// first, for a look at its state.
func soakLoops(t *testing.T) int { return proctest.SoakLoops(t) }

// TestCrashLoopingRingConsumersNeverLockTheTable: with room in the ring
// (the dead consumers' leases are pushed again as copies) and with the
// ring full (the producer filled it: leases cannot be requeued, so an
// attach parks them on the repairer entry to free the dead entries, and
// consumers requeue them in place later).
func TestCrashLoopingRingConsumersNeverLockTheTable(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "room"
		if full {
			name = "full"
		}
		t.Run(name, func(t *testing.T) { ringCrashLoop(t, full, soakLoops(t)) })
	}
}

func ringCrashLoop(t *testing.T, full bool, loops int) {
	// Enough messages that each is leased fewer times than the delivery
	// limit (a message that kills 15 consumers is poison, rightly).
	k := uint64(loops/10 + 8)
	capacity := nextPow2(2 * k)
	if full {
		capacity = nextPow2(k)
		k = capacity
	}
	r := newRing(t, RingConfig{Capacity: capacity, Participants: 4, DeliveryLimit: 15})
	pushed := seq(1, k)
	for _, id := range pushed {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	if full && r.TryPush(encodeMsg(k+1)) != ErrFull {
		t.Fatal("the ring is not full")
	}
	repairer := uint16(r.tab.RepairerIndex() + 1)
	parked := 0 // pairs after which some lease was parked on the repairer entry
	claims := map[uint64]int{}
	start := time.Now()
	attached := crashLoop(t, r.Path(), "ring-lease", loops, claims, func() {
		if full {
			// The live producer keeps trying: it burns past the leases
			// and finds the ring full.
			if err := r.TryPush(encodeMsg(k + 1)); err != ErrFull {
				t.Errorf("push into the full ring: %v", err)
			}
		}
	}, func() {
		for i := uint64(0); i < r.Capacity(); i++ {
			if layout.UnpackSlot(r.slotWord(i).Load()).Owner == repairer {
				parked++
				return
			}
		}
	})
	elapsed := time.Since(start)
	if attached != loops {
		t.Fatalf("%d of %d children attached", attached, loops)
	}
	if full && parked == 0 {
		t.Fatal("no lease was ever parked on the repairer entry: the full ring did not make the attaches park")
	}

	// A consumer drains (its attach recovers what the last ones left).
	cons, err := OpenRing(r.Path())
	if err != nil {
		t.Fatalf("attach after the crash loop: %v", err)
	}
	defer cons.Close()
	drained := drainRingEventually(t, cons)
	checkDelivery(t, pushed, drained, nil)
	if len(drained) != len(pushed) {
		t.Errorf("drained %d messages, pushed %d (duplicates beyond the leased ones?)", len(drained), len(pushed))
	}
	if s := cons.Scan(); s.Problems != 0 || s.Counters.Poisoned != 0 {
		t.Fatalf("after the drain: %d problems, %d poisoned: %+v", s.Problems, s.Counters.Poisoned, s.Slots)
	}
	requireOnlyLiveEntries(t, cons.Peers(), 2)
	c := r.Counters()
	t.Logf("%d children (2 at a time) attached, leased and died in %v: %v per child; %d messages, leased %d times in all (at most %d times each), requeued %d; leases parked after %d pairs; drained %d; the tail went round the ring %d times",
		loops, elapsed.Round(time.Millisecond), (elapsed / time.Duration(loops)).Round(100*time.Microsecond), len(pushed), loops, maxCount(claims), c.Requeued, parked, len(drained), c.Tail/r.Capacity())
}

// TestCrashLoopingDequeThievesNeverLockTheTable: the owner (this process)
// alive and pushing; thieves that attach, lease one message and die.
func TestCrashLoopingDequeThievesNeverLockTheTable(t *testing.T) {
	loops := soakLoops(t)
	d := newDeque(t, DequeConfig{Capacity: nextPow2(uint64(loops) + 16), Participants: 4, DeliveryLimit: 15})
	var pushed []uint64
	next := uint64(1)
	push := func(n int) {
		for range n {
			if err := d.TryPush(encodeMsg(next)); err != nil {
				t.Errorf("owner push: %v", err)
				return
			}
			pushed = append(pushed, next)
			next++
		}
	}
	push(8)
	claims := map[uint64]int{}
	start := time.Now()
	// The owner pushes one message per thief while the thieves run.
	attached := crashLoop(t, d.Path(), "deque-lease", loops, claims, func() { push(2) }, nil)
	elapsed := time.Since(start)
	if attached != loops {
		t.Fatalf("%d of %d children attached", attached, loops)
	}
	if !d.IsOwner() {
		t.Fatal("the live owner lost its role")
	}
	th, err := OpenDeque(d.Path())
	if err != nil {
		t.Fatalf("attach after the crash loop: %v", err)
	}
	defer th.Close()
	drained := drainDequeEventually(t, th)
	checkDelivery(t, pushed, drained, nil)
	if len(drained) != len(pushed) {
		t.Errorf("drained %d messages, pushed %d", len(drained), len(pushed))
	}
	if s := th.Scan(); s.Problems != 0 || s.Counters.Poisoned != 0 || !s.OwnerAlive {
		t.Fatalf("after the drain: %d problems, %d poisoned, owner alive %v: %+v", s.Problems, s.Counters.Poisoned, s.OwnerAlive, s.Slots)
	}
	requireOnlyLiveEntries(t, th.Peers(), 2)
	t.Logf("%d thieves (2 at a time) attached, leased and died in %v: %v per child; %d messages, leased %d times in all (at most %d times each), returned %d; drained %d",
		loops, elapsed.Round(time.Millisecond), (elapsed / time.Duration(loops)).Round(100*time.Microsecond), len(pushed), loops, maxCount(claims), d.Counters().Returned, len(drained))
}

// crashLoop runs loops children in role on path, two at a time, each
// armed to die at leaseHeldPoint, and returns how many attached. during
// runs while each pair runs, after (if not nil) once it has died. Each
// child's leased message is counted in claims.
func crashLoop(t *testing.T, path, role string, loops int, claims map[uint64]int, during, after func()) (attached int) {
	t.Helper()
	for i := 0; i < loops; i += 2 {
		var pair []*proctest.Child
		for j := i; j < min(i+2, loops); j++ {
			pair = append(pair, tableHelper.Start(t, role, append(proctest.Arm(leaseHeldPoint, 1), proctest.PathArg(path))...))
		}
		if during != nil {
			during()
		}
		for k, c := range pair {
			if !c.DiedAt(leaseHeldPoint) {
				out, errOut := c.Output()
				var others string
				for _, o := range pair {
					if o != c {
						oo, oe := o.Output()
						others += fmt.Sprintf("\nthe other child (%v):\n%s%s", o.Wait(), oo, oe)
					}
				}
				if dst := os.Getenv("SHMKIT_SOAK_KEEP"); dst != "" {
					if b, err := os.ReadFile(path); err == nil {
						os.WriteFile(dst, b, 0o600)
					}
				}
				t.Fatalf("child %d did not die holding its lease (%v): every attach must succeed\nstdout:\n%s\nstderr:\n%s%s\ntable now:\n%s",
					i+k, c.Wait(), out, errOut, others, describePeers(path))
			}
			l := c.Log()
			attached += len(l["attached"])
			for _, id := range l["got"] {
				claims[id]++
			}
		}
		if after != nil {
			after()
		}
	}
	return attached
}

// drainRingEventually claims and acks until the ring is empty and a
// repair finds nothing left to requeue.
func drainRingEventually(t *testing.T, r *Ring) []uint64 {
	t.Helper()
	var ids []uint64
	for round := 0; ; round++ {
		took := 0
		for {
			l, err := r.TryClaim()
			if err == ErrEmpty {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			id, err := decodeMsg(l.Data())
			if err != nil {
				t.Fatalf("corrupt payload: %v", err)
			}
			if err := r.Ack(l); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			took++
		}
		rep, err := r.Repair()
		if err != nil {
			t.Fatal(err)
		}
		if took == 0 && !rep.Changed() && rep.Count(check.ActionDefer) == 0 {
			return ids
		}
		if round > int(r.Capacity())+10 {
			t.Fatalf("the drain does not end: %d rounds; last repair %+v", round, rep)
		}
	}
}

// drainDequeEventually is drainRingEventually for a deque thief.
func drainDequeEventually(t *testing.T, d *Deque) []uint64 {
	t.Helper()
	var ids []uint64
	for round := 0; ; round++ {
		took := 0
		for {
			l, err := d.TryClaim()
			if err == ErrEmpty {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			id, err := decodeMsg(l.Data())
			if err != nil {
				t.Fatalf("corrupt payload: %v", err)
			}
			if err := d.Ack(l); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			took++
		}
		rep, err := d.Repair()
		if err != nil {
			t.Fatal(err)
		}
		if took == 0 && !rep.Changed() {
			return ids
		}
		if round > 10 {
			t.Fatalf("the drain does not end: %d rounds; last repair %+v", round, rep)
		}
	}
}

// requireOnlyLiveEntries fails unless exactly want entries are taken, each
// by a live holder, and the repairer entry is free.
func requireOnlyLiveEntries(t *testing.T, ps []check.Peer, want int) {
	t.Helper()
	taken := 0
	for _, p := range ps {
		if p.State == "free" {
			continue
		}
		if p.Repairer || p.Dead || p.Unknown {
			t.Errorf("entry %d left %s (%s)", p.Index, p.State, p.Reason)
		}
		taken++
	}
	if taken != want {
		t.Errorf("%d entries taken, want %d: %+v", taken, want, ps)
	}
}

func nextPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

func maxCount(m map[uint64]int) int {
	n := 0
	for _, c := range m {
		n = max(n, c)
	}
	return n
}

// describePeers lists the entries of the table at path, for a failure
// message.
func describePeers(path string) string {
	var ps []check.Peer
	if r, err := OpenRingReadOnly(path); err == nil {
		ps = r.Peers()
		r.Close()
	} else if d, err := OpenDequeReadOnly(path); err == nil {
		ps = d.Peers()
		d.Close()
	}
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %d %s %s dead=%v unknown=%v lock=%s: %s\n", p.Index, p.State, p.Where(), p.Dead, p.Unknown, p.Lock, p.Reason)
	}
	return b.String()
}
