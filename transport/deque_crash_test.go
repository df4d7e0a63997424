package transport

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// Crash tests for the deque: a real child process is killed at a named step
// of push, pop, steal, claim, ack, return, repair or adopt; the parent then
// repairs (and adopts when the owner died), drains, and checks that every
// message whose push returned is delivered at least once and intact, that
// duplicates are only of messages in flight at the kill, and that the deque
// works afterwards.

var dequeHelper = proctest.Helper{Test: "TestDequeHelperProcess", Prefix: "deque-"}

// TestDequeHelperProcess is the child side. Roles:
//
//	owner    adopt, push ids FIRST..FIRST+COUNT-1 ("ok ID"), then pop POP
//	         messages at the bottom ("got ID")
//	steal    steal until empty ("got ID")
//	claim    claim ("got ID"), ack ("acked ID") until empty
//	hold     claim one message ("got ID") and die processing it
//	release  claim one message and release it
//	repair   run Repair
//	adopt    run Adopt
//	thief    steal (Steal or, with LEASE=1, Claim+Ack) until id 0 ("got ID")
//
// In a deque with message ids, claim, hold and release also print
// "msgid ID" (the lease's id) after each "got ID".
func TestDequeHelperProcess(t *testing.T) { dequeHelper.Serve(dequeChild) }

