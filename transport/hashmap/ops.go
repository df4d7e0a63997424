package hashmap

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/internal/spin"
)

// The hash map's operations. The state machine and the argument that a
// reader never sees a torn value are in docs/design.md, section "The hash
// map".

const (
	// hmReadRetries bounds the re-reads of one bucket that kept changing
	// under a reader. Each re-read means a writer published meanwhile, so
	// only writers hammering one key for a long time come near it; memory
	// that does not change never makes a reader retry.
	hmReadRetries = 1 << 20
	// hmWriteRounds bounds a writer's restarts (a claim lost to another
	// writer, a bucket rolled back under it); each is someone's progress.
	hmWriteRounds = 1 << 16
	// Waiting for a home lock: spin with pauses, then yield, judging the
	// holder's liveness (which costs system calls) only every so often,
	// and sleep between tries once the wait is long.
	hmHomeSpins      = 64
	hmHomeJudgeEvery = 256
	hmHomeSleepAfter = 4096
	hmHomeSleep      = 20 * time.Microsecond
	// A bucket of our key locked by someone else while we hold the key's
	// home lock can only be a dead writer's (or corrupt): it is judged at
	// once, and again after pauses growing to this, for m.homeWaitMax.
	hmLockedPauseMax = time.Millisecond
)

// probe outcomes of one bucket.
const (
	hmNext  = iota // not the key: go on to the next bucket
	hmStop         // an empty bucket: the key is absent
	hmFound        // the key
)

// Get copies the value stored under key into buf and returns its length.
// An absent key gives transport.ErrNotFound (not wrapped: a miss is an ordinary
// outcome and allocates nothing). A buf shorter than the value gets the
// value's length and transport.ErrShortBuffer; a buf of ValueSize bytes always
// suffices. Get takes no lock and never writes to the file: it works on
// read-only maps, and it returns a value that was stored under key at
// some instant during the call, never a mixture of two.
func (m *Map) Get(key, buf []byte) (int, error) {
	if m.area == nil {
		return 0, transport.ErrNotAttached
	}
	if uint64(len(key)) > m.lay.KeySize {
		return 0, m.tooLarge("key", len(key), m.lay.KeySize)
	}
	home := layout.HashMapHash(key) & m.mask
	for p := uint64(0); p < m.lay.Capacity; p++ {
		n, what, err := m.getAt(home+p, key, buf)
		switch {
		case err != nil:
			return n, err
		case what == hmFound:
			return n, nil
		case what == hmStop:
			return 0, transport.ErrNotFound
		}
	}
	return 0, transport.ErrNotFound
}

// getAt reads bucket i for Get: the control word once, then the key and
// the active copy, then the control word again; a change in between
// (other than a lock taken or dropped, or one publish of the other copy)
// means a writer interfered, and the bucket is read again.
func (m *Map) getAt(i uint64, key, buf []byte) (int, int, error) {
	ctl := m.ctl(i)
	for attempt := 0; ; attempt++ {
		raw := ctl.Load()
		w := layout.UnpackHashMapWord(raw)
		if err := w.Validate(&m.lay); err != nil {
			return 0, hmStop, m.corruptBucket(i, raw, err)
		}
		switch w.State {
		case layout.BucketEmpty:
			return 0, hmStop, nil
		case layout.BucketFull:
		default: // tombstone, or an insert not yet published: absent here
			return 0, hmNext, nil
		}
		kl, vl := m.keyLen(i).Load(), m.valueLen(i, w.Active).Load()
		sane := uint64(kl) <= m.lay.KeySize && uint64(vl) <= m.lay.ValueSize
		match := sane && int(kl) == len(key) && bytes.Equal(m.keyBytes(i, kl), key)
		n := 0
		if match && int(vl) <= len(buf) {
			n = copy(buf, m.valueBytes(i, w.Active, vl))
		}
		hashMapFence()
		if !hmStable(raw, ctl.Load()) {
			if err := m.readBackoff(i, raw, attempt); err != nil {
				return 0, hmStop, err
			}
			continue
		}
		switch {
		case !sane:
			return 0, hmStop, m.corruptBucket(i, raw, m.lay.CheckLengths(kl, vl))
		case !match:
			return 0, hmNext, nil
		case int(vl) > len(buf):
			return int(vl), hmFound, fmt.Errorf("%w: %s: value of %d bytes, buffer of %d", transport.ErrShortBuffer, m.Path(), vl, len(buf))
		}
		return n, hmFound, nil
	}
}

