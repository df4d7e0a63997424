package hashmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// hmRegDeadPID returns the pid of a process that has exited and been
// reaped.
func hmRegDeadPID(t *testing.T) uint32 {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return uint32(c.Process.Pid)
}

// hmRegKeyHomed returns a key of at most 8 bytes whose home bucket is home.
func hmRegKeyHomed(m *Map, home uint64, prefix string) []byte {
	for i := 0; ; i++ {
		k := []byte(fmt.Sprintf("%s%d", prefix, i))
		if layout.HashMapHash(k)&m.mask == home {
			return k
		}
	}
}

// TestHashMapRegressionHomeLockStarvation pins the home lock wait limit
// (review bug 2): many live writers of one key, none stopped, each Put
// taking microseconds. lockHome measured its 1 s limit from the start of
// the wait, not per holder, and goroutines of one handle stored one lock
// value, so a waiter that kept losing the race gave transport.ErrDeadlineOrClose
// although the lock changed hands all the time. Now the limit counts from
// the last time the word was seen free or changed, and every acquisition
// stores a new word (an acquisition count in bits 40-63).
func TestHashMapRegressionHomeLockStarvation(t *testing.T) {
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

// TestHashMapRegressionStaleDeathVerdict pins review bug 1: rollBackDeadInserts
// judged each owner stamp once and cached the verdict for the whole scan. A stamp names a
// table entry, not a process: while the scan runs, a process attaching
// into the dead participant's entry (takeOverDead) reclaims what the dead
// one left and starts inserting with the same stamp. The scan then rolls
// back the live newcomer's INSERTING bucket on the stale "dead" verdict.
// The newcomer goes on and publishes with a plain Store over whatever the
// bucket became: here the scanning writer re-used the bucket for its own
// key, whose Put (reported inserted) is then silently lost, and the
// bucket's version goes backwards. Now each bucket is judged after its word
// is loaded (a verdict is reused only for the same entry control word), and
// publishes are CASes from the word the writer stored.
func TestHashMapRegressionStaleDeathVerdict(t *testing.T) {
	const capacity, last = 2048, 2047
	m := newHashMap(t, Config{Capacity: capacity, KeySize: 8, ValueSize: 8, Participants: layout.HashMapMaxParticipants})
	self := shm.Self()
	dead := hmRegDeadPID(t)
	// Entry 0: m. Entry 1 (stamp 2): a dead process D. Entries 2..: live
	// (this process), so that the table is full and judging them is slow.
	for i := uint64(1); i < m.lay.Participants; i++ {
		e := m.tab.Entry(i)
		pid, start := uint32(self.PID), self.Start
		if i == 1 {
			pid, start = dead, 12345
		}
		e.Start.Store(start)
		e.Boot.Store(m.tab.Boot())
		e.Ctl.Store(layout.PeerCtl{State: layout.PeerActive, PID: pid}.Pack())
	}
	// Every bucket used: bucket 0 and the last are D's unfinished inserts,
	// buckets 1..1021 live participants' inserts in progress (stamps
	// 3..1023, each judged once), the rest full with 8-byte keys.
	for i := uint64(0); i < capacity; i++ {
		w := layout.HashMapWord{State: layout.BucketFull, Version: 2}
		switch {
		case i == 0 || i == last:
			w = layout.HashMapWord{State: layout.BucketInserting, Owner: 2, Version: 1}
		case i < m.lay.Participants-1:
			w = layout.HashMapWord{State: layout.BucketInserting, Owner: uint16(i + 2), Version: 1}
		}
		m.keyLen(i).Store(8)
		binary.LittleEndian.PutUint64(m.keyBytes(i, 8), 1<<60|i)
		m.ctl(i).Store(w.Pack())
	}
	wkey := hmRegKeyHomed(m, last, "w") // the writer's key: homed at the last bucket
	var wDone atomic.Bool
	var wIns bool
	var wErr error
	go func() {
		wIns, wErr = m.Put(wkey, []byte("W-value"))
		wDone.Store(true)
	}()
	// Wait for the writer's scan to judge D dead (it rolls bucket 0 back).
	for layout.UnpackHashMapWord(m.ctl(0).Load()).State == layout.BucketInserting {
		if wDone.Load() {
			t.Fatalf("Put ended first: %v %v", wIns, wErr)
		}
	}
	// Process C attaches: the table is full, D's entry is taken over, D's
	// leftovers reclaimed. Then C starts an insert into the last bucket
	// (the claim step of Map.insert, with C's stamp).
	c := openHashMap(t, m.Path())
	if c.Participant() != 1 {
		t.Fatalf("C got entry %d, want D's entry 1", c.Participant())
	}
	raw := c.ctl(last).Load()
	w := layout.UnpackHashMapWord(raw)
	if w.State != layout.BucketTombstone {
		t.Fatalf("last bucket %+v after C's reclaim", w)
	}
	claim := w.Next()
	claim.State, claim.Owner = layout.BucketInserting, c.tab.Self
	if !c.ctl(last).CompareAndSwap(raw, claim.Pack()) {
		t.Fatal("C's claim failed")
	}
	if wDone.Load() {
		t.Skip("timing: the writer finished before C claimed")
	}
	for !wDone.Load() {
		time.Sleep(time.Millisecond)
	}
	if wErr != nil || !wIns {
		t.Fatalf("writer's Put: inserted %v, %v", wIns, wErr)
	}
	now := c.ctl(last).Load()
	if now != claim.Pack() {
		// C is alive and still inside its insert: finish it exactly as
		// Map.insert does, then look at the writer's key.
		ckey := []byte("C")
		c.keyLen(last).Store(uint32(len(ckey)))
		copy(c.keyBytes(last, uint32(len(ckey))), ckey)
		next := w.Active ^ 1
		c.valueLen(last, next).Store(7)
		copy(c.valueBytes(last, next, 7), "C-value")
		pub := claim.Next()
		pub.State, pub.Owner, pub.Active = layout.BucketFull, 0, next
		c.ctl(last).Store(pub.Pack())
		buf := make([]byte, 8)
		_, gerr := m.Get(wkey, buf)
		t.Fatalf("a live participant's insert was rolled back by the writer's rollBackDeadInserts (word %+v, C's claim %+v, version went %d -> %d when C published); Get(%q) after its Put reported inserted: %v",
			layout.UnpackHashMapWord(now), claim, layout.UnpackHashMapWord(now).Version, pub.Version, wkey, gerr)
	}
}

// TestHashMapRegressionHomeLockNamingFreeEntry pins review bug 3: a home
// lock word naming a free table entry (at the entry's current generation)
// names no possible holder: nobody attached there holds anything.
// peers.Table.HolderAlive treated a free entry as alive (status never judges
// free entries dead), so writers waited homeWaitMax and failed, Repair
// left it, and Scan reported it held by a live participant. Now only an
// active entry at the word's generation, not proven dead, holds a lock.
func TestHashMapRegressionHomeLockNamingFreeEntry(t *testing.T) {
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

// TestHashMapRegressionScanFalseCorrupt pins review bug 4: Scan snapshots
// the participant table first and classified buckets against the snapshot
// only. A process attaching after the snapshot (into a free entry) and
// locking a bucket for an update was reported as a corrupt bucket ("owner
// entry is free"), so `ringctl verify` flagged a healthy, live map as
// corrupt. Now a problem is reported only after the word is re-read, its
// owner judged again from the table as it is then, and the word found
// unchanged.
func TestHashMapRegressionScanFalseCorrupt(t *testing.T) {
	const capacity = 4096
	m := newHashMap(t, Config{Capacity: capacity, KeySize: 8, ValueSize: 8, Participants: 8})
	key := hmRegKeyHomed(m, capacity-1, "k")
	if _, err := m.Put(key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	kb := layout.HashMapHash(key) & m.mask
	// Slow the scan down: every home lock but the key's is held by m (alive),
	// so Scan judges a holder at each bucket.
	for i := uint64(0); i < capacity; i++ {
		if i != kb {
			m.home(i).Store(m.tab.MyLock())
		}
	}
	done := make(chan ScanReport)
	go func() { done <- m.Scan() }()
	time.Sleep(2 * time.Millisecond)
	c := openHashMap(t, m.Path()) // a new writer
	raw := c.ctl(kb).Load()
	w := layout.UnpackHashMapWord(raw)
	w.Owner = c.tab.Self // c's update of key in progress: the lock step of Map.update
	if !c.ctl(kb).CompareAndSwap(raw, w.Pack()) {
		t.Fatal("lock failed")
	}
	s := <-done
	for _, b := range s.Buckets {
		if b.Index == kb && b.Problem == Corrupt {
			t.Fatalf("bucket %d locked by live participant %d (attached during the scan) reported corrupt: %s", kb, c.Participant(), b.Err)
		}
	}
}
