package layout

import (
	"errors"
	"fmt"
)

// Hash map format (kind 4): a fixed number of buckets, open addressing with
// linear probing. The map's area follows the common header:
//
//	area offset
//	   0 +---------------------------------------------------------------+
//	     | live | inserts | updates | deletes | full_hits | rolled_back  |
//	     | home_takeovers | repairs                  (counters line)     |
//	  64 | repair_lock | reserved (56 B)                                 |
//	 128 +---------------------------------------------------------------+
//	     | participant[0..P]: 64 B each, entry P the repairer's (ring.go) |
//	     +---------------------------------------------------------------+ (64-aligned)
//	     | bucket[0..capacity), bucket_size bytes each (a multiple of 64)|
//	     |    0 ctl (u64)        8 home_lock (u64)                       |
//	     |   16 key_len (u32)   20 value_len[0] (u32)                    |
//	     |   24 value_len[1] (u32)  28 reserved (u32)                    |
//	     |   32 key (key_size B)                                         |
//	     |   32+K value[0] (value_size B)   32+K+V value[1] (value_size B)|
//	     |   padding to bucket_size                                      |
//	     +---------------------------------------------------------------+
//
// ctl is the bucket's control word (HashMapWord): state, the owner stamp of
// the writer holding the bucket, which value copy is active, and a version
// bumped on every publish. home_lock serialises the writers of every key
// whose probe sequence starts at this bucket; it holds the holder's
// participant index + 1 in bits 0-15, its entry's generation in bits 16-39
// and an acquisition count in bits 40-63 (0 when free): every acquisition
// stores a new word, so a waiter tells a new holder from one that keeps
// it. A key is hashed with HashMapHash; its home bucket is
// hash & (capacity - 1), and its probe sequence is home, home+1, ...
// (mod capacity).
//
// Geometry: Capacity is the bucket count (a power of two), SlotSize is 0,
// Param0 the key size, Param1 the value size, Param2 the participant
// table's size. These constants are part of the format.
const (
	HashMapOffLive          = 0
	HashMapOffInserts       = 8
	HashMapOffUpdates       = 16
	HashMapOffDeletes       = 24
	HashMapOffFullHits      = 32
	HashMapOffRolledBack    = 40
	HashMapOffHomeTakeovers = 48
	HashMapOffRepairs       = 56
	HashMapOffRepairLock    = 64
	HashMapOffParticipants  = 128

	HashMapBucketCtl      = 0
	HashMapBucketHomeLock = 8
	HashMapBucketKeyLen   = 16
	HashMapBucketValLen0  = 20
	HashMapBucketValLen1  = 24
	HashMapBucketReserved = 28
	HashMapBucketKey      = 32

	// A home lock word: the holder (lockValue: participant index + 1,
	// generation) in the bits of HashMapHomeHolderMask, the holder's
	// acquisition count (modulo 2^24) from HashMapHomeSeqShift up.
	HashMapHomeHolderMask = 1<<40 - 1
	HashMapHomeSeqShift   = 40
	HashMapHomeSeqMask    = 1<<24 - 1

	HashMapMinCapacity     = 2
	HashMapMaxCapacity     = 1 << 24
	HashMapMaxKeySize      = 1024
	HashMapMaxValueSize    = 1 << 16
	HashMapMaxParticipants = 1022 // owner field is 10 bits, 0 meaning none, 1023 the repairer entry at most
	HashMapDefaultPeers    = 64
)

// HashMapGeometry returns the geometry of a hash map.
func HashMapGeometry(capacity uint64, keySize, valueSize, participants uint32) Geometry {
	return Geometry{Capacity: capacity, Params: [3]uint32{keySize, valueSize, participants}}
}

// HashMapLayout is a validated hash map geometry with its derived offsets,
// relative to the map's area (add the header size for file offsets).
type HashMapLayout struct {
	Capacity     uint64 // buckets, a power of two
	KeySize      uint64 // largest key, bytes
	ValueSize    uint64 // largest value, bytes
	Participants uint64 // entries processes attach to
	Entries      uint64 // Participants + the repairer entry (PeerEntries)
	BucketsOff   uint64 // area offset of bucket 0
	BucketSize   uint64 // stride between buckets, a multiple of 64
	BodySize     uint64
}

