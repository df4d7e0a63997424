package transport

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport/check"
)

// Issue 15, item 4: a repair (or a Release, or a Close) re-publishes a
// held message in place when the ring is full and the tail is at its
// slot. Between its look at the tail and its CAS, a consumer can pop
// (making room) and a producer then burns past that very lease (moving
// its lap), so the CAS fails. That used to be silent: Repair freed the
// dead owner's entry while the slot still named it (Check: a slot owned
// by a free entry; no later repair delivers the message), Release
// returned nil with the lease still held (a following Ack succeeded), and
// Close freed its entry with its lease in the ring. These tests put
// exactly that pop and push in the window, through the handle's
// inPlaceHook, on a 2-slot ring (the retry finds the tail at the slot
// again: re-published in place) and a 4-slot one (the tail has moved on
// to a full slot: deferred, the owner's entry kept until a later repair).

const inPlaceRaceHelper = "TestRingInPlaceRaceHelperProcess"

// TestRingInPlaceRaceHelperProcess is the child side: it claims one
// message, prints "got ID" and dies holding it (SIGKILL).
func TestRingInPlaceRaceHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || role != "inplace-race-hold" {
		return
	}
	err := func() error {
		r, err := OpenRing(os.Getenv("SHMKIT_TEST_PATH"))
		if err != nil {
			return err
		}
		l, err := r.TryClaim()
		if err != nil {
			return err
		}
		id, err := decodeMsg(l.Data())
		if err != nil {
			return err
		}
		fmt.Printf("got %d\n", id)
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}()
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(1)
}

// raceRing is the state every test starts from.
type raceRing struct {
	r, other *Ring    // the creator (Repair runs on it), another live participant for the hook
	holder   *Ring    // the live lease holder, nil when a child died holding it
	lease    Lease    // holder's lease on message 0
	next     uint64   // the next message id to push
	popped   []uint64 // delivered while setting up
}