func dequeChild(role string) error {
	d, err := OpenDeque(proctest.EnvPath())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	buf := make([]byte, d.MaxPayload())
	switch role {
	case "owner":
		if _, err := d.Adopt(); err != nil {
			return err
		}
		first, count := proctest.EnvUint64("FIRST"), proctest.EnvUint64("COUNT")
		for id := first; id < first+count; id++ {
			if err := d.Push(ctx, encodeMsg(id)); err != nil {
				return err
			}
			fmt.Printf("ok %d\n", id)
		}
		for i := uint64(0); i < proctest.EnvUint64("POP"); i++ {
			n, err := d.TryPop(buf)
			if err != nil {
				return err
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
		}
	case "steal":
		for {
			n, err := d.TryPop(buf)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
		}
	case "claim", "hold", "release":
		for {
			l, err := d.TryClaim()
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			id, err := decodeMsg(l.Data())
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
			if d.MessageIDs() {
				fmt.Printf("msgid %d\n", l.ID())
			}
			switch role {
			case "hold":
				shm.CrashPoint("test.lease.processing")
			case "release":
				return d.Release(l)
			}
			if err := d.Ack(l); err != nil {
				return err
			}
			fmt.Printf("acked %d\n", id)
		}
	case "thief":
		for {
			var id uint64
			if os.Getenv("LEASE") == "1" {
				l, err := d.Claim(ctx)
				if err != nil {
					return err
				}
				if id, err = decodeMsg(l.Data()); err != nil {
					return err
				}
				if err := d.Ack(l); err != nil {
					return err
				}
			} else {
				n, err := d.Steal(ctx, buf)
				if err != nil {
					return err
				}
				if id, err = decodeMsg(buf[:n]); err != nil {
					return err
				}
			}
			if id == 0 {
				break
			}
			fmt.Printf("got %d\n", id)
		}
	case "repair":
		if _, err := d.Repair(); err != nil {
			return err
		}
	case "adopt":
		if _, err := d.Adopt(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return d.Close()
}

// runDequeChild runs a child to its death at point (the after-th time it
// gets there), insisting that it died there, or, with no point, to a clean
// exit; it returns the child's log.
func runDequeChild(t *testing.T, path, role, point string, after int, env ...string) proctest.Log {
	t.Helper()
	env = append(env, proctest.PathArg(path))
	if point == "" {
		return dequeHelper.Run(t, role, env...).Log()
	}
	return dequeHelper.RunToCrash(t, role, point, after, env...).Log()
}

// drainDeque takes everything through the ordinary pop path, failing on
// any corrupt payload.
func drainDeque(t *testing.T, d *Deque) []uint64 {
	t.Helper()
	var ids []uint64
	buf := make([]byte, d.MaxPayload())
	for {
		n, err := d.TryPop(buf)
		if err == ErrEmpty {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		id, err := decodeMsg(buf[:n])
		if err != nil {
			t.Fatalf("corrupt payload after repair: %v", err)
		}
		ids = append(ids, id)
	}
}

func TestDequeCrashPoints(t *testing.T) {
	type step struct {
		role, point string
		after       int
		env         []string
	}
	owner := func(point string, after int, env ...string) step {
		return step{"owner", point, after, append([]string{"FIRST=1", "COUNT=10"}, env...)}
	}
	tests := []struct {
		name      string
		prefill   bool   // the parent, as owner, pushes 1..10 and keeps the role
		steps     []step // children, in order; each but a clean one dies
		ownerDies bool
		want      func(rep check.RepairReport) string // what the parent's repair must report
	}{
		{"push after claim", false, []step{owner(crashDequePushAfterClaim, 5)}, true,
			func(r check.RepairReport) string {
				return want(r.Count(check.ActionRelease) == 1 && r.Count(check.ActionFreeOwner) == 1, "abandoned 1, owner died")
			}},
		{"push after write", false, []step{owner(crashDequePushAfterWrite, 5)}, true,
			func(r check.RepairReport) string { return want(r.Count(check.ActionCountIn) == 1, "published 1") }},
		{"push after publish", false, []step{owner(crashDequePushAfterPublish, 5)}, true,
			func(r check.RepairReport) string {
				return want(r.Count(check.ActionFreeOwner) == 1 && r.Count(check.ActionCountIn) == 0, "owner died, nothing else")
			}},
		{"pop after announce", false, []step{owner(crashDequePopAfterAnnounce, 2, "POP=3")}, true,
			func(r check.RepairReport) string {
				return want(r.Count(check.ActionCountIn) == 1, "published 1 (the announced pop)")
			}},
		{"pop after take", false, []step{owner(crashDequePopAfterTake, 2, "POP=3")}, true,
			func(r check.RepairReport) string { return want(r.Count(check.ActionRollBack) == 1, "rolled back 1") }},
		{"pop after copy", false, []step{owner(crashDequePopAfterCopy, 2, "POP=3")}, true,
			func(r check.RepairReport) string { return want(r.Count(check.ActionRollBack) == 1, "rolled back 1") }},
		{"steal after take", true, []step{{"steal", crashDequeStealAfterTake, 3, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"steal after advance", true, []step{{"steal", crashDequeStealAfterAdvance, 3, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"steal after copy", true, []step{{"steal", crashDequeStealAfterCopy, 3, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"claim after take", true, []step{{"claim", crashDequeStealAfterTake, 3, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"lease held", true, []step{{"hold", "test.lease.processing", 1, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"ack before free", true, []step{{"claim", crashDequeAckBeforeFree, 3, nil}}, false,
			func(r check.RepairReport) string { return want(r.Count(check.ActionReturn) == 1, "returned 1") }},
		{"return after mark", true, []step{{"release", crashDequeReturnAfterMark, 1, nil}}, false,
			func(r check.RepairReport) string {
				return want(len(r.DeadPeers) == 1 && r.Count(check.ActionReturn) == 0, "dead peer, nothing to return")
			}},
		// A thief hands message 1 back (returned, in slot 0); the next
		// owner's pushes wrap round to slot 0 and publish it again there,
		// as the newest, and die before bottom moves past it.
		{"push after republish", false, []step{owner("", 0), {"release", "", 0, nil}, owner(crashDequePushAfterRepublish, 1, "FIRST=11")}, true,
			func(r check.RepairReport) string {
				return want(r.Count(check.ActionCountIn) == 1 && r.Count(check.ActionFreeOwner) == 1, "the republished message counted in, owner died")
			}},
		{"repairer dies", false, []step{owner(crashDequePopAfterTake, 1, "POP=1"), {"repair", crashDequeRepairAfterFixBottom, 1, nil}}, true,
			func(r check.RepairReport) string {
				return want(r.Count(check.ActionFreeOwner) == 1, "owner died (finished by the second repair)")
			}},
		{"adopter dies", false, []step{owner(crashDequePushAfterWrite, 3), {"adopt", crashDequeAdoptAfterFixBottom, 1, nil}}, true,
			func(r check.RepairReport) string { return want(len(r.DeadPeers) >= 1, "dead peers") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeque(t, DequeConfig{Capacity: 16, DeliveryLimit: 5})
			path := d.Path()
			var promised, delivered []uint64
			inFlight := map[uint64]bool{}
			if tt.prefill {
				for id := uint64(1); id <= 10; id++ {
					if err := d.TryPush(encodeMsg(id)); err != nil {
						t.Fatal(err)
					}
				}
				promised = seq(1, 10)
			} else {
				d.Close() // the children adopt it
			}
			for _, s := range tt.steps {
				log := runDequeChild(t, path, s.role, s.point, s.after, s.env...)
				promised = append(promised, log["ok"]...)
				delivered = append(delivered, log["acked"]...)
				// A message the child got but did not ack (or popped
				// and printed) may come again only if it was in flight.
				got := log["got"]
				if s.role == "owner" || s.role == "steal" {
					delivered = append(delivered, got...)
				}
				if len(got) > 0 {
					inFlight[got[len(got)-1]] = true
				}
			}
			p, err := OpenDeque(path)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			scan := p.Scan()
			if tt.ownerDies == scan.OwnerAlive && tt.ownerDies {
				t.Errorf("scan: owner alive %v after the owner was killed", scan.OwnerAlive)
			}
			rep, err := p.Repair()
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.want(rep); msg != "" {
				t.Errorf("repair %+v: want %s", rep, msg)
			}
			if again, err := p.Repair(); err != nil || again.Changed() {
				t.Errorf("second repair changed something: %+v %v", again, err)
			}
			drainer := d
			if !tt.prefill {
				if _, err := p.Adopt(); err != nil {
					t.Fatalf("adopt after the owner died: %v", err)
				}
				drainer = p
			}
			delivered = append(delivered, drainDeque(t, drainer)...)
			if len(promised) == 0 || len(delivered) == 0 {
				t.Fatalf("nothing promised (%v) or delivered (%v): the children did no work", promised, delivered)
			}
			checkDelivery(t, promised, delivered, inFlight)
			after := drainer.Scan()
			if after.Problems != 0 || after.States[layout.SlotReturned] != 0 || after.States[layout.SlotReading] != 0 {
				t.Errorf("after drain: %+v", after)
			}
			// Usable afterwards.
			if err := drainer.TryPush(encodeMsg(99)); err != nil {
				t.Fatal(err)
			}
			if got := drainDeque(t, drainer); len(got) != 1 || got[0] != 99 {
				t.Fatalf("after repair: %v", got)
			}
		})
	}
}

func want(ok bool, what string) string {
	if ok {
		return ""
	}
	return what
}

// A thief blocked on an empty-looking deque, behind a dead owner's pop in
// progress, heals it: the pop is rolled back and the thief gets the
// message, without anyone calling Repair.
func TestDequeBlockedThiefHealsDeadOwnersPop(t *testing.T) {
	stealBehindDeadOwnersPop(t, crashDequePopAfterTake, 10*time.Second)
}

// stealBehindDeadOwnersPop kills an owner at point in its pop of its only
// message, then steals, blocking for at most wait: the thief must get the
// message without anyone calling Repair or Adopt.
func stealBehindDeadOwnersPop(t *testing.T, point string, wait time.Duration) {
	t.Helper()
	d := newDeque(t, DequeConfig{Capacity: 8})
	path := d.Path()
	d.Close()
	log := runDequeChild(t, path, "owner", point, 1, "FIRST=1", "COUNT=1", "POP=1")
	if len(log["ok"]) != 1 {
		t.Fatalf("child log %v", log)
	}
	th, err := OpenDeque(path)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	buf := make([]byte, th.MaxPayload())
	n, err := th.Steal(ctx, buf)
	if err != nil {
		t.Fatalf("blocked steal behind a dead owner's pop (killed at %s): %v (counters %+v, scan owner alive %v)", point, err, th.Counters(), th.Scan().OwnerAlive)
	}
	if id, err := decodeMsg(buf[:n]); err != nil || id != 1 {
		t.Fatalf("got %d %v", id, err)
	}
}

// Many thieves and owners dying and attaching never exhaust the table, and
// a process that takes over a dead thief's entry hands its lease back.
func TestDequeTakeOverDeadThiefEntry(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 2})
	for id := uint64(1); id <= 3; id++ {
		d.TryPush(encodeMsg(id))
	}
	runDequeChild(t, d.Path(), "hold", "test.lease.processing", 1)
	// The table is full (owner + dead thief): attaching takes over the
	// dead entry and returns its lease.
	th, err := OpenDeque(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	got := drainDeque(t, th)
	if len(got) != 3 {
		t.Fatalf("drained %v", got)
	}
}

// One owner process (this one) and thief processes sharing one deque: every
// message is taken exactly once, intact, whether the owner pops some of
// them itself or not.
func TestDequeAcrossProcesses(t *testing.T) {
	const n = 20000
	d := newDeque(t, DequeConfig{Capacity: 256})
	var children []*proctest.Child
	for _, lease := range []string{"0", "1"} {
		children = append(children, dequeHelper.Start(t, "thief", proctest.PathArg(d.Path()), "LEASE="+lease))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	count := map[uint64]int{}
	buf := make([]byte, d.MaxPayload())
	for id := uint64(1); id <= n; id++ {
		if err := d.Push(ctx, encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
		if id%7 == 0 { // the owner keeps some of its work
			if m, err := d.TryPop(buf); err == nil {
				got, err := decodeMsg(buf[:m])
				if err != nil {
					t.Fatal(err)
				}
				count[got]++
			}
		}
	}
	for range children {
		if err := d.Push(ctx, encodeMsg(0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range children {
		c.MustSucceed(t)
		for _, id := range c.Log()["got"] {
			count[id]++
		}
	}
	for id := uint64(1); id <= n; id++ {
		if count[id] != 1 {
			t.Fatalf("message %d taken %d times", id, count[id])
		}
	}
	if len(count) != n {
		t.Fatalf("%d distinct messages taken, want %d", len(count), n)
	}
}

// An owner killed right after burning past a held lease: the burned
// position is stepped over by repair, and the lease is still the holder's.
func TestDequeCrashAfterBurn(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	path := d.Path()
	th := openThief(t, d)
	for id := uint64(1); id <= 4; id++ {
		d.TryPush(encodeMsg(id))
	}
	held, err := th.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	delivered := drainDeque(t, th) // 2, 3, 4
	d.Close()
	log := runDequeChild(t, path, "owner", crashDequePushAfterBurn, 1, "FIRST=5", "COUNT=3")
	p, err := OpenDeque(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rep, err := p.Repair()
	if err != nil || rep.Count(check.ActionFreeOwner) != 1 {
		t.Fatalf("repair %+v %v", rep, err)
	}
	if _, err := p.Adopt(); err != nil {
		t.Fatal(err)
	}
	if err := th.Ack(held); err != nil {
		t.Fatalf("the burned lease is still held: %v", err)
	}
	delivered = append(delivered, 1)
	for id := uint64(5); id <= 7; id++ {
		if err := p.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	delivered = append(delivered, drainDeque(t, p)...)
	checkDelivery(t, append(seq(1, 4), log["ok"]...), delivered, nil)
	if len(delivered) != 7 {
		t.Fatalf("delivered %v", delivered)
	}
}