// NewHashMapLayout validates a hash map geometry and derives its layout.
func NewHashMapLayout(g Geometry) (HashMapLayout, error) {
	l := HashMapLayout{Capacity: g.Capacity, KeySize: uint64(g.Params[0]), ValueSize: uint64(g.Params[1]), Participants: uint64(g.Params[2])}
	switch {
	case g.Capacity < HashMapMinCapacity || g.Capacity > HashMapMaxCapacity || g.Capacity&(g.Capacity-1) != 0:
		return l, fmt.Errorf("capacity %d must be a power of two in [%d, %d]", g.Capacity, HashMapMinCapacity, HashMapMaxCapacity)
	case g.SlotSize != 0:
		return l, fmt.Errorf("slot size %d must be 0", g.SlotSize)
	case l.KeySize < 1 || l.KeySize > HashMapMaxKeySize:
		return l, fmt.Errorf("key size %d must be in [1, %d]", l.KeySize, HashMapMaxKeySize)
	case l.ValueSize < 1 || l.ValueSize > HashMapMaxValueSize:
		return l, fmt.Errorf("value size %d must be in [1, %d]", l.ValueSize, HashMapMaxValueSize)
	case l.Participants < 1 || l.Participants > HashMapMaxParticipants:
		return l, fmt.Errorf("participant table size %d must be in [1, %d]", l.Participants, HashMapMaxParticipants)
	}
	// All operands are bounded above, so the sums cannot overflow; the
	// checked helpers still bound them by MaxFileSize.
	raw, err := checkedSum(HashMapBucketKey, l.KeySize, l.ValueSize, l.ValueSize)
	if err != nil {
		return l, err
	}
	l.BucketSize = alignUp(raw, CacheLine)
	l.Entries = PeerEntries(l.Participants)
	table, err := checkedProduct(l.Entries, PeerEntrySize)
	if err != nil {
		return l, err
	}
	end, err := checkedSum(HashMapOffParticipants, table)
	if err != nil {
		return l, err
	}
	l.BucketsOff = alignUp(end, CacheLine)
	buckets, err := checkedProduct(l.Capacity, l.BucketSize)
	if err != nil {
		return l, err
	}
	if l.BodySize, err = checkedSum(l.BucketsOff, buckets); err != nil {
		return l, err
	}
	return l, nil
}

// BucketOff is the area offset of bucket i's control word. i must be
// < Capacity.
func (l *HashMapLayout) BucketOff(i uint64) uint64 { return l.BucketsOff + i*l.BucketSize }

// KeyOff is the area offset of bucket i's key bytes.
func (l *HashMapLayout) KeyOff(i uint64) uint64 { return l.BucketOff(i) + HashMapBucketKey }

// ValueOff is the area offset of bucket i's value copy c (0 or 1).
func (l *HashMapLayout) ValueOff(i uint64, c uint8) uint64 {
	return l.KeyOff(i) + l.KeySize + uint64(c&1)*l.ValueSize
}

// ValueLenOff is the area offset of the length word of bucket i's value
// copy c (0 or 1).
func (l *HashMapLayout) ValueLenOff(i uint64, c uint8) uint64 {
	return l.BucketOff(i) + HashMapBucketValLen0 + 4*uint64(c&1)
}

// ParticipantOff is the area offset of participant entry i.
func (l *HashMapLayout) ParticipantOff(i uint64) uint64 {
	return HashMapOffParticipants + i*PeerEntrySize
}

// CheckLengths validates a key length and a value length read from a
// bucket against the sizes of the map.
func (l *HashMapLayout) CheckLengths(keyLen, valueLen uint32) error {
	if uint64(keyLen) > l.KeySize {
		return fmt.Errorf("%w: key length %d exceeds key size %d", ErrBucketCorrupt, keyLen, l.KeySize)
	}
	if uint64(valueLen) > l.ValueSize {
		return fmt.Errorf("%w: value length %d exceeds value size %d", ErrBucketCorrupt, valueLen, l.ValueSize)
	}
	return nil
}

