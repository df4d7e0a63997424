package transport

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Issue 15, item 1: a repair without an entry of its own (a repair tool,
// or an attach that found the table full of dead entries) holds the
// table's repairer entry while it works, locked like any other, so its own
// death is proven like anyone's: the next repair, entry-less or attached,
// takes the repairer entry over and finishes what it left (leases it parked
// there included). While a live process holds it, a repair returns
// ErrRepairBusy and changes nothing, and an attach waits for it.

// repairerFixture is a ring or deque with three participant entries: this
// process (the producer or the owner, alive, never repairing) and two
// consumers that died holding leases, so the table is full of dead ones.
type repairerFixture struct {
	kind     string // "ring" or "deque"
	path     string
	promised []uint64
	leased   map[uint64]bool
	live     interface { // this process's attached handle
		Repair() (check.RepairReport, error)
		Peers() []check.Peer
	}
}

func newRepairerFixture(t *testing.T, kind string, full bool) *repairerFixture {
	t.Helper()
	f := &repairerFixture{kind: kind, leased: map[uint64]bool{}}
	n := uint64(5)
	if full {
		n = 8
	}
	f.promised = seq(1, n)
	switch kind {
	case "ring":
		r := newRing(t, RingConfig{Capacity: 8, Participants: 3})
		for _, id := range f.promised {
			if err := r.TryPush(encodeMsg(id)); err != nil {
				t.Fatal(err)
			}
		}
		f.path, f.live = r.Path(), r
	case "deque":
		d := newDeque(t, DequeConfig{Capacity: 8, Participants: 3})
		for _, id := range f.promised {
			if err := d.TryPush(encodeMsg(id)); err != nil {
				t.Fatal(err)
			}
		}
		f.path, f.live = d.Path(), d
	}
	for range 2 {
		c := runTableChildToCrash(t, f.path, kind+"-lease", leaseHeldPoint, 1)
		f.leased[only(t, c.Log(), "got")] = true
	}
	if r, ok := f.live.(*Ring); ok && full && r.TryPush(encodeMsg(99)) != ErrFull {
		t.Fatal("the ring is not full")
	}
	return f
}

// drain attaches a consumer (its attach recovers whatever is still dead),
// drains everything, and checks that every promised message came.
func (f *repairerFixture) drain(t *testing.T) {
	t.Helper()
	var got []uint64
	var after check.Report
	var ps []check.Peer
	switch f.kind {
	case "ring":
		c, err := OpenRing(f.path)
		if err != nil {
			t.Fatalf("attach after the repairer's death: %v", err)
		}
		defer c.Close()
		got, after, ps = drainRingEventually(t, c), c.Check(), c.Peers()
	case "deque":
		c, err := OpenDeque(f.path)
		if err != nil {
			t.Fatalf("attach after the repairer's death: %v", err)
		}
		defer c.Close()
		got, after, ps = drainDequeEventually(t, c), c.Check(), c.Peers()
	}
	checkDelivery(t, f.promised, got, f.leased)
	if !after.Clean() {
		t.Errorf("check after the drain: %+v", after.Findings)
	}
	requireOnlyLiveEntries(t, ps, 2)
}

func (f *repairerFixture) openForRepair(t *testing.T) interface {
	Repair() (check.RepairReport, error)
	Check() check.Report
} {
	t.Helper()
	var h interface {
		Repair() (check.RepairReport, error)
		Check() check.Report
		Close() error
	}
	var err error
	if f.kind == "ring" {
		h, err = OpenRingForRepair(f.path)
	} else {
		h, err = OpenDequeForRepair(f.path)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestDeadRepairerEntryIsTakenOver kills a repairer at each of the
// repairer entry's crash points: a repair tool (entry-less Repair) and an
// attach that had to recover the full table, on a ring (with room, and
// full, where the attach parks the leases on the repairer entry before it
// dies) and on a deque. The next repair, entry-less or attached, proves
// the repairer entry's holder dead, finishes its work and frees it;
// nothing is lost.
func TestDeadRepairerEntryIsTakenOver(t *testing.T) {
	type setup struct {
		kind string
		full bool
	}
	for _, s := range []setup{{"ring", false}, {"ring", true}, {"deque", false}} {
		for _, dier := range []string{"repair", "attach"} {
			for _, point := range []string{peers.CrashPeersRepairerAfterClaim, peers.CrashPeersRepairerBeforeRelease} {
				for _, next := range []string{"entry-less", "attached"} {
					name := s.kind
					if s.full {
						name += "-full"
					}
					t.Run(name+"/"+dier+"/"+point+"/"+next, func(t *testing.T) {
						f := newRepairerFixture(t, s.kind, s.full)
						c := runTableChildToCrash(t, f.path, s.kind+"-"+dier, point, 1)
						ps := f.live.Peers()
						rp := ps[len(ps)-1]
						if !rp.Repairer || rp.State != "active" || !rp.Dead || int(rp.ID.PID) != c.PID() {
							t.Fatalf("the dead repairer's entry: %+v, want active, recorded as pid %d, proven dead", rp, c.PID())
						}
						if r, ok := f.live.(*Ring); ok {
							// A full ring's attach parks the leases it cannot
							// requeue on the repairer entry before it frees
							// the dead entries: a death after that leaves them
							// stamped with the dead repairer.
							wantParked := s.full && dier == "attach" && point == peers.CrashPeersRepairerBeforeRelease
							if got := parkedOnRepairer(r); (got == 2) != wantParked || (got != 0) != wantParked {
								t.Fatalf("%d leases parked on the repairer entry, want %d", got, map[bool]int{true: 2}[wantParked])
							}
						}
						var rep check.RepairReport
						var err error
						if next == "entry-less" {
							rep, err = f.openForRepair(t).Repair()
						} else {
							rep, err = f.live.Repair()
						}
						if err != nil {
							t.Fatalf("%s repair after the repairer died: %v", next, err)
						}
						blamed := false
						for _, p := range rep.DeadPeers {
							if p.Repairer {
								blamed = true
								if int(p.ID.PID) != c.PID() {
									t.Errorf("the repairer entry's dead holder reported as pid %d, want %d", p.ID.PID, c.PID())
								}
							}
						}
						if !blamed {
							t.Errorf("the repair did not prove the repairer entry's holder dead: %+v", rep.DeadPeers)
						}
						requireNoFindingBlames(t, rep, os.Getpid())
						if ps := f.live.Peers(); !s.full && ps[len(ps)-1].State != "free" {
							t.Errorf("the repairer entry is %s after the repair that took it over", ps[len(ps)-1].State)
						}
						f.drain(t)
					})
				}
			}
		}
	}
}

// TestRepairWhileALiveProcessHoldsTheRepairerEntry: a live process holds
// the repairer entry and the repair lock (as a repair at work does). A
// repair, entry-less or attached, returns ErrRepairBusy and changes no
// byte of the file; an attach that needs the dead entries recovered waits
// for the repairer and then gets one.
func TestRepairWhileALiveProcessHoldsTheRepairerEntry(t *testing.T) {
	for _, kind := range []string{"ring", "deque"} {
		t.Run(kind, func(t *testing.T) {
			f := newRepairerFixture(t, kind, false)
			stop := filepath.Join(t.TempDir(), "stop")
			holder := startTableChild(t, f.path, kind+"-hold-repairer", "STOP="+stop)
			holder.WaitLine(t, "holding")
			img := func() []byte {
				b, err := os.ReadFile(f.path)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			before := img()
			for _, next := range []string{"entry-less", "attached"} {
				var err error
				var rep check.RepairReport
				if next == "entry-less" {
					rep, err = f.openForRepair(t).Repair()
				} else {
					rep, err = f.live.Repair()
				}
				if !errors.Is(err, ErrRepairBusy) {
					t.Fatalf("%s repair while a live process holds the repairer entry: %v, want ErrRepairBusy (report %+v)", next, err, rep)
				}
				if rep.Changed() {
					t.Fatalf("%s busy repair reports changes: %+v", next, rep)
				}
			}
			if after := img(); !bytes.Equal(before, after) {
				t.Fatal("a repair that found the repairer entry busy changed the file")
			}
			ps := f.live.Peers()
			if rp := ps[len(ps)-1]; rp.State != "active" || rp.Dead || int(rp.ID.PID) != holder.PID() {
				t.Fatalf("the live repairer's entry: %+v", rp)
			}
			// An attach waits for the live repairer, then recovers the
			// dead entries itself.
			attached := make(chan error, 1)
			go func() {
				var err error
				if kind == "ring" {
					var r *Ring
					if r, err = OpenRing(f.path); err == nil {
						r.Close()
					}
				} else {
					var d *Deque
					if d, err = OpenDeque(f.path); err == nil {
						d.Close()
					}
				}
				attached <- err
			}()
			if err := os.WriteFile(stop, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			holder.MustSucceed(t)
			if err := <-attached; err != nil {
				t.Fatalf("attach while a live repairer worked, then after it: %v", err)
			}
			f.drain(t)
		})
	}
}

// parkedOnRepairer counts the ring's slots stamped with the repairer
// entry.
func parkedOnRepairer(r *Ring) int {
	stamp := uint16(r.tab.RepairerIndex() + 1)
	n := 0
	for i := uint64(0); i < r.Capacity(); i++ {
		if layout.UnpackSlot(r.slotWord(i).Load()).Owner == stamp {
			n++
		}
	}
	return n
}

// TestParkedLeasesBlameNoLiveProcess: leases an attach parked on the
// repairer entry (the ring full, their holders dead) are blamed on nobody
// alive: not on the attacher, which lives on attached elsewhere, by Check
// or by a later repair, entry-less or attached; and a repair that takes
// the repairer entry over from a dead holder does not blame itself for
// what that holder left.
//
// Was a bug: the repairer entry, left marked dead for the parked leases,
// kept the attacher's pid and start time, so Check reported each parked
// lease as "owned by the repairer entry, pid <the attacher>, proven dead
// (... still runs (exiting?))" and an entry-less repair that inherited the
// entry reported them as its own ("proven dead (this handle)"): the issue's
// "the repair plan then blames the lease on the wrong process" again.
func TestParkedLeasesBlameNoLiveProcess(t *testing.T) {
	for _, next := range []string{"entry-less", "attached"} {
		t.Run(next, func(t *testing.T) {
			f := newRepairerFixture(t, "ring", true)
			o, err := OpenRing(f.path) // parks the two dead consumers' leases
			if err != nil {
				t.Fatal(err)
			}
			if n := parkedOnRepairer(o); n != 2 {
				t.Fatalf("%d leases parked on the repairer entry, want 2", n)
			}
			me := os.Getpid()
			tool := f.openForRepair(t)
			for _, x := range tool.Check().Findings {
				if int(x.OwnerID.PID) == me {
					t.Errorf("check blames this live process (the attacher that parked the lease): %s", x.Detail)
				}
			}
			var rep check.RepairReport
			if next == "entry-less" {
				rep, err = tool.Repair()
			} else {
				rep, err = f.live.Repair()
			}
			if err != nil {
				t.Fatal(err)
			}
			requireNoFindingBlames(t, rep, me)
			o.Close()
			f.drain(t)
		})
	}
}

// requireNoFindingBlames fails if the repair report names pid as the
// holder of anything it acted on, or as a dead peer.
func requireNoFindingBlames(t *testing.T, rep check.RepairReport, pid int) {
	t.Helper()
	for _, p := range rep.DeadPeers {
		if int(p.ID.PID) == pid {
			t.Errorf("repair reports live pid %d as a dead peer: %+v", pid, p)
		}
	}
	for _, x := range rep.Done {
		if int(x.OwnerID.PID) == pid {
			t.Errorf("repair blames live pid %d: %s %s: %s", pid, x.Problem, x.Action, x.Detail)
		}
	}
}

// TestBusyRepairKeepsWhatTheRepairerEntryHolds: an entry-less repair that
// takes over the repairer entry holding leases an attach parked there, and
// then finds the repair lock held by a live attached repairer, gives up
// (ErrRepairBusy) but leaves the entry marked dead, so the parked leases
// are still recovered later.
//
// Was a bug (in the change that frees the repairer entry after a busy
// repair, since such a repair stamps nothing): the entry was freed even
// when taken over from a holder that had parked leases in it; their slots
// then named a free entry, which no repair treats as dead, and the
// messages were never delivered again.
func TestBusyRepairKeepsWhatTheRepairerEntryHolds(t *testing.T) {
	f := newRepairerFixture(t, "ring", true)
	o, err := OpenRing(f.path) // parks the two dead consumers' leases
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	r := f.live.(*Ring)
	if n := parkedOnRepairer(r); n != 2 {
		t.Fatalf("%d leases parked on the repairer entry, want 2", n)
	}
	stop := filepath.Join(t.TempDir(), "stop")
	holder := startTableChild(t, f.path, "ring-hold-lock", "STOP="+stop)
	holder.WaitLine(t, "holding")
	if _, err := f.openForRepair(t).Repair(); !errors.Is(err, ErrRepairBusy) {
		t.Fatalf("entry-less repair while a live attached repairer holds the lock: %v, want ErrRepairBusy", err)
	}
	ps := r.Peers()
	if rp := ps[len(ps)-1]; rp.State != "dead" || parkedOnRepairer(r) != 2 {
		t.Fatalf("after the busy repair the repairer entry is %s (%s) with %d parked leases: want it still dead, holding both", rp.State, rp.Reason, parkedOnRepairer(r))
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder.MustSucceed(t)
	f.drain(t)
}
