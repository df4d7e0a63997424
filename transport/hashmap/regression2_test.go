package hashmap

// Tests from a second review of the hash map, after the first review's
// fixes: a stress test of its invariants with live handles only, and a
// regression test of the one mismatch it found.

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// TestHashMapRegression2Stress: live handles only (no process dies), entries
// churned by Close/reopen, a full map (transport.ErrFull paths), concurrent Scan and
// Repair. Invariants: Put's inserted and Delete's transport.ErrNotFound match a
// per-key model (each key has one writer), Scan reports no problem, Repair
// changes nothing, no key is held twice.
func TestHashMapRegression2Stress(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 16, KeySize: 8, ValueSize: 16, Participants: 8})
	const workers, keysPer = 5, 4
	dur := time.Second
	var stop atomic.Bool
	var wg sync.WaitGroup
	var fail atomic.Value
	report := func(s string) {
		fail.CompareAndSwap(nil, s)
		stop.Store(true)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			model := map[string][]byte{}
			h, err := Open(m.Path())
			if err != nil {
				report(err.Error())
				return
			}
			defer func() { h.Close() }()
			for op := 0; !stop.Load(); op++ {
				if op%200 == 199 {
					h.Close()
					if h, err = Open(m.Path()); err != nil {
						report(err.Error())
						return
					}
				}
				k := fmt.Sprintf("w%dk%d", w, rng.Intn(keysPer))
				if rng.Intn(3) == 0 {
					err := h.Delete([]byte(k))
					_, had := model[k]
					switch {
					case err == nil && had:
						delete(model, k)
					case errors.Is(err, transport.ErrNotFound) && !had:
					default:
						report(fmt.Sprintf("Delete(%s): %v, model had %v", k, err, had))
						return
					}
					continue
				}
				v := []byte(fmt.Sprintf("%s-%d", k, op))
				ins, err := h.Put([]byte(k), v)
				_, had := model[k]
				switch {
				case errors.Is(err, transport.ErrFull) && !had:
				case err == nil && ins == !had:
					model[k] = v
				default:
					report(fmt.Sprintf("Put(%s): inserted %v, %v, model had %v", k, ins, err, had))
					return
				}
				buf := make([]byte, 16)
				n, gerr := h.Get([]byte(k), buf)
				if want, ok := model[k]; (ok && (gerr != nil || string(buf[:n]) != string(want))) || (!ok && !errors.Is(gerr, transport.ErrNotFound)) {
					report(fmt.Sprintf("Get(%s) = %q, %v, want %q", k, buf[:n], gerr, model[k]))
					return
				}
			}
		}(w)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if s := m.Scan(); s.Problems > 0 {
				report(fmt.Sprintf("Scan problems with only live writers: %+v %+v", s.Buckets, s.HomeLocks))
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			rr, err := m.Repair()
			if err == nil && rr.Changed() {
				report(fmt.Sprintf("Repair changed something with only live writers: %+v", rr))
				return
			}
		}
	}()
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	if f := fail.Load(); f != nil {
		t.Fatal(f)
	}
	seen := map[string]int{}
	m.Range(func(k, v []byte) bool { seen[string(k)]++; return true })
	for k, n := range seen {
		if n > 1 {
			t.Fatalf("key %s held %d times", k, n)
		}
	}
	if c := m.Counters(); int(c.Live) != m.Len() {
		t.Fatalf("live %d, Len %d", c.Live, m.Len())
	}
}

// TestHashMapRegression2HomeLockNamingClaimingEntry: was a mismatch:
// docs/format.md and docs/design.md say a home lock word naming a claiming
// entry names no possible holder and may be replaced (Repair releases it,
// a writer takes it over), but peers.Table.HolderAlive (which a deque's
// repair lock needs that way) treats an entry claiming at the word's
// generation as a live holder, so Repair left the word and writers waited
// homeWaitMax and failed with transport.ErrDeadlineOrClose. Home locks now require
// an active entry.
func TestHashMapRegression2HomeLockNamingClaimingEntry(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8, Participants: 8})
	m.homeWaitMax = 30 * time.Millisecond
	self := shm.Self()
	e := m.tab.Entry(4) // a process stopped in the middle of its attach (tryAttach: free gen 0 -> claiming gen 0)
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerClaiming, Gen: 0, PID: uint32(self.PID)}.Pack())
	key := []byte("k")
	hl := m.home(layout.HashMapHash(key) & m.mask)
	junk := peers.LockValue(5, 0) | 7<<layout.HashMapHomeSeqShift
	hl.Store(junk)
	rr, err := m.Repair()
	if err != nil {
		t.Fatal(err)
	}
	_, perr := m.Put(key, []byte("v"))
	if perr != nil || rr.Count(check.ActionReleaseHome) != 1 {
		t.Fatalf("home lock %#x naming a claiming entry (documented: no possible holder): Repair released %d, Put: %v", junk, rr.Count(check.ActionReleaseHome), perr)
	}
}
