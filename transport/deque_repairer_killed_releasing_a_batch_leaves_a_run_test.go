package transport

import (
	"fmt"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// A repair killed while it releases a dead owner's push-batch claims
// leaves the claims it did not release still a run from bottom, so the
// next repair releases them: none is left WRITING behind a free slot at
// bottom, where no repair looks (found by models/deque.pml with two
// deaths: the owner in its batch, then its repairer; fixBottom used to
// release the run first to last).
func TestDequeRepairerKilledReleasingABatchLeavesARun(t *testing.T) {
	for _, killedAfter := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("killed_after_%d_releases", killedAfter), func(t *testing.T) {
			d, th := dequeAt(t, DequeConfig{Capacity: 8}, 6, false)
			// The owner dies with 4 claims taken (positions 6..9), none
			// written.
			runDequeBatchChild(t, d.Path(), "owner", crashDequePushBatchAfterClaims, 1, "FIRST=1", "COUNT=4", "BATCH=4")
			if s := th.Scan(); s.States[layout.SlotWriting] != 4 {
				t.Fatalf("%d slots WRITING after the owner's kill, want 4: %+v", s.States[layout.SlotWriting], s.Slots)
			}
			// Its repairer dies after releasing killedAfter of them.
			dequeHelper.RunToCrash(t, "repair", crashDequeRepairMidRelease, killedAfter, proctest.PathArg(d.Path()))
			if s := th.Scan(); s.States[layout.SlotWriting] != 4-killedAfter {
				t.Fatalf("%d slots WRITING after the repairer's kill, want %d: %+v", s.States[layout.SlotWriting], 4-killedAfter, s.Slots)
			}
			rep := dequePlanIsRepair(t, th)
			if rep.Count(check.ActionRelease) != 4-killedAfter || rep.Corrupt != 0 {
				logFindings(t, "repair", rep.Done)
				t.Fatalf("repair: want %d released and nothing corrupt, got %d corrupt", 4-killedAfter, rep.Corrupt)
			}
			if _, err := d.Adopt(); err != nil {
				t.Fatal(err)
			}
			if got := dequeUsable(t, d); len(got) != 0 {
				t.Fatalf("drained %v: the dead owner's batch was never published", got)
			}
		})
	}
}
