package transport

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/layout"
)

func deadEntry(r *Ring, i uint64) {
	e := r.tab.Entry(i)
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerActive, Gen: 3, PID: uint32(30000 + i)}.Pack())
	e.Start.Store(12345)
	e.Boot.Store(0xdeadbeef) // another boot
	e.Attached.Store(1)
}

// randomRing fills a fresh ring with a random but mostly plausible state:
// participants 1-3 dead (another boot) or free, every position from head
// on a random word of its lap (or, past the tail, a lease or poison of the
// lap before, or burned), some words corrupt with probability corruptP,
// and with lag a tail or head behind where the words put them.
func randomRing(t *testing.T, rng *rand.Rand, corruptP float64, lag bool) *Ring {
	capacity := uint64(1) << (1 + rng.Intn(3)) // 2..8
	r := newRing(t, RingConfig{Capacity: capacity, Participants: 4, DeliveryLimit: 5})
	for i := uint64(1); i < 4; i++ {
		if rng.Intn(4) != 0 {
			deadEntry(r, i)
		}
	}
	g := &r.lay.SlotGeometry
	head := uint64(rng.Intn(3))*capacity + uint64(rng.Intn(int(capacity)))
	tail := head + uint64(rng.Intn(int(capacity)+1))
	owner := func() uint16 { return uint16(1 + rng.Intn(4)) }
	for pos := head; pos < head+capacity; pos++ {
		i := pos & (capacity - 1)
		lap := g.LapOf(pos)
		var w layout.SlotWord
		if pos < tail {
			switch rng.Intn(6) {
			case 0:
				w = layout.SlotWord{State: layout.SlotReady, Deliveries: uint8(rng.Intn(3)), Length: 16, Lap: lap}
			case 1:
				w = layout.SlotWord{State: layout.SlotWriting, Owner: owner(), Lap: lap}
			case 2:
				w = layout.SlotWord{State: layout.SlotReading, Owner: owner(), Deliveries: 1 + uint8(rng.Intn(3)), Length: 16, Lap: lap}
			case 3, 4:
				w = layout.SlotWord{State: layout.SlotLeased, Owner: owner(), Deliveries: 1 + uint8(rng.Intn(3)), Length: 16, Lap: lap}
			case 5:
				w = layout.SlotWord{State: layout.SlotPoisoned, Deliveries: 5, Length: 16, Lap: lap}
			}
		} else {
			// free for this lap, or a lease/poison of an earlier lap, or a
			// burned lease (already at this lap)
			switch rng.Intn(5) {
			case 0, 1:
				w = layout.SlotWord{Lap: (lap - 1) & layout.SlotLapMask}
				if pos < capacity {
					w.Lap = lap // fresh
				}
				w = layout.SlotWord{Lap: lap}
			case 2:
				w = layout.SlotWord{State: layout.SlotLeased, Owner: owner(), Deliveries: 1, Length: 16, Lap: (lap - 1) & layout.SlotLapMask}
			case 3:
				w = layout.SlotWord{State: layout.SlotLeased, Owner: owner(), Deliveries: 1, Length: 16, Lap: lap}
			case 4:
				w = layout.SlotWord{State: layout.SlotPoisoned, Deliveries: 5, Length: 16, Lap: (lap - 1) & layout.SlotLapMask}
			}
		}
		raw := w.Pack()
		if rng.Float64() < corruptP {
			switch rng.Intn(3) {
			case 0:
				raw = layout.SlotWord{Length: 5, Lap: lap}.Pack() // free with a length
			case 1:
				raw = rng.Uint64()
			case 2:
				raw = layout.SlotWord{State: layout.SlotLeased, Owner: owner(), Deliveries: 1, Length: 16, Lap: (lap + 2) & layout.SlotLapMask}.Pack()
			}
		}
		r.slotWord(i).Store(raw)
	}
	if lag {
		lag := uint64(rng.Intn(3))
		if tail-lag >= head {
			tail -= lag
		}
		if rng.Intn(3) == 0 && head > 0 {
			head-- // a consumer moved past but head lags
		}
	}
	r.head.Store(head)
	r.tail.Store(tail)
	return r
}

// TestRingPlanMatchesRepairOnRandomStates compares PlanRepair with the
// Repair that follows, twice, over random ring states: dead and live
// owners, writes, reads, leases and poison at every position, lagging
// heads, burned positions, full rings, and (in the second half) corrupt
// words, where a repair may stop with an error: the plan must then say
// exactly what that repair did before it stopped. Deterministic seeds.
// From an adversarial review, which found with it the plan's disagreement
// at a corrupt word where Repair pushes.
func TestRingPlanMatchesRepairOnRandomStates(t *testing.T) {
	const n = 1500
	for seed := 0; seed < 2*n; seed++ {
		corruptP := 0.0
		if seed >= n {
			corruptP = 0.15
		}
		rng := rand.New(rand.NewSource(int64(seed)))
		r := randomRing(t, rng, corruptP, seed%2 == 1)
		for round := 1; round <= 2; round++ {
			rep := r.Check()
			plan := rep.Plan()
			for _, f := range rep.Findings {
				if f.Action == "" || f.Problem == "" {
					t.Fatalf("seed %d round %d: a finding with no action or problem: %+v", seed, round, f)
				}
			}
			done, err := r.Repair()
			if d := cmp.Diff(cut(plan, false), cut(done.Done, false)); d != "" {
				logFindings(t, "check", rep.Findings)
				logFindings(t, "done", done.Done)
				t.Fatalf("seed %d round %d: repair err %v; plan vs done (-plan +done):\n%s", seed, round, err, d)
			}
			if err != nil && corruptP == 0 {
				t.Fatalf("seed %d round %d: repair of a ring without corrupt words: %v", seed, round, err)
			}
		}
		r.Close()
	}
}