// hmStable reports whether what a reader copied from a bucket whose
// control word was raw is intact now that the word is again: the word is
// unchanged but for its owner field (a writer locked the bucket and writes
// the other copy), or exactly one publish happened and no writer holds the
// bucket (that publish wrote the other copy; writing the one read would
// need a second lock, which shows in the owner field or a second version).
func hmStable(raw, again uint64) bool {
	if raw&^layout.HashMapOwnerMask == again&^layout.HashMapOwnerMask {
		return true
	}
	w, a := layout.UnpackHashMapWord(raw), layout.UnpackHashMapWord(again)
	return a.State == layout.BucketFull && a.Owner == 0 && a.Active != w.Active &&
		a.Version == w.Next().Version
}

// readBackoff pauses before a re-read, and gives up on a bucket that
// changed under every one of hmReadRetries reads.
func (m *Map) readBackoff(i, raw uint64, attempt int) error {
	switch {
	case attempt >= hmReadRetries:
		return m.corruptBucket(i, raw, fmt.Errorf("changed during each of %d reads", attempt))
	case attempt < 8:
		spin.Pause()
	default:
		runtime.Gosched()
	}
	return nil
}

// Range calls fn for the entries of the map, in bucket order, until fn
// returns false. key and value are copies, valid until fn returns; fn may
// call any method of the map (Range holds no lock).
//
// Range tolerates concurrent writers. Each entry it reports is read
// consistently: a key with a value it held at some instant during the
// call, never a mixture. An entry present and not deleted for the whole
// call is reported exactly once. An entry inserted or deleted during the
// call may or may not be reported, and a value updated during the call may
// be reported old or new. A key deleted and inserted again during the call
// may be reported twice (it may land in another bucket). Range returns
// transport.ErrCorrupt, after reporting the entries before it, at a bucket that no
// map operation could have written.
func (m *Map) Range(fn func(key, value []byte) bool) error {
	if m.area == nil {
		return transport.ErrNotAttached
	}
	buf := make([]byte, m.lay.KeySize+m.lay.ValueSize)
	kbuf, vbuf := buf[:m.lay.KeySize], buf[m.lay.KeySize:]
	for i := uint64(0); i < m.lay.Capacity; i++ {
		k, v, ok, err := m.readEntry(i, kbuf, vbuf)
		if err != nil {
			return err
		}
		if ok && !fn(k, v) {
			return nil
		}
	}
	return nil
}

// readEntry copies bucket i's key and active value into kbuf and vbuf
// (KeySize and ValueSize bytes) if it holds an entry.
func (m *Map) readEntry(i uint64, kbuf, vbuf []byte) (key, value []byte, ok bool, err error) {
	ctl := m.ctl(i)
	for attempt := 0; ; attempt++ {
		raw := ctl.Load()
		w := layout.UnpackHashMapWord(raw)
		if err := w.Validate(&m.lay); err != nil {
			return nil, nil, false, m.corruptBucket(i, raw, err)
		}
		if w.State != layout.BucketFull {
			return nil, nil, false, nil
		}
		kl, vl := m.keyLen(i).Load(), m.valueLen(i, w.Active).Load()
		sane := uint64(kl) <= m.lay.KeySize && uint64(vl) <= m.lay.ValueSize
		if sane {
			key = kbuf[:copy(kbuf, m.keyBytes(i, kl))]
			value = vbuf[:copy(vbuf, m.valueBytes(i, w.Active, vl))]
		}
		hashMapFence()
		if !hmStable(raw, ctl.Load()) {
			if err := m.readBackoff(i, raw, attempt); err != nil {
				return nil, nil, false, err
			}
			continue
		}
		if !sane {
			return nil, nil, false, m.corruptBucket(i, raw, m.lay.CheckLengths(kl, vl))
		}
		return key, value, true, nil
	}
}

