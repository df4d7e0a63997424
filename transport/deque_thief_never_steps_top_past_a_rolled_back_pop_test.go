package transport

import (
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// A thief that read the slot at top as the owner's pop in progress
// (READING, stamped by the owner) must not judge it against an owner word
// loaded after the owner died and a repair rolled the pop back to READY
// and freed the role: the stale slot word and the new owner word together
// look like a thief's take, and helping top past it lost the message for
// good (found by models/deque.pml, -DWITH_ADOPTER: the owner's second pop
// takes the last message, the one a thief races for).
//
// The interleaving is forced at steal's slow path (stealHook): after the
// thief's first look at the empty slot, a child owner pushes message 1
// and gives its role up; after the thief's load of bottom, a second child
// adopts, pops message 1 and is killed holding it (deque.pop.after-take);
// after the thief's second look at the slot (READING, that child's), a
// third child repairs. The thief must then take message 1.
func TestDequeThiefNeverStepsTopPastARolledBackPop(t *testing.T) {
	d, th := dequeAt(t, DequeConfig{Capacity: 4}, 0, false)
	path := proctest.PathArg(d.Path())
	done := map[int]bool{}
	stealHook = func(stage int) {
		if done[stage] || (stage > 1 && !done[stage-1]) {
			return
		}
		done[stage] = true
		switch stage {
		case 1:
			dequeHelper.Run(t, "owner", path, "FIRST=1", "COUNT=1")
		case 2:
			dequeHelper.RunToCrash(t, "owner", crashDequePopAfterTake, 1, path, "COUNT=0", "POP=1")
		case 3:
			dequeHelper.Run(t, "repair", path)
		}
	}
	t.Cleanup(func() { stealHook = nil })

	buf := make([]byte, th.MaxPayload())
	n, err := th.TryPop(buf)
	stealHook = nil
	if !done[3] {
		t.Fatalf("the steal did not take the slow path through all three stages: %v", done)
	}
	if err != nil {
		t.Fatalf("TryPop after the rolled-back pop: %v (top %d, bottom %d): message 1 was stepped past", err, th.Counters().Top, th.Counters().Bottom)
	}
	if id, err := decodeMsg(buf[:n]); err != nil || id != 1 {
		t.Fatalf("stole %d (%v), want message 1", id, err)
	}
	dequeCheckClean(t, th, "after the steal")
}
