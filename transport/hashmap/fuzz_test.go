package hashmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/memfuzz"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// FuzzHashMapMemory treats the hash map file as hostile input, as the
// package promises to: a real map with entries in mixed states (full,
// updated, deleted, never used) has the fuzz input written over its bytes,
// and then every operation must return (within hmFuzzDeadline, so
// livelocks are found rather than hung on), must not panic, may fail only
// with one of the documented errors, and must never return more bytes than
// the map's sizes allow.
//
// Input format:
//
//	[0:2]  little-endian offset of the patch, modulo the target's size
//	[2]    mode bits (hmFuzzHeader, hmFuzzShortBuf)
//	[3:]   bytes written at that offset (cut at the target's end)
//
// The target is the map's area (counters, repair lock, participant table,
// buckets), or with hmFuzzHeader the 256-byte common header, in which case
// Open must fail whenever the header no longer decodes.
func FuzzHashMapMemory(f *testing.F) {
	for _, s := range hmFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		hmFuzzOnce(t, data)
	})
}

const (
	hmFuzzHeader   = 0x80 // patch the common header instead of the map's area
	hmFuzzShortBuf = 0x02 // Get into a short buffer first

	hmFuzzDeadline = 2 * time.Second // longest any single call may take
)

var hmFuzzConfig = Config{Capacity: 8, KeySize: 8, ValueSize: 24, Participants: 4}

func hmFuzzLayout() layout.HashMapLayout {
	l, err := layout.NewHashMapLayout(hmFuzzConfig.geometry())
	if err != nil {
		panic(err)
	}
	return l
}

func hmFuzzSeed(off int, mode byte, patch ...[]byte) []byte {
	b := []byte{byte(off), byte(off >> 8), mode}
	for _, p := range patch {
		b = append(b, p...)
	}
	return b
}

func hmLE64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func hmLE32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func hmFuzzSeeds() [][]byte {
	l := hmFuzzLayout()
	bucket := func(i uint64) int { return int(l.BucketOff(i)) }
	entry := func(i uint64) int { return int(l.ParticipantOff(i)) }
	word := func(w layout.HashMapWord) []byte { return hmLE64(w.Pack()) }
	// A participant entry of an active process that cannot exist (pid
	// beyond any pid_max): Repair proves it dead.
	var deadPeer []byte
	for _, v := range []uint64{layout.PeerCtl{State: layout.PeerActive, Gen: 3, PID: 0x7ffffff0}.Pack(), 1, 0, 1} {
		deadPeer = append(deadPeer, hmLE64(v)...)
	}
	self := shm.Self()
	var undecided []byte
	for _, v := range []uint64{layout.PeerCtl{State: layout.PeerActive, Gen: 2, PID: uint32(self.PID)}.Pack(), self.Start, shm.BootTag(), 1, shm.PidNamespace()} {
		undecided = append(undecided, hmLE64(v)...) // ctl, start, boot, attached, pid_ns
	}
	undecided = append(undecided, make([]byte, layout.PeerEntrySize-len(undecided))...)
	all := func(c byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = c
		}
		return b
	}
	return [][]byte{
		hmFuzzSeed(0, 0, make([]byte, 64)),              // counters zeroed
		all(0xff, 64),                                   // header mode, all ones
		hmFuzzSeed(0, 0, make([]byte, int(l.BodySize))), // the whole area zeroed
		hmFuzzSeed(0, 0, all(0xff, int(l.BodySize))),    // the whole area all ones
		hmFuzzSeed(bucket(1), 0, hmLE64(7)),             // invalid state
		hmFuzzSeed(bucket(2), 0, word(layout.HashMapWord{State: layout.BucketEmpty, Version: 9})),
		hmFuzzSeed(bucket(3), 0, word(layout.HashMapWord{State: layout.BucketTombstone, Owner: 2})),
		hmFuzzSeed(bucket(4), 0, word(layout.HashMapWord{State: layout.BucketInserting, Owner: 1})), // "inserting" by the live creator
		hmFuzzSeed(bucket(5), 0, word(layout.HashMapWord{State: layout.BucketFull, Owner: 3})),      // locked by a free entry
		hmFuzzSeed(bucket(0)+layout.HashMapBucketKeyLen, 0, hmLE32(1000)),                           // key length past the key size
		hmFuzzSeed(bucket(0)+layout.HashMapBucketValLen0, hmFuzzShortBuf, hmLE32(24), hmLE32(1<<31)),
		hmFuzzSeed(bucket(6)+layout.HashMapBucketHomeLock, 0, hmLE64(peers.LockValue(1, 0))), // home lock "held" by the live creator
		hmFuzzSeed(bucket(7)+layout.HashMapBucketHomeLock, 0, hmLE64(0xffff)),                // home lock naming nobody
		// A dead participant holding a locked bucket, an insert and a home lock.
		hmFuzzSeed(entry(1), 0, deadPeer, make([]byte, bucket(0)-entry(2)),
			word(layout.HashMapWord{State: layout.BucketFull, Owner: 2, Version: 5}), hmLE64(peers.LockValue(2, 3))),
		hmFuzzSeed(entry(1), 0, deadPeer),
		// No entry an attach can take: the creator's read free under its
		// held lock and the others corrupt, or the others active for a
		// process that runs (this one) without their lock: undecided.
		hmFuzzSeed(entry(0), 0, hmLE64(layout.PeerCtl{State: layout.PeerFree, Gen: 9}.Pack()), make([]byte, layout.PeerEntrySize-8),
			all(0xff, 3*layout.PeerEntrySize)),
		hmFuzzSeed(entry(1), 0, undecided, undecided, undecided),
		hmFuzzSeed(layout.HashMapOffRepairLock, 0, hmLE64(0x3ff)),    // repair lock held by nobody
		hmFuzzSeed(layout.HashMapOffRepairLock, 0, hmLE64(1)),        // repair lock "held" by the creator
		hmFuzzSeed(layout.OffCreated, hmFuzzHeader, []byte{0x55}),    // checksummed byte changed
		hmFuzzSeed(layout.OffReady, hmFuzzHeader, make([]byte, 4)),   // not ready
		hmFuzzSeed(layout.OffKind, hmFuzzHeader, []byte{2, 0}),       // kind changed (checksum fails)
		hmFuzzSeed(layout.OffGeneration, hmFuzzHeader, hmLE64(7)),    // mutable word: still opens
		hmFuzzSeed(layout.OffParam0, hmFuzzHeader, hmLE32(1024)),     // geometry changed
		hmFuzzSeed(layout.HashMapOffLive, 0, hmLE64(1<<63)),          // counters are statistics only
		hmFuzzSeed(bucket(2)+layout.HashMapBucketKey, 0, all(0, 60)), // key and value bytes
	}
}