// Put stores value under key, inserting the key if it is absent (inserted
// reports which). Keys and values may be shorter than the configured
// sizes; longer ones get transport.ErrTooLarge. A map with no free bucket left on
// the key's probe sequence (that is, none at all) gets transport.ErrFull. Put is
// atomic for readers: they see the old value (or no entry) until the one
// store that publishes the new value, and the new value after it.
//
// Writers of keys with the same home bucket take turns. A turn held by a
// process proven dead is taken over, and whatever that process left
// half-done on the key is rolled back first; a turn held by a live process
// for over a second without changing hands (one stopped by a signal or a
// debugger) gives transport.ErrDeadlineOrClose. The same holds for Delete. A full
// map is transport.ErrFull only after the inserts of writers proven dead have been
// rolled back.
func (m *Map) Put(key, value []byte) (inserted bool, err error) {
	if m.tab.Self == 0 || m.area == nil {
		return false, transport.ErrNotAttached
	}
	if uint64(len(key)) > m.lay.KeySize {
		return false, m.tooLarge("key", len(key), m.lay.KeySize)
	}
	if uint64(len(value)) > m.lay.ValueSize {
		return false, m.tooLarge("value", len(value), m.lay.ValueSize)
	}
	home := layout.HashMapHash(key) & m.mask
	hl := m.home(home)
	mine, err := m.lockHome(hl, home)
	if err != nil {
		return false, err
	}
	shm.CrashPoint(crashHashmapPutAfterHomeLock)
	inserted, err = m.put(home, key, value)
	hl.CompareAndSwap(mine, 0)
	return inserted, err
}

func (m *Map) put(home uint64, key, value []byte) (bool, error) {
	var healing time.Time
	for round := 0; round < hmWriteRounds; round++ {
		f, err := m.find(home, key)
		if err != nil {
			return false, err
		}
		if f.found {
			done, err := m.update(f.idx, f.raw, value, round, &healing)
			if done || err != nil {
				return false, err
			}
			continue
		}
		if !f.haveFree {
			// Before refusing, free the claims of writers proven dead
			// (each time: a writer may have died since the last look).
			// A rollback is progress, so hmWriteRounds bounds this.
			if f.inserting > 0 && m.rollBackDeadInserts() > 0 {
				continue // a dead writer's claim freed: look again
			}
			m.fullHits.Add(1)
			return false, fmt.Errorf("%w: %s: all %d buckets hold entries or tombstones being reused", transport.ErrFull, m.Path(), m.lay.Capacity)
		}
		if m.insert(f.free, f.freeRaw, key, value) {
			return true, nil
		}
		// Another writer claimed the bucket first (for another key: ours
		// is serialised by the home lock), or our claim was rolled back
		// before we published (see insert). Look again.
	}
	return false, m.noProgress(home)
}

// update replaces the value of the entry in bucket i (control word raw,
// full) while the home lock is held. It returns false to make the caller
// look again: the bucket is locked by someone else (healed first), our
// lock CAS lost, or our lock was taken from us before we published.
func (m *Map) update(i, raw uint64, value []byte, round int, healing *time.Time) (bool, error) {
	w := layout.UnpackHashMapWord(raw)
	if w.Owner != 0 {
		return false, m.healLocked(i, raw, round, healing)
	}
	ctl := m.ctl(i)
	locked := w
	locked.Owner = m.tab.Self
	if !ctl.CompareAndSwap(raw, locked.Pack()) {
		return false, nil
	}
	hashMapFence()
	shm.CrashPoint(crashHashmapUpdateAfterLock)
	next := w.Active ^ 1
	m.valueLen(i, next).Store(uint32(len(value)))
	copy(m.valueBytes(i, next, uint32(len(value))), value)
	shm.CrashPoint(crashHashmapUpdateAfterWrite)
	// Publish: the new copy becomes active, the version moves on and the
	// lock is dropped, in one CAS from the word we stored (release: the
	// copy is visible first). Nothing changes a bucket we hold but a
	// rollback on proof of our death, which cannot happen while we run; if
	// it did (a wrong proof), the update did not happen (readers kept the
	// old copy) and the caller does it again.
	pub := w.Next()
	pub.Active = next
	if !ctl.CompareAndSwap(locked.Pack(), pub.Pack()) {
		return false, nil
	}
	shm.CrashPoint(crashHashmapUpdateAfterPublish)
	m.updates.Add(1)
	return true, nil
}

