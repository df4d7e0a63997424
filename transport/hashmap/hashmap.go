package hashmap

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Config is the geometry of a new hash map. Participants may be
// zero (default 64); the other fields are required.
type Config struct {
	Capacity     uint64 // buckets, a power of two in [2, 2^24]: the most keys the map holds
	KeySize      uint32 // largest key in bytes, 1 to 1024
	ValueSize    uint32 // largest value in bytes, 1 to 65536
	Participants uint32 // size of the participant table, 1 to 1022 (default 64); the file keeps one more, the repairer entry
}

func (c Config) geometry() layout.Geometry {
	if c.Participants == 0 {
		c.Participants = layout.HashMapDefaultPeers
	}
	return layout.HashMapGeometry(c.Capacity, c.KeySize, c.ValueSize, c.Participants)
}

func (c Config) validGeometry(path string) (layout.Geometry, error) {
	g := c.geometry()
	if _, err := layout.NewHashMapLayout(g); err != nil {
		return g, fmt.Errorf("%w: %s: %v", transport.ErrInvalidConfig, path, err)
	}
	return g, nil
}

// Map is a fixed-capacity key/value map in a mapped file, shared by any
// number of goroutines and processes: a lookup table, a registry, a cache
// of results that several processes fill and read. Keys and values are
// byte strings of at most the configured sizes, stored with their exact
// lengths. It is not a transport: there is no push or pop, no ordering
// between keys and no waiting for a key to appear; and it never grows
// (a full map refuses inserts with transport.ErrFull).
//
// Readers (Get, Range) are lock-free and never see a torn value: each
// bucket keeps two copies of its value, a writer fills the inactive one and
// publishes it by flipping the active copy and bumping a version in one
// atomic store, and a reader that finds the bucket's control word changed
// under it reads again. Writers of keys with the same home bucket are
// serialised by that bucket's home lock, so a key is never inserted twice.
// Like a transport.Ring, a Map value is one participant: it is registered in the
// file's participant table, every lock it takes names that registration,
// and what a process killed mid-write leaves behind (a half-written insert,
// update or delete, a held home lock) is rolled back on proof of its death
// (its entry lock released, see package shm), by Repair, by the next writer
// that needs the bucket, or by the repair that a process attaching to a
// table with no free entry runs to free the dead participants' entries.
//
// All methods are safe for concurrent use, except Close, which must come
// after every other call on the value has returned.
type Map struct {
	reg  *shm.Region
	lay  layout.HashMapLayout
	area shm.Words // the map's area: reg.Bytes()[header size:]; nil once closed
	mask uint64

	live, inserts, updates, deletes     *atomic.Uint64
	fullHits, rolledBack, homeTakeovers *atomic.Uint64
	repairs                             *atomic.Uint64
	tab                                 peers.Table // participants, the repair lock, and our entry (tab.Self)
	id                                  uint64
	homeSeq                             atomic.Uint64       // home lock acquisitions by this handle (homeValue)
	homeWaitMax                         time.Duration       // defaultHomeWaitMax; tests shorten it on their handles
	deadScanHook                        func(bucket uint64) // nil but in tests: runs in rollBackDeadInserts before each bucket is loaded
}

// Create creates a hash map file at path (a bare name lives in
// /dev/shm). shm options set the mode and so on. The returned Map is
// attached.
func Create(path string, cfg Config, opts ...shm.Option) (*Map, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, err
	}
	return shm.CreateAs(path, shm.Spec{Kind: layout.KindHashMap, Geometry: g}, attachMap, opts...)
}

// Open opens an existing hash map and attaches to it (with
// shm.ReadOnly(), it maps the file without attaching, as
// OpenReadOnly does).
func Open(path string, opts ...shm.Option) (*Map, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindHashMap}, func(reg *shm.Region) (*Map, error) {
		if reg.ReadOnly() {
			return viewMap(reg)
		}
		return attachMap(reg)
	}, opts...)
}

// OpenOrCreate opens the hash map at path, creating it with cfg if
// it does not exist. Racing processes all end up attached to one map.
func OpenOrCreate(path string, cfg Config, opts ...shm.Option) (*Map, bool, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, false, err
	}
	return shm.OpenOrCreateAs(path, shm.Spec{Kind: layout.KindHashMap, Geometry: g}, attachMap, opts...)
}