// hmFuzzErrs are the errors map operations may return on corrupt memory.
var hmFuzzErrs = []error{
	transport.ErrCorrupt, transport.ErrNotFound, transport.ErrFull, transport.ErrShortBuffer, transport.ErrRepairBusy, transport.ErrTooManyPeers, transport.ErrDeadlineOrClose,
	layout.ErrInvalid, layout.ErrTooShort, layout.ErrBadMagic, layout.ErrVersionMismatch,
	layout.ErrChecksum, layout.ErrUnknownKind, layout.ErrWrongKind, layout.ErrGeometry, layout.ErrBucketCorrupt,
	shm.ErrNotRegular, shm.ErrTruncated, shm.ErrSizeMismatch, shm.ErrNotReady, shm.ErrBadOffset,
}

func hmFuzzErrOK(err error) bool {
	if err == nil {
		return true
	}
	for _, s := range hmFuzzErrs {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func hmFuzzOnce(t *testing.T, data []byte) {

	path := hashMapPath(t)
	m, err := Create(path, hmFuzzConfig)
	if err != nil {
		t.Fatal(err)
	}
	m.homeWaitMax = 20 * time.Millisecond // a home lock "held" by a live participant gives up quickly
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	// Mixed states: keys 0-4 inserted, 1 deleted (a tombstone), 2 updated
	// (copy 1 active), 3 updated twice; three buckets never used.
	for k := uint32(0); k < 5; k++ {
		if _, err := m.Put(hmKey(k), []byte(fmt.Sprintf("value-%d", k))); err != nil {
			t.Fatal(err)
		}
	}
	m.Delete(hmKey(1))
	m.Put(hmKey(2), []byte("second"))
	m.Put(hmKey(3), []byte("third, a longer value"))
	m.Put(hmKey(3), []byte(""))

	mode, mustFail := memfuzz.Overlay(t, path, m.Header(), layout.KindHashMap, data, hmFuzzHeader)
	// A short attach wait: a table the patch left with no entry to take
	// (one read free but locked by the creator, undecided ones) fails
	// after it rather than after the default 10 s; a wait without a
	// bound would still outlast fuzzDeadline.
	openOpts := []shm.Option{shm.WithReadyTimeout(10 * time.Millisecond), shm.WithAttachTimeout(50 * time.Millisecond)}
	ks, vs := int(hmFuzzConfig.KeySize), int(hmFuzzConfig.ValueSize)

	memfuzz.Run(t, hmFuzzDeadline, func(step func(string)) (problems []string) {
		bad := func(what string, err error) {
			if !hmFuzzErrOK(err) {
				problems = append(problems, fmt.Sprintf("%s: unexpected error %v", what, err))
			}
		}
		expect := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		buf := make([]byte, 4096)
		reads := func(h *Map, who string) {
			for k := uint32(0); k < 7; k++ {
				step(who + " Get")
				b := buf
				if mode&hmFuzzShortBuf != 0 && k == 0 {
					b = buf[:1]
				}
				n, err := h.Get(hmKey(k), b)
				bad(who+" Get", err)
				expect(n >= 0 && n <= vs && (err != nil || n <= len(b)), "%s Get returned %d bytes (value size %d, buffer %d)", who, n, vs, len(b))
			}
			step(who + " Range")
			err := h.Range(func(key, v []byte) bool {
				expect(len(key) <= ks && len(v) <= vs, "%s Range: key of %d bytes, value of %d", who, len(key), len(v))
				return true
			})
			bad(who+" Range", err)
			step(who + " Len")
			expect(h.Len() >= 0 && uint64(h.Len()) <= h.Capacity(), "%s Len %d", who, h.Len())
			step(who + " Scan")
			hmFuzzCheckScan(h.Scan(), h, expect)
			step(who + " Check")
			rep := h.Check()
			acts := 0
			for _, f := range rep.Findings {
				expect(f.Problem != "" && f.Location != "" && f.Action != "", "%s Check: a finding without a problem, location or action: %+v", who, f)
				if f.Action != check.ActionNone {
					acts++
				}
			}
			expect(len(rep.Plan()) == acts, "%s Check: plan of %d, %d findings with an action", who, len(rep.Plan()), acts)
		}

		step("OpenReadOnly")
		ro, err := OpenReadOnly(path, openOpts...)
		expect(mustFail == (err != nil), "OpenReadOnly: %v, header should fail: %v", err, mustFail)
		bad("OpenReadOnly", err)
		if err == nil {
			reads(ro, "read-only")
			step("read-only Put")
			_, perr := ro.Put([]byte("x"), nil)
			expect(perr == transport.ErrNotAttached, "read-only Put: %v", perr)
			step("read-only Repair")
			_, rerr := ro.Repair()
			expect(rerr == transport.ErrNotAttached, "read-only Repair: %v", rerr)
			step("read-only Close")
			bad("read-only Close", ro.Close())
		}

		step("Open")
		o, err := Open(path, openOpts...)
		expect(!mustFail || err != nil, "Open accepted a header that does not decode")
		bad("Open", err)
		if err == nil {
			o.homeWaitMax = m.homeWaitMax
			for round := 0; round < 3; round++ {
				reads(o, "attached")
				for k := uint32(0); k < 7; k++ {
					step("Put")
					_, err := o.Put(hmKey(k), []byte(fmt.Sprintf("r%d-%d", round, k)))
					bad("Put", err)
					if (k+uint32(round))%3 == 0 {
						step("Delete")
						bad("Delete", o.Delete(hmKey(k)))
					}
				}
				step("Repair")
				rep, err := o.Repair()
				bad("Repair", err)
				expect(rep.Count(check.ActionTombstone)+rep.Count(check.ActionUnlock) <= int(o.Capacity()) && len(rep.DeadPeers) <= 4 && rep.Count(check.ActionReleaseHome) <= int(o.Capacity()),
					"Repair report %+v", rep)
			}
			step("Close")
			bad("Close", o.Close())
		}

		// The creator's handle goes on with the patched map.
		step("creator Put")
		_, err = m.Put(hmKey(6), []byte("creator"))
		bad("creator Put", err)
		step("creator Delete")
		bad("creator Delete", m.Delete(hmKey(0)))
		step("creator Repair")
		_, err = m.Repair()
		bad("creator Repair", err)
		reads(m, "creator")
		step("creator Close")
		closed = true
		bad("creator Close", m.Close())
		return problems
	})
}

// hmFuzzCheckScan checks that a scan accounts for every bucket once.
func hmFuzzCheckScan(rep ScanReport, m *Map, expect func(bool, string, ...any)) {
	total := 0
	corruptBuckets := 0
	for s, n := range rep.States {
		expect(s.Valid(), "Scan counted invalid state %d", s)
		total += n
	}
	for _, b := range rep.Buckets {
		expect(b.Index < m.Capacity(), "Scan reported bucket %d", b.Index)
		if b.Problem == Corrupt {
			corruptBuckets++
		}
	}
	for _, h := range rep.HomeLocks {
		expect(h.Bucket < m.Capacity() && h.Holder < int(m.lay.Entries), "Scan reported home lock %+v", h) // the repairer entry included
	}
	expect(uint64(total+corruptBuckets) == m.Capacity(), "Scan accounted for %d of %d buckets", total+corruptBuckets, m.Capacity())
	expect(rep.Problems <= len(rep.Buckets)+len(rep.HomeLocks), "Scan: %d problems in %d reports", rep.Problems, len(rep.Buckets)+len(rep.HomeLocks))
}