// insert claims the free bucket i (control word raw: empty or tombstone)
// for key, writes the key and value and publishes the entry. It returns
// false if another writer claimed the bucket first, or if our claim was
// taken from us before we published: the publish is a CAS from the exact
// claim we stored, and only a rollback on proof of our death changes a
// claim (impossible while we run; after a wrong proof the bucket is a
// tombstone, perhaps reused, and the insert did not happen: the caller
// looks again and inserts elsewhere).
func (m *Map) insert(i, raw uint64, key, value []byte) bool {
	ctl := m.ctl(i)
	w := layout.UnpackHashMapWord(raw)
	claim := w.Next()
	claim.State, claim.Owner = layout.BucketInserting, m.tab.Self
	if !ctl.CompareAndSwap(raw, claim.Pack()) {
		return false
	}
	hashMapFence()
	shm.CrashPoint(crashHashmapInsertAfterClaim)
	m.keyLen(i).Store(uint32(len(key)))
	copy(m.keyBytes(i, uint32(len(key))), key)
	shm.CrashPoint(crashHashmapInsertAfterKey)
	next := w.Active ^ 1
	m.valueLen(i, next).Store(uint32(len(value)))
	copy(m.valueBytes(i, next, uint32(len(value))), value)
	shm.CrashPoint(crashHashmapInsertAfterValue)
	pub := claim.Next()
	pub.State, pub.Owner, pub.Active = layout.BucketFull, 0, next
	if !ctl.CompareAndSwap(claim.Pack(), pub.Pack()) {
		return false
	}
	shm.CrashPoint(crashHashmapInsertAfterPublish)
	m.live.Add(1)
	m.inserts.Add(1)
	return true
}

// Delete removes key. An absent key gives transport.ErrNotFound (not wrapped). The
// bucket becomes a tombstone: lookups continue past it, inserts reuse it.
func (m *Map) Delete(key []byte) error {
	if m.tab.Self == 0 || m.area == nil {
		return transport.ErrNotAttached
	}
	if uint64(len(key)) > m.lay.KeySize {
		return m.tooLarge("key", len(key), m.lay.KeySize)
	}
	home := layout.HashMapHash(key) & m.mask
	hl := m.home(home)
	mine, err := m.lockHome(hl, home)
	if err != nil {
		return err
	}
	shm.CrashPoint(crashHashmapDeleteAfterHomeLock)
	err = m.delete(home, key)
	hl.CompareAndSwap(mine, 0)
	return err
}

func (m *Map) delete(home uint64, key []byte) error {
	var healing time.Time
	for round := 0; round < hmWriteRounds; round++ {
		f, err := m.find(home, key)
		if err != nil {
			return err
		}
		if !f.found {
			return transport.ErrNotFound
		}
		w := layout.UnpackHashMapWord(f.raw)
		if w.Owner != 0 {
			if err := m.healLocked(f.idx, f.raw, round, &healing); err != nil {
				return err
			}
			continue
		}
		ctl := m.ctl(f.idx)
		locked := w
		locked.Owner = m.tab.Self
		if !ctl.CompareAndSwap(f.raw, locked.Pack()) {
			continue
		}
		shm.CrashPoint(crashHashmapDeleteAfterLock)
		tomb := w.Next()
		tomb.State = layout.BucketTombstone
		if !ctl.CompareAndSwap(locked.Pack(), tomb.Pack()) {
			// Our lock was rolled back before we published (only on a
			// proof of our death, so never while we run): the delete did
			// not happen; do it again.
			continue
		}
		shm.CrashPoint(crashHashmapDeleteAfterPublish)
		m.live.Add(^uint64(0))
		m.deletes.Add(1)
		return nil
	}
	return m.noProgress(home)
}

func (m *Map) noProgress(home uint64) error {
	return fmt.Errorf("%w: %s: no progress after %d rounds on the probe sequence of bucket %d", transport.ErrCorrupt, m.Path(), hmWriteRounds, home)
}

// hmFind is what a writer's walk of a probe sequence found.
type hmFind struct {
	found     bool   // the key is in bucket idx, control word raw (full)
	idx, raw  uint64 //
	haveFree  bool   // free (the first tombstone or empty bucket) is where an insert goes
	free      uint64 //
	freeRaw   uint64 //
	inserting int    // inserts in progress (or left by dead writers) passed on the way
}

