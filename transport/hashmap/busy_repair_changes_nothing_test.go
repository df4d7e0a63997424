package hashmap

import (
	"errors"
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// Invariant: a repair without an entry of its own that finds another live
// process repairing (the repair lock held) fails with
// transport.ErrRepairBusy and leaves the table as it found it: the
// repairer entry it held for the call is free again, so no later Check
// or Repair reports a live process's entry as dead.
//
// Was a bug: peers.Table.AsRepairer left the repairer entry marked dead
// after any failed repair, ErrRepairBusy included; Check then reported a
// dead participant with a free_entry action, and the next repair reported
// the (live) process that had merely found the lock busy as "the repairer
// entry's previous holder, proven dead".
func TestBusyRepairWithoutAnEntryChangesNothing(t *testing.T) {
	m := hmCrashMap(t, 4)
	hmPreload(t, m)
	m.tab.RepairLock().Store(m.tab.MyLock()) // m, alive, is repairing
	v, err := OpenForRepair(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ri := v.tab.RepairerIndex()
	gen := layout.UnpackPeer(v.tab.Entry(ri).Ctl.Load()).Gen
	if _, err := v.Repair(); !errors.Is(err, transport.ErrRepairBusy) {
		t.Fatalf("Repair while another live process repairs: %v", err)
	}
	if c := layout.UnpackPeer(v.tab.Entry(ri).Ctl.Load()); c.State != layout.PeerFree || c.Gen != gen+1 {
		t.Fatalf("the repairer entry after a busy repair: %+v", c)
	}
	if rep := v.Check(); !rep.Clean() {
		t.Fatalf("Check after a busy repair: %+v", rep.Findings)
	}
	m.tab.RepairLock().Store(0)
	if rep, err := v.Repair(); err != nil || rep.Changed() || len(rep.DeadPeers) != 0 {
		t.Fatalf("the next repair: %+v %v", rep, err)
	}
}