func init() {
	register(&Spec{
		Kind:       KindHashMap,
		ParamNames: [3]string{"key_size", "value_size", "participants"},
		Body: func(g Geometry) (uint64, Map, error) {
			l, err := NewHashMapLayout(g)
			if err != nil {
				return 0, Map{}, err
			}
			return l.BodySize, l.fieldMap(), nil
		},
	})
}

func (l *HashMapLayout) fieldMap() Map {
	u64 := func(name string, off uint64, meaning string) Field { return Field{name, off, 8, meaning} }
	m := Map{Fields: []Field{
		u64("hashmap.live", HashMapOffLive, "entries published and not deleted (statistics: a writer killed between publishing and counting leaves it off by one)"),
		u64("hashmap.inserts", HashMapOffInserts, "keys inserted"),
		u64("hashmap.updates", HashMapOffUpdates, "values replaced in place"),
		u64("hashmap.deletes", HashMapOffDeletes, "keys deleted"),
		u64("hashmap.full_hits", HashMapOffFullHits, "inserts that found no free bucket"),
		u64("hashmap.rolled_back", HashMapOffRolledBack, "buckets of dead writers rolled back"),
		u64("hashmap.home_takeovers", HashMapOffHomeTakeovers, "home locks taken over or released from dead holders"),
		u64("hashmap.repairs", HashMapOffRepairs, "repair passes that changed something"),
		u64("hashmap.repair_lock", HashMapOffRepairLock, "repairer, a role word: participant index+1 (bits 0-15), generation (16-39); 0 when free"),
		{"hashmap.reserved", HashMapOffRepairLock + 8, HashMapOffParticipants - (HashMapOffRepairLock + 8), "reserved, zero"},
	}}
	tableEnd := l.ParticipantOff(l.Entries)
	if pad := l.BucketsOff - tableEnd; pad > 0 {
		m.Fields = append(m.Fields, Field{"hashmap.pad", tableEnd, pad, "padding to a cache line"})
	}
	bucket := []Field{
		{"ctl", HashMapBucketCtl, 8, "state (bits 0-2: 0 empty, 1 inserting, 2 full, 3 tombstone), owner (3-12), active copy (13), version (14-63)"},
		{"home_lock", HashMapBucketHomeLock, 8, "writer of keys homed here: participant index+1 (bits 0-15), generation (16-39), acquisition count (40-63); 0 when free"},
		{"key_len", HashMapBucketKeyLen, 4, "key bytes"},
		{"value_len0", HashMapBucketValLen0, 4, "bytes of value copy 0"},
		{"value_len1", HashMapBucketValLen1, 4, "bytes of value copy 1"},
		{"reserved", HashMapBucketReserved, 4, "reserved, zero"},
		{"key", HashMapBucketKey, l.KeySize, "key bytes [0, key_len)"},
		{"value0", HashMapBucketKey + l.KeySize, l.ValueSize, "value copy 0, bytes [0, value_len0)"},
		{"value1", HashMapBucketKey + l.KeySize + l.ValueSize, l.ValueSize, "value copy 1, bytes [0, value_len1)"},
	}
	if used := HashMapBucketKey + l.KeySize + 2*l.ValueSize; used < l.BucketSize {
		bucket = append(bucket, Field{"pad", used, l.BucketSize - used, "padding to a cache line"})
	}
	m.Areas = []Area{
		PeerArea(HashMapOffParticipants, l.Entries),
		{Name: "bucket", Offset: l.BucketsOff, Stride: l.BucketSize, Count: l.Capacity, Fields: bucket},
	}
	return m
}

// BucketState is the state field of a bucket's control word.
type BucketState uint8

// Bucket states. These values are part of the format.
const (
	BucketEmpty     BucketState = 0 // never used: lookups stop here
	BucketInserting BucketState = 1 // claimed by a writer (owner) writing a new entry: absent to readers
	BucketFull      BucketState = 2 // holds an entry; owner non-zero while a writer updates or deletes it
	BucketTombstone BucketState = 3 // held an entry, deleted: lookups continue past it, inserts reuse it
)

var bucketStateNames = [...]string{"empty", "inserting", "full", "tombstone"}