// find walks key's probe sequence from home, holding key's home lock, to
// the key or the first empty bucket. Only holders of this home lock write
// buckets holding key, so what it finds of key cannot change under it; a
// bucket holding another key may, and is only ever acted on by a CAS from
// the word read here.
func (m *Map) find(home uint64, key []byte) (hmFind, error) {
	var f hmFind
	for p := uint64(0); p < m.lay.Capacity; p++ {
		i := (home + p) & m.mask
		ctl := m.ctl(i)
		raw := ctl.Load()
		w := layout.UnpackHashMapWord(raw)
		if err := w.Validate(&m.lay); err != nil {
			return f, m.corruptBucket(i, raw, err)
		}
		switch w.State {
		case layout.BucketEmpty, layout.BucketTombstone:
			if !f.haveFree {
				f.haveFree, f.free, f.freeRaw = true, i, raw
			}
			if w.State == layout.BucketEmpty {
				return f, nil
			}
		case layout.BucketInserting:
			f.inserting++
		case layout.BucketFull:
			kl := m.keyLen(i).Load()
			if uint64(kl) > m.lay.KeySize {
				if ctl.Load() == raw {
					return f, m.corruptBucket(i, raw, m.lay.CheckLengths(kl, 0))
				}
				continue // changing under us: not our key's bucket
			}
			if int(kl) == len(key) && bytes.Equal(m.keyBytes(i, kl), key) {
				f.found, f.idx, f.raw = true, i, raw
				return f, nil
			}
		}
	}
	return f, nil
}

// defaultHomeWaitMax bounds a wait for a home lock whose holder is alive and
// does not change: a writer holds it for the few hundred nanoseconds of one
// Put or Delete, so a holder that keeps it this long is stopped (SIGSTOP, a
// debugger) or the word is corrupt (it names a live participant that does
// not hold it). Each handle keeps it in homeWaitMax, which tests of this
// package shorten on their own handles.
const defaultHomeWaitMax = time.Second

// homeValue returns a new home lock word for this handle: lockValue of our
// entry in bits 0-39 and, in bits 40-63, the handle's acquisition count
// (modulo 2^24). Every acquisition stores a word that differs from the
// previous one, also between goroutines of one handle, so a waiter sees
// every change of holder.
func (m *Map) homeValue() uint64 {
	return m.tab.MyLock() | (m.homeSeq.Add(1)&layout.HashMapHomeSeqMask)<<layout.HashMapHomeSeqShift
}

// homeHolderAlive reports whether a home lock word names a live holder
// (the acquisition count plays no part in that). Only an active entry
// takes home locks (a process claiming an entry holds nothing yet, and the
// repairer entry never takes one), so a word naming a claiming entry names
// nobody.
func (m *Map) homeHolderAlive(v uint64) bool {
	v &= layout.HashMapHomeHolderMask
	if v == 0 || layout.ValidateRole(v, m.tab.Len()) != nil {
		return false
	} else if _, ctl := m.tab.Status(uint64(layout.UnpackRole(v).Index())); layout.UnpackPeer(ctl).State != layout.PeerActive {
		return false
	}
	return m.tab.HolderAlive(v)
}