// inPlaceRace builds, on a ring of capacity slots: message 0 leased in
// slot 0 (by a live handle when live, else by a child that dies holding
// it), burned past once; slots 1.. holding messages capacity..2capacity-2;
// the head at the burned position and the tail a lap on at slot 0 again.
// The ring is full (no push burns while the tail is a lap ahead of the
// head), so a repair or a Release finds no room for a copy, and the tail
// is at the slot: it re-publishes in place.
func inPlaceRace(t *testing.T, capacity uint64, live bool) *raceRing {
	t.Helper()
	rr := &raceRing{r: newRing(t, RingConfig{Capacity: capacity, Participants: 4})}
	r := rr.r
	racePush(t, r, 0)
	if live {
		var err error
		if rr.holder, err = OpenRing(r.Path()); err != nil {
			t.Fatal(err)
		}
		h := rr.holder
		t.Cleanup(func() { h.Close() })
		if rr.lease, err = h.TryClaim(); err != nil {
			t.Fatal(err)
		}
	} else {
		c := proctest.StartTimeout(t, 30*time.Second, inPlaceRaceHelper, "inplace-race-hold", "SHMKIT_TEST_PATH="+r.Path())
		err := c.Wait()
		out, errOut := c.Output()
		if err == nil || !strings.Contains(err.Error(), "killed") || !strings.Contains(out, "got 0") {
			t.Fatalf("the holder did not die holding message 0 (err %v)\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
	}
	for id := uint64(1); id < capacity; id++ {
		racePush(t, r, id)
	}
	// Burns past the lease (slot 0 to lap 1), then finds slot 1 full.
	if err := r.TryPush(encodeMsg(capacity)); err != ErrFull {
		t.Fatalf("push %d: %v, want ErrFull", capacity, err)
	}
	for k := uint64(1); k < capacity; k++ {
		if id := racePop(t, r); id != k {
			t.Fatalf("popped %d, want %d", id, k)
		}
		rr.popped = append(rr.popped, k)
		racePush(t, r, capacity-1+k)
	}
	rr.next = 2*capacity - 1
	if c := r.Counters(); c.Head != capacity || c.Tail != 2*capacity {
		t.Fatalf("head %d, tail %d; want %d, %d", c.Head, c.Tail, capacity, 2*capacity)
	}
	if err := r.TryPush(encodeMsg(1000)); err != ErrFull {
		t.Fatalf("push into the full ring: %v, want ErrFull", err)
	}
	var err error
	if rr.other, err = OpenRing(r.Path()); err != nil {
		t.Fatal(err)
	}
	o := rr.other
	t.Cleanup(func() { o.Close() })
	return rr
}

func racePush(t *testing.T, r *Ring, id uint64) {
	t.Helper()
	if err := r.TryPush(encodeMsg(id)); err != nil {
		t.Fatalf("push %d: %v", id, err)
	}
}

func racePop(t *testing.T, r *Ring) uint64 {
	t.Helper()
	buf := make([]byte, r.MaxPayload())
	n, err := r.TryPop(buf)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	id, err := decodeMsg(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// hook is what h's inPlaceHook does, the first time only: on the other
// handle, a pop (the head steps past the burned position and takes the
// next message) and a push, which burns past the lease the hook's caller
// is about to CAS. It records what it popped.
func (rr *raceRing) hook(t *testing.T, h *Ring) *[]uint64 {
	popped := &[]uint64{}
	ran := false
	h.inPlaceHook = func(slot uint64) {
		if ran {
			return
		}
		ran = true
		if slot != 0 {
			t.Errorf("in-place re-publish of slot %d, want 0", slot)
		}
		*popped = append(*popped, racePop(t, rr.other))
		before := rr.other.Counters().Burned
		racePush(t, rr.other, rr.next)
		rr.next++
		if rr.other.Counters().Burned != before+1 {
			t.Errorf("the hook's push did not burn past the lease")
		}
	}
	t.Cleanup(func() { h.inPlaceHook = nil })
	return popped
}

// drainAll pops every message left (a consumer that finds the ring empty
// repairs again when messages wait for room).
func (rr *raceRing) drainAll(t *testing.T) []uint64 {
	t.Helper()
	var ids []uint64
	buf := make([]byte, rr.r.MaxPayload())
	for {
		n, err := rr.r.TryPop(buf)
		if err == ErrEmpty {
			return ids
		}
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		id, err := decodeMsg(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
}

// expectAll checks that every message pushed was delivered exactly once.
func (rr *raceRing) expectAll(t *testing.T, got []uint64) {
	t.Helper()
	got = append(append([]uint64(nil), rr.popped...), got...)
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	want := []uint64{}
	for id := uint64(0); id < rr.next; id++ {
		want = append(want, id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

// expectClean checks that Check finds nothing and the ring still works.
func (rr *raceRing) expectClean(t *testing.T, when string) {
	t.Helper()
	for _, f := range rr.r.Check().Findings {
		t.Errorf("%s: %s %s (%s): %s", when, f.Location, f.Problem, f.Action, f.Detail)
	}
	for id := uint64(2000); id < 2000+2*rr.r.Capacity(); id++ {
		racePush(t, rr.r, id)
		if got := racePop(t, rr.r); got != id {
			t.Fatalf("popped %d after pushing %d", got, id)
		}
	}
}

type raceFinding struct {
	Loc    string
	Action check.Action
}

func raceCut(fs []check.Finding) []raceFinding {
	out := []raceFinding{}
	for _, f := range fs {
		out = append(out, raceFinding{f.Location, f.Action})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Loc != out[j].Loc {
			return out[i].Loc < out[j].Loc
		}
		return out[i].Action < out[j].Action
	})
	return out
}

func logRaceFindings(t *testing.T, what string, fs []check.Finding) {
	t.Helper()
	for _, f := range fs {
		t.Logf("%s: %s %s %s: %s", what, f.Location, f.Problem, f.Action, f.Detail)
	}
}

func TestRingRepairInPlaceRaceRetries(t *testing.T) {
	for _, tc := range []struct {
		capacity uint64
		action   check.Action // what the retry does with the dead holder's lease
	}{
		{2, check.ActionRequeueInPlace}, // the tail is at the slot again
		{4, check.ActionDefer},          // the tail moved on to a full slot
	} {
		t.Run(fmt.Sprintf("capacity %d", tc.capacity), func(t *testing.T) {
			rr := inPlaceRace(t, tc.capacity, false)
			r := rr.r
			plan := r.PlanRepair()
			logRaceFindings(t, "plan", plan)
			popped := rr.hook(t, r)
			rep, err := r.Repair()
			r.inPlaceHook = nil
			if err != nil {
				t.Fatal(err)
			}
			logRaceFindings(t, "done", rep.Done)
			if len(*popped) != 1 {
				t.Fatalf("the hook did not run in the window (popped %v)", *popped)
			}
			if got := raceCut(plan); !cmp.Equal(got, []raceFinding{{"participant[1].ctl", check.ActionFreeEntry}, {"slot[0].word", check.ActionRequeueInPlace}}) {
				t.Fatalf("plan before the race: %v", got)
			}
			want := []raceFinding{{"slot[0].word", tc.action}}
			if tc.action != check.ActionDefer {
				// The entry is freed only once no slot names it.
				want = append([]raceFinding{{"participant[1].ctl", check.ActionFreeEntry}}, want...)
			}
			if diff := cmp.Diff(want, raceCut(rep.Done)); diff != "" {
				t.Fatalf("what Repair did (-want +got):\n%s", diff)
			}
			if tc.action == check.ActionDefer {
				if r.Counters().Deferred == 0 {
					t.Errorf("ring.deferred not raised for the deferred message")
				}
				// Check agrees with the file as the race left it: the
				// lease waits for room, its entry is kept, and a repair
				// now would do what Repair did.
				fs := r.Check().Findings
				logRaceFindings(t, "check after", fs)
				for _, f := range fs {
					if f.Location == "slot[0].word" && (f.Problem != check.ProblemOrphanedLease || f.Action != check.ActionDefer) {
						t.Errorf("after the repair: %s %s %s: %s", f.Location, f.Problem, f.Action, f.Detail)
					}
					if f.Problem == check.ProblemCorruptSlot || f.Problem == check.ProblemBadParticipant {
						t.Errorf("after the repair: %s %s: %s", f.Location, f.Problem, f.Detail)
					}
				}
				if diff := cmp.Diff(raceCut(rep.Done), raceCut(r.PlanRepair())); diff != "" {
					t.Errorf("PlanRepair after the race and what Repair did differ (-done +plan):\n%s", diff)
				}
			}
			rr.expectAll(t, append(*popped, rr.drainAll(t)...))
			rr.expectClean(t, "after the drain")
		})
	}
}

func TestRingReleaseInPlaceRaceRetries(t *testing.T) {
	for _, capacity := range []uint64{2, 4} {
		t.Run(fmt.Sprintf("capacity %d", capacity), func(t *testing.T) {
			rr := inPlaceRace(t, capacity, true)
			popped := rr.hook(t, rr.holder)
			err := rr.holder.Release(rr.lease)
			rr.holder.inPlaceHook = nil
			if len(*popped) != 1 {
				t.Fatalf("the hook did not run in the window (popped %v)", *popped)
			}
			if capacity == 2 {
				// Re-published in place on the retry: the lease is gone.
				if err != nil {
					t.Fatalf("Release: %v", err)
				}
				if err := rr.holder.Ack(rr.lease); !errors.Is(err, ErrLeaseLost) {
					t.Fatalf("Ack after a Release that returned nil: %v, want ErrLeaseLost", err)
				}
			} else {
				// No room and the tail moved on: the lease is still held,
				// and Release says so.
				if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "still held") {
					t.Fatalf("Release: %v, want ErrFull (the lease is still held)", err)
				}
				if err := rr.holder.Ack(rr.lease); err != nil {
					t.Fatalf("Ack of the lease Release kept: %v", err)
				}
			}
			got := append(*popped, rr.drainAll(t)...)
			if capacity != 2 {
				got = append(got, 0) // acked above
			}
			rr.expectAll(t, got)
			rr.expectClean(t, "after the drain")
		})
	}
}

// Close hands its leases back through the same path: its entry may be
// freed only once no slot names it.
func TestRingCloseInPlaceRaceRetries(t *testing.T) {
	for _, capacity := range []uint64{2, 4} {
		t.Run(fmt.Sprintf("capacity %d", capacity), func(t *testing.T) {
			rr := inPlaceRace(t, capacity, true)
			popped := rr.hook(t, rr.holder)
			if err := rr.holder.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if len(*popped) != 1 {
				t.Fatalf("the hook did not run in the window (popped %v)", *popped)
			}
			fs := rr.r.Check().Findings
			logRaceFindings(t, "after Close", fs)
			for _, f := range fs {
				if capacity == 4 && f.Location == "slot[0].word" && f.Action == check.ActionDefer {
					continue // left for a repair, its entry kept (dead)
				}
				if capacity == 4 && f.Problem == check.ProblemDeadParticipant && f.Action == check.ActionNone {
					continue // kept while its message waits for room
				}
				t.Errorf("after Close: %s %s (%s): %s", f.Location, f.Problem, f.Action, f.Detail)
			}
			rr.expectAll(t, append(*popped, rr.drainAll(t)...))
			rr.expectClean(t, "after the drain")
		})
	}
}