// OpenForRepair maps a hash map read-write without attaching: for tools
// that check and repair a map without taking a participant entry (which a
// full table may not have). Get, Range, Len, Counters, Peers, Scan, Check
// and PlanRepair work; Repair runs as the table's repairer entry; Put and
// Delete return transport.ErrNotAttached.
func OpenForRepair(path string, opts ...shm.Option) (*Map, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindHashMap}, viewMap, opts...)
}

// OpenReadOnly maps a hash map read-only without attaching: Get,
// Range, Len, Counters, Peers and Scan work; Put, Delete and Repair return
// transport.ErrNotAttached.
func OpenReadOnly(path string, opts ...shm.Option) (*Map, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindHashMap}, viewMap, append(opts, shm.ReadOnly())...)
}

func viewMap(reg *shm.Region) (*Map, error) {
	h := reg.Header()
	lay, err := layout.NewHashMapLayout(h.Geometry)
	if err != nil { // layout.Decode already validated it; be certain
		return nil, fmt.Errorf("%w: %s: %v", transport.ErrCorrupt, reg.Path(), err)
	}
	m := &Map{reg: reg, lay: lay, area: reg.Bytes()[h.HeaderSize:], mask: lay.Capacity - 1, homeWaitMax: defaultHomeWaitMax}
	if uint64(len(m.area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", transport.ErrCorrupt, reg.Path(), len(m.area), lay.BodySize)
	}
	if uintptr(unsafe.Pointer(&m.area[0]))%layout.CacheLine != 0 {
		return nil, fmt.Errorf("%w: %s: hash map area not cache-line aligned", transport.ErrCorrupt, reg.Path())
	}
	u64 := m.area.U64
	m.live, m.inserts, m.updates, m.deletes = u64(layout.HashMapOffLive), u64(layout.HashMapOffInserts), u64(layout.HashMapOffUpdates), u64(layout.HashMapOffDeletes)
	m.fullHits, m.rolledBack, m.homeTakeovers = u64(layout.HashMapOffFullHits), u64(layout.HashMapOffRolledBack), u64(layout.HashMapOffHomeTakeovers)
	m.repairs = u64(layout.HashMapOffRepairs)
	m.tab = peers.New(reg, m.area, layout.HashMapOffParticipants, lay.Participants, u64(layout.HashMapOffRepairLock))
	m.id, _ = layout.FileID(reg.Bytes()) // a mapped file always holds a full header
	return m, nil
}

func attachMap(reg *shm.Region) (*Map, error) {
	m, err := viewMap(reg)
	if err != nil {
		return nil, err
	}
	// No entry free: repair as the repairer (which rolls back what dead
	// writers left and frees their entries), then try again.
	err = m.tab.Attach(m.repairAs)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ID identifies the map's file (layout.FileID).
func (m *Map) ID() uint64 { return m.id }

// Path returns the map file's path.
func (m *Map) Path() string { return m.reg.Path() }

// Header returns the file's decoded common header.
func (m *Map) Header() layout.Header { return m.reg.Header() }

// Capacity returns the number of buckets: the most keys the map holds.
func (m *Map) Capacity() uint64 { return m.lay.Capacity }

// KeySize returns the largest key the map stores, in bytes.
func (m *Map) KeySize() int { return int(m.lay.KeySize) }

// ValueSize returns the largest value the map stores, in bytes: a Get
// buffer of this size always suffices.
func (m *Map) ValueSize() int { return int(m.lay.ValueSize) }

// Participant returns this handle's participant index, or -1 if it is not
// attached (read-only or closed).
func (m *Map) Participant() int { return int(m.tab.Self) - 1 }

// Peers reports every participant entry (none once closed).
func (m *Map) Peers() []check.Peer {
	if m.area == nil {
		return nil
	}
	return m.tab.All()
}

// Close detaches from the participant table and unmaps the file. Entries
// stay in the file. No lock is held between calls, so there is nothing
// else to release.
func (m *Map) Close() error {
	if m.area == nil {
		return nil
	}
	var err error
	if m.tab.Self != 0 {
		// Guarded: a file truncated under a long-lived handle must not
		// crash its process on the way out.
		_, err = guarded(m.reg, "close", func() (struct{}, error) { m.tab.Release(false); return struct{}{}, nil })
	}
	m.area = nil
	if cerr := m.reg.Close(); err == nil {
		err = cerr
	}
	return err
}

// CheckFile reports whether the file is still whole: not truncated under
// the mapping, not grown, without holes (see shm.Region.CheckFile).
func (m *Map) CheckFile() error { return m.reg.CheckFile() }

// guarded runs fn, a slow path that touches the mapping (a check, scan,
// repair or detach), under the region's fault guard; see shm.Region.Guard.
func guarded[T any](reg *shm.Region, op string, fn func() (T, error)) (T, error) {
	var t T
	var err error
	if gerr := reg.Guard(op, func() error { t, err = fn(); return nil }); gerr != nil {
		var zero T
		return zero, gerr
	}
	return t, err
}

// Counters is a snapshot of the map's statistics, read without
// stopping anyone (each counter atomically; together not a consistent cut).
type Counters struct {
	Live          uint64 // entries published and not deleted (see Len)
	Inserts       uint64 // keys inserted
	Updates       uint64 // values replaced in place
	Deletes       uint64 // keys deleted
	FullHits      uint64 // inserts refused with transport.ErrFull
	RolledBack    uint64 // buckets of dead writers rolled back (Repair, attach, or inline)
	HomeTakeovers uint64 // home locks taken over or released from dead holders
	Repairs       uint64 // Repair passes that changed something
}

// Counters reads the map's counters. Live is counted after each publish, so
// a writer killed between publishing and counting leaves it off by one; Len
// counts the buckets instead.
func (m *Map) Counters() Counters {
	if m.area == nil {
		return Counters{}
	}
	return Counters{
		Live: m.live.Load(), Inserts: m.inserts.Load(), Updates: m.updates.Load(), Deletes: m.deletes.Load(),
		FullHits: m.fullHits.Load(), RolledBack: m.rolledBack.Load(), HomeTakeovers: m.homeTakeovers.Load(),
		Repairs: m.repairs.Load(),
	}
}

// Len returns the number of entries: buckets whose control word says full.
// It reads every bucket's control word once (O(capacity)), so it is exact
// whenever no writer runs, also after crashes; under concurrent writers it
// is a count some entries were in while it ran. Counters().Live is the O(1)
// estimate.
func (m *Map) Len() int {
	if m.area == nil {
		return 0
	}
	n := 0
	for i := uint64(0); i < m.lay.Capacity; i++ {
		if layout.UnpackHashMapWord(m.ctl(i).Load()).State == layout.BucketFull {
			n++
		}
	}
	return n
}

// Bucket accessors. i is always a local index masked by the capacity,
// never an index read from the mapping; lengths passed in are validated
// against the sizes by the callers.

func (m *Map) ctl(i uint64) *atomic.Uint64 { return m.area.U64(m.lay.BucketOff(i & m.mask)) }

func (m *Map) home(i uint64) *atomic.Uint64 {
	return m.area.U64(m.lay.BucketOff(i&m.mask) + layout.HashMapBucketHomeLock)
}

func (m *Map) keyLen(i uint64) *atomic.Uint32 {
	return m.area.U32(m.lay.BucketOff(i&m.mask) + layout.HashMapBucketKeyLen)
}

func (m *Map) valueLen(i uint64, c uint8) *atomic.Uint32 {
	return m.area.U32(m.lay.ValueLenOff(i&m.mask, c))
}

// keyBytes returns bucket i's key bytes [0, n), n <= KeySize.
func (m *Map) keyBytes(i uint64, n uint32) []byte {
	off := m.lay.KeyOff(i & m.mask)
	return m.area[off : off+uint64(n) : off+m.lay.KeySize]
}

// valueBytes returns bucket i's value copy c, bytes [0, n), n <= ValueSize.
func (m *Map) valueBytes(i uint64, c uint8, n uint32) []byte {
	off := m.lay.ValueOff(i&m.mask, c)
	return m.area[off : off+uint64(n) : off+m.lay.ValueSize]
}

// corruptBucket wraps a bad bucket as an error naming the file and bucket.
func (m *Map) corruptBucket(i, raw uint64, err error) error {
	return fmt.Errorf("%w: %s: bucket %d word %#016x: %v", transport.ErrCorrupt, m.Path(), i&m.mask, raw, err)
}

func (m *Map) tooLarge(what string, n int, limit uint64) error {
	return fmt.Errorf("%w: %s: %s of %d bytes, the limit is %d", transport.ErrTooLarge, m.Path(), what, n, limit)
}