// lockHome takes the home lock word hl for this participant and returns
// the value it stored. A holder is replaced only once proven dead, or when
// the word names no possible holder (an entry out of range, free, being
// claimed, or at another generation), as peers.Table.TakeRole does. A live
// holder is waited for at most m.homeWaitMax counted from when the word
// was last seen free or changed (each acquisition stores a new word, see
// homeValue): a wait that outlasts it without a change ends with
// transport.ErrDeadlineOrClose.
func (m *Map) lockHome(hl *atomic.Uint64, bucket uint64) (uint64, error) {
	mine := m.homeValue()
	var last uint64
	var since time.Time // zero until the holder in last has been waited for past the spins
	for tries := 0; ; tries++ {
		v := hl.Load()
		if v != last {
			last, since = v, time.Time{} // free, or a new holder: the wait starts again
		}
		if v == 0 {
			if hl.CompareAndSwap(0, mine) {
				return mine, nil
			}
			continue
		}
		if tries < hmHomeSpins {
			spin.Pause()
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if (tries-hmHomeSpins)%hmHomeJudgeEvery == hmHomeJudgeEvery-1 {
			if !m.homeHolderAlive(v) {
				if hl.CompareAndSwap(v, mine) {
					m.homeTakeovers.Add(1)
					return mine, nil
				}
				continue
			}
			if time.Since(since) > m.homeWaitMax {
				return 0, fmt.Errorf("%w: %s: the home lock of bucket %d has been held by live participant %d, unchanged, for over %v (stopped, or the word %#x is corrupt)",
					transport.ErrDeadlineOrClose, m.Path(), bucket, layout.UnpackRole(v).Index(), m.homeWaitMax, v)
			}
		}
		if tries < hmHomeSleepAfter {
			runtime.Gosched()
		} else {
			time.Sleep(hmHomeSleep)
		}
	}
}

// healLocked handles a bucket of our key found locked by someone else
// while we hold the key's home lock. Only a writer that held the home lock
// before us can have locked it, and we hold it because that writer was
// proven dead (or it named no possible holder): the bucket is rolled back.
// An owner not proven dead (its liveness undecided for now: its entry lock
// unreadable, or released by a process that is still exiting; or the word
// is corrupt) is judged again after a pause, and after m.homeWaitMax
// (counted from *since, set on the first call) the bucket is reported
// corrupt.
func (m *Map) healLocked(i, raw uint64, round int, since *time.Time) error {
	owner := layout.UnpackHashMapWord(raw).Owner
	if m.tab.StampDead(owner) {
		m.rollBack(i, raw)
		return nil
	}
	if since.IsZero() {
		*since = time.Now()
	} else if time.Since(*since) > m.homeWaitMax {
		return m.corruptBucket(i, raw, fmt.Errorf("locked for over %v by participant %d, not proven dead, while this writer holds the key's home lock", m.homeWaitMax, owner-1))
	}
	time.Sleep(min(time.Duration(round+1)*50*time.Microsecond, hmLockedPauseMax))
	return nil
}

// rollBack undoes what a writer proven dead left in bucket i (control word
// raw, naming it): an insert becomes a tombstone (never empty: that could
// cut the probe sequences that pass through it); an update or a delete is
// undone (the old copy stays active, the lock is dropped). The version
// moves on in both, so a reader that read across the writer's work reads
// again. It is a CAS from raw: a bucket that changed meanwhile is left
// alone. It reports whether it changed the bucket.
func (m *Map) rollBack(i, raw uint64) bool {
	w := layout.UnpackHashMapWord(raw)
	if w.Owner == 0 {
		return false
	}
	next := w.Next()
	next.Owner = 0
	switch w.State {
	case layout.BucketInserting:
		next.State = layout.BucketTombstone
	case layout.BucketFull:
	default:
		return false
	}
	if !m.ctl(i).CompareAndSwap(raw, next.Pack()) {
		return false
	}
	m.rolledBack.Add(1)
	return true
}

// rollBackDeadInserts rolls back the inserting buckets of writers proven
// dead, for an insert that found no free bucket. An owner stamp names a
// table entry, not a process: while the scan runs, a repair (any
// process's, such as the one an attach to a full table runs) may free a
// dead writer's entry and a new process take it, with the same stamp. So each bucket is judged after
// its word is loaded, against the entry as it is then; a verdict is reused
// only for the same entry control word (same state, generation and pid:
// the same registration), re-read after loading the bucket.
func (m *Map) rollBackDeadInserts() int {
	verdicts := map[uint16]hmVerdict{}
	n := 0
	for i := uint64(0); i < m.lay.Capacity; i++ {
		if m.deadScanHook != nil {
			m.deadScanHook(i)
		}
		raw := m.ctl(i).Load()
		w := layout.UnpackHashMapWord(raw)
		if w.State != layout.BucketInserting || w.Validate(&m.lay) != nil {
			continue
		}
		if m.ownerDead(w.Owner, verdicts) && m.rollBack(i, raw) {
			n++
		}
	}
	return n
}

// hmVerdict is a death verdict on the registration whose entry control
// word is ctl.
type hmVerdict struct {
	ctl  uint64
	dead bool
}

// ownerDead reports whether the participant that owner stamp names is
// proven dead. The caller has loaded the bucket word naming it first: the
// entry is read after that, so a new process that took the entry (freed
// by a repair) before the bucket was stamped with its stamp is the one
// judged. A
// verdict in cache is used only while the entry's control word is the one
// it was made for.
func (m *Map) ownerDead(stamp uint16, cache map[uint16]hmVerdict) bool {
	if stamp == 0 || uint64(stamp) > m.lay.Entries {
		return false
	}
	ctl := m.tab.Entry(uint64(stamp - 1)).Ctl.Load()
	if v, ok := cache[stamp]; ok && v.ctl == ctl {
		return v.dead
	}
	ps, seen := m.tab.Status(uint64(stamp - 1))
	cache[stamp] = hmVerdict{ctl: seen, dead: ps.Dead}
	return ps.Dead
}
