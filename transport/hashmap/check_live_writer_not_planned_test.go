package hashmap

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// Invariant: a live writer's locks are never a problem: Check does not
// report them, PlanRepair does not plan for them, and Repair leaves them.

// TestHashMapCheckLiveLocksLeftAlone: words stamped with this process's
// own (live) entry, as a writer stopped mid-operation leaves them.
func TestHashMapCheckLiveLocksLeftAlone(t *testing.T) {
	m := hmCrashMap(t, 4)
	hmPreload(t, m)
	ins := hmEmptyBucket(t, m)
	var full uint64
	for i := uint64(0); i < m.lay.Capacity; i++ {
		if layout.UnpackHashMapWord(m.ctl(i).Load()).State == layout.BucketFull {
			full = i
			break
		}
	}
	w := layout.UnpackHashMapWord(m.ctl(full).Load())
	w.Owner = m.tab.Self
	m.ctl(full).Store(w.Pack())
	m.ctl(ins).Store(layout.HashMapWord{State: layout.BucketInserting, Owner: m.tab.Self, Version: 1}.Pack())
	m.home(full).Store(m.homeValue())
	m.home(ins).Store(m.homeValue())
	words := func() [4]uint64 {
		return [4]uint64{m.ctl(full).Load(), m.ctl(ins).Load(), m.home(full).Load(), m.home(ins).Load()}
	}
	before := words()
	ro, err := OpenReadOnly(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, h := range []*Map{m, ro} {
		if rep := h.Check(); !rep.Clean() {
			t.Fatalf("Check reports a live writer's locks: %+v", rep.Findings)
		}
		if plan := h.PlanRepair(); len(plan) != 0 {
			t.Fatalf("PlanRepair plans for a live writer's locks: %+v", plan)
		}
	}
	rep, err := m.Repair()
	if err != nil || rep.Changed() || len(rep.Done) != 0 || words() != before {
		t.Fatalf("Repair touched a live writer's locks: %+v %v (words %#x, were %#x)", rep, err, words(), before)
	}
}

// TestHashMapCheckLiveWritersNeverPlanned: while a writer process and a
// writer goroutine put and delete, every Check of the (undamaged) map is
// clean and every PlanRepair empty.
func TestHashMapCheckLiveWritersNeverPlanned(t *testing.T) {
	const keys = 16
	ops := 20000
	if proctest.RaceEnabled {
		ops = 3000
	}
	m := newHashMap(t, Config{Capacity: 64, KeySize: 16, ValueSize: 64, Participants: 8})
	env := []string{proctest.PathArg(m.Path()), "KEYS=" + strconv.Itoa(keys), "OPS=" + strconv.Itoa(ops), "WRITER=1"}
	child := hmHelper.Start(t, "stress-writer", env...)
	if _, err := m.Put([]byte("go"), nil); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a second writer, in this process, on its own handle
		defer wg.Done()
		o := openHashMap(t, m.Path())
		defer o.Close()
		for i := 0; !stop.Load(); i++ {
			k := hmKey(uint32(i % keys))
			if i%4 == 0 {
				if err := o.Delete(k); err != nil && err != transport.ErrNotFound {
					t.Error(err)
					return
				}
			} else if _, err := o.Put(k, hmValue(uint32(i%keys), 2, uint32(i), 64)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	checks := 0
	for done := false; !done; checks++ {
		select {
		case <-child.Done():
			done = true
		default:
		}
		if rep := m.Check(); !rep.Clean() {
			stop.Store(true)
			t.Fatalf("Check %d with only live writers: %+v", checks, rep.Findings)
		}
		if plan := m.PlanRepair(); len(plan) != 0 {
			stop.Store(true)
			t.Fatalf("PlanRepair %d with only live writers: %+v", checks, plan)
		}
	}
	stop.Store(true)
	wg.Wait()
	child.MustSucceed(t)
	t.Logf("%d checks while the writers ran", checks)
}
