package hashmap

// A home lock word is held only by a live, active participant at the
// word's generation: a word naming a free or a claiming entry names nobody
// (Repair releases it, a writer takes it over), and while live writers
// keep taking the lock in turn no waiter gives up. Each test below pins a
// fix; its comment says what the bug was and which commit added the test.

import (
	"errors"
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

// TestHomeLockWaitersNeverTimeOutWhileTheLockChangesHands: many live
// writers of one key, none stopped, each Put taking microseconds: no Put
// fails with transport.ErrDeadlineOrClose.
//
// Was a bug (review bug 2, home lock starvation): lockHome measured its 1 s
// limit from the start of the wait, not per holder, and goroutines of one
// handle stored one lock value, so a waiter that kept losing the race gave
// transport.ErrDeadlineOrClose although the lock changed hands all the
// time. Now the limit counts from the last time the word was seen free or
// changed, and every acquisition stores a new word (an acquisition count in
// bits 40-63).
//
// Added in commit 4ca21a8 (the hash map's review fixes) as
// TestHashMapRegressionHomeLockStarvation.
func TestHomeLockWaitersNeverTimeOutWhileTheLockChangesHands(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 16, KeySize: 16, ValueSize: 65536, Participants: 8})
	const workers = 64
	dur := 4 * time.Second
	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		fails atomic.Int64
		ops   atomic.Int64
		first atomic.Value
	)
	val := make([]byte, 65536)
	deadline := time.Now().Add(dur)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && time.Now().Before(deadline) {
				_, err := m.Put([]byte("hot"), val)
				if err != nil {
					if errors.Is(err, transport.ErrDeadlineOrClose) {
						fails.Add(1)
						first.CompareAndSwap(nil, err.Error())
						continue
					}
					t.Error(err)
					stop.Store(true)
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d Puts failed with transport.ErrDeadlineOrClose while %d Puts succeeded (no writer was stopped): %v", n, ops.Load(), first.Load())
	}
	t.Logf("%d puts", ops.Load())
}

// TestHomeLockNamingAFreeEntryHasNoHolder: a home lock word naming a free
// table entry (at the entry's current generation) names no possible
// holder: Repair releases it and a Put takes the key's home lock.
//
// Was a bug (review bug 3): peers.Table.HolderAlive treated a free entry as
// alive (status never judges free entries dead), so writers waited
// homeWaitMax and failed, Repair left the word, and Scan reported it held
// by a live participant. Now only an active entry at the word's
// generation, not proven dead, holds a lock.
//
// Added in commit 4ca21a8 (the hash map's review fixes) as
// TestHashMapRegressionHomeLockNamingFreeEntry.
func TestHomeLockNamingAFreeEntryHasNoHolder(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8, Participants: 8})
	m.homeWaitMax = 30 * time.Millisecond
	key := []byte("k")
	hl := m.home(layout.HashMapHash(key) & m.mask)
	junk := peers.LockValue(5, 0) // entry 4: free, generation 0
	if c := layout.UnpackPeer(m.tab.Entry(4).Ctl.Load()); c.State != layout.PeerFree || c.Gen != 0 {
		t.Fatalf("entry 4: %+v", c)
	}
	hl.Store(junk)
	rr, err := m.Repair()
	if err != nil {
		t.Fatal(err)
	}
	s := m.Scan()
	_, perr := m.Put(key, []byte("v"))
	if perr != nil || hl.Load() != 0 {
		t.Fatalf("home lock %#x naming a free entry: Repair %+v left it (word now %#x), Scan says %+v, Put: %v", junk, rr, hl.Load(), s.HomeLocks, perr)
	}
}

// TestHomeLockNamingAClaimingEntryHasNoHolder: a home lock word naming an
// entry that is still being claimed names no possible holder, as
// docs/format.md and docs/design.md say: Repair releases it and a Put
// takes the key's home lock.
//
// Was a mismatch: peers.Table.HolderAlive (which a deque's repair lock
// needs that way) treated an entry claiming at the word's generation as a
// live holder, so Repair left the word and writers waited homeWaitMax and
// failed with transport.ErrDeadlineOrClose. Home locks now require an
// active entry. Found by the stress test
// TestWithLiveHandlesOnlyScanFindsNothingAndRepairChangesNothing.
//
// Added in commit bd36326 (a home lock naming a claiming entry names
// nobody) as TestHashMapRegression2HomeLockNamingClaimingEntry.
func TestHomeLockNamingAClaimingEntryHasNoHolder(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8, Participants: 8})
	m.homeWaitMax = 30 * time.Millisecond
	self := shm.Self()
	// A live process stopped in the middle of its attach (tryAttach:
	// entry lock taken, then free gen 0 -> claiming gen 0).
	holdEntryLock(t, m.Path(), 4)
	e := m.tab.Entry(4)
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: 0, PID: uint32(self.PID)}.Pack()
	e.Ctl.Store(claiming)
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
	if got := e.Ctl.Load(); got != claiming || len(rr.DeadPeers) != 0 {
		t.Fatalf("Repair touched the live claimer's entry: word %#x (was %#x), dead peers %+v", got, claiming, rr.DeadPeers)
	}
}