func (s BucketState) String() string {
	if int(s) < len(bucketStateNames) {
		return bucketStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Valid reports whether s is a defined state.
func (s BucketState) Valid() bool { return int(s) < len(bucketStateNames) }

// Bucket control word fields. These constants are part of the format.
const (
	bucketStateBits  = 3
	bucketOwnerBits  = 10
	bucketActiveBits = 1
	// HashMapVersionBits is the width of a bucket's version field.
	HashMapVersionBits = 64 - bucketStateBits - bucketOwnerBits - bucketActiveBits

	bucketOwnerShift   = bucketStateBits
	bucketActiveShift  = bucketOwnerShift + bucketOwnerBits
	bucketVersionShift = bucketActiveShift + bucketActiveBits

	// HashMapVersionMask masks a version to the bits a control word keeps.
	HashMapVersionMask = 1<<HashMapVersionBits - 1
	// HashMapOwnerMask selects the owner field of a packed control word:
	// readers compare words with it masked out, since taking or dropping
	// the lock changes no published byte.
	HashMapOwnerMask = (1<<bucketOwnerBits - 1) << bucketOwnerShift
)

// HashMapWord is the decoded control word of a bucket. One atomic word
// holds all of it, so a single CAS changes state and owner together, and a
// single store publishes a new value (active copy flipped, version bumped).
type HashMapWord struct {
	State   BucketState
	Owner   uint16 // participant index + 1 of the writer holding the bucket; 0 when unlocked
	Active  uint8  // the value copy readers read (0 or 1)
	Version uint64 // bumped on every publish, modulo 2^HashMapVersionBits
}

// Pack encodes w. Fields wider than their bit widths are truncated; callers
// pass validated values.
func (w HashMapWord) Pack() uint64 {
	return uint64(w.State)&(1<<bucketStateBits-1) |
		uint64(w.Owner)&(1<<bucketOwnerBits-1)<<bucketOwnerShift |
		uint64(w.Active)&1<<bucketActiveShift |
		w.Version&HashMapVersionMask<<bucketVersionShift
}

// UnpackHashMapWord decodes a bucket control word. It never fails; Validate
// says whether the result makes sense for a given map.
func UnpackHashMapWord(v uint64) HashMapWord {
	return HashMapWord{
		State:   BucketState(v & (1<<bucketStateBits - 1)),
		Owner:   uint16(v >> bucketOwnerShift & (1<<bucketOwnerBits - 1)),
		Active:  uint8(v >> bucketActiveShift & 1),
		Version: v >> bucketVersionShift & HashMapVersionMask,
	}
}

// Next returns w with the version bumped (modulo its width).
func (w HashMapWord) Next() HashMapWord {
	w.Version = (w.Version + 1) & HashMapVersionMask
	return w
}

// ErrBucketCorrupt marks a bucket word or length no map operation could
// have written.
var ErrBucketCorrupt = errors.New("layout: corrupt bucket")

// Validate checks a decoded control word against the map's geometry: a
// state that exists; an empty bucket is all zero (buckets never become
// empty again); an owner inside the participant table exactly when the
// bucket is locked (always while inserting, never on a tombstone).
func (w HashMapWord) Validate(l *HashMapLayout) error {
	if !w.State.Valid() {
		return fmt.Errorf("%w: state %d", ErrBucketCorrupt, w.State)
	}
	if uint64(w.Owner) > l.Entries {
		return fmt.Errorf("%w: owner %d outside the table of %d entries", ErrBucketCorrupt, w.Owner, l.Entries)
	}
	switch w.State {
	case BucketEmpty:
		if w != (HashMapWord{}) {
			return fmt.Errorf("%w: empty bucket with owner %d, active %d, version %d", ErrBucketCorrupt, w.Owner, w.Active, w.Version)
		}
	case BucketInserting:
		if w.Owner == 0 {
			return fmt.Errorf("%w: inserting bucket without an owner", ErrBucketCorrupt)
		}
	case BucketTombstone:
		if w.Owner != 0 {
			return fmt.Errorf("%w: tombstone locked by %d", ErrBucketCorrupt, w.Owner)
		}
	}
	return nil
}

// HashMapHash is the map's hash function, part of the format: 64-bit
// FNV-1a over the key bytes (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3), then the 64-bit finaliser of MurmurHash3 (fmix64), so
// that the low bits that choose the home bucket depend on every key byte.
func HashMapHash(key []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range key {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
