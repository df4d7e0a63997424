package layout

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
)

func TestNewHashMapLayout(t *testing.T) {
	tests := []struct {
		name       string
		g          Geometry
		ok         bool
		bucketsOff uint64 // checked when ok
		bucketSize uint64 // checked when ok
	}{
		// P participants have P+1 entries of 64 bytes (entry P is the
		// repairer entry) from 128: 1 participant, 2 entries, end at 256.
		// 32+1+2 bytes: one line.
		{"minimal", HashMapGeometry(2, 1, 1, 1), true, 256, 64},
		// 64 participants, 65 entries: 128+4160 = 4288.
		{"defaults", HashMapGeometry(16, 16, 32, HashMapDefaultPeers), true, 4288, 128},
		// 2 participants, 3 entries: 128+192 = 320. 32+16+2*8 = 64
		// exactly: no padding.
		{"bucket on a line", HashMapGeometry(4, 16, 8, 2), true, 320, 64},
		{"bucket one over", HashMapGeometry(4, 17, 8, 2), true, 320, 128},
		// 1022 participants, 1023 entries: 128+65472 = 65600.
		{"max participants", HashMapGeometry(2, 1, 1, HashMapMaxParticipants), true, 65600, 64},
		{"max capacity", HashMapGeometry(HashMapMaxCapacity, 8, 8, 1), true, 256, 64},
		{"max key and value", HashMapGeometry(2, HashMapMaxKeySize, HashMapMaxValueSize, 1), true, 256, 132160},
		// 2^24 buckets of 132160 bytes is about 2 TiB: beyond MaxFileSize.
		{"too big", HashMapGeometry(HashMapMaxCapacity, HashMapMaxKeySize, HashMapMaxValueSize, 1), false, 0, 0},
		{"capacity 0", HashMapGeometry(0, 8, 8, 1), false, 0, 0},
		{"capacity 1", HashMapGeometry(1, 8, 8, 1), false, 0, 0},
		{"capacity 3", HashMapGeometry(3, 8, 8, 1), false, 0, 0},
		{"capacity over max", HashMapGeometry(HashMapMaxCapacity*2, 8, 8, 1), false, 0, 0},
		{"capacity 2^63", HashMapGeometry(1<<63, 8, 8, 1), false, 0, 0},
		{"capacity max u64", HashMapGeometry(math.MaxUint64, 8, 8, 1), false, 0, 0},
		{"key 0", HashMapGeometry(8, 0, 8, 1), false, 0, 0},
		{"key over max", HashMapGeometry(8, HashMapMaxKeySize+1, 8, 1), false, 0, 0},
		{"key max u32", HashMapGeometry(8, math.MaxUint32, 8, 1), false, 0, 0},
		{"value 0", HashMapGeometry(8, 8, 0, 1), false, 0, 0},
		{"value over max", HashMapGeometry(8, 8, HashMapMaxValueSize+1, 1), false, 0, 0},
		{"value max u32", HashMapGeometry(8, 8, math.MaxUint32, 1), false, 0, 0},
		{"participants 0", HashMapGeometry(8, 8, 8, 0), false, 0, 0},
		// 1023 participants would need owner 1024 for the repairer entry:
		// past the 10-bit owner field.
		{"participants 1023", HashMapGeometry(8, 8, 8, HashMapMaxParticipants+1), false, 0, 0},
		{"participants 1024", HashMapGeometry(8, 8, 8, 1024), false, 0, 0},
		{"slot size set", Geometry{Capacity: 8, SlotSize: 64, Params: [3]uint32{8, 8, 1}}, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewHashMapLayout(tt.g)
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted %+v: %+v", tt.g, l)
				}
				if _, herr := NewHeader(KindHashMap, tt.g, 0, Creator{}); !errors.Is(herr, ErrGeometry) {
					t.Fatalf("NewHeader accepted a geometry NewHashMapLayout rejects: %v", herr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected %+v: %v", tt.g, err)
			}
			if l.BucketsOff != tt.bucketsOff || l.BucketSize != tt.bucketSize {
				t.Fatalf("BucketsOff %d BucketSize %d, want %d %d", l.BucketsOff, l.BucketSize, tt.bucketsOff, tt.bucketSize)
			}
			checkHashMapLayout(t, tt.g, l)
			h, err := NewHeader(KindHashMap, tt.g, 0, Creator{})
			if err != nil {
				t.Fatal(err)
			}
			if h.FileSize != HeaderSize+l.BodySize {
				t.Fatalf("FileSize %d, body %d", h.FileSize, l.BodySize)
			}
		})
	}
}

// checkHashMapLayout asserts the invariants every accepted layout has.
func checkHashMapLayout(t *testing.T, g Geometry, l HashMapLayout) {
	t.Helper()
	if l.Capacity != g.Capacity || l.KeySize != uint64(g.Params[0]) || l.ValueSize != uint64(g.Params[1]) || l.Participants != uint64(g.Params[2]) {
		t.Fatalf("layout %+v does not echo geometry %+v", l, g)
	}
	if l.Capacity&(l.Capacity-1) != 0 {
		t.Fatalf("capacity %d not a power of two", l.Capacity)
	}
	if l.BucketsOff%CacheLine != 0 || l.BucketSize%CacheLine != 0 {
		t.Fatalf("BucketsOff %d / BucketSize %d not cache-line aligned", l.BucketsOff, l.BucketSize)
	}
	if l.BucketSize < HashMapBucketKey+l.KeySize+2*l.ValueSize || l.BucketSize-(HashMapBucketKey+l.KeySize+2*l.ValueSize) >= CacheLine {
		t.Fatalf("BucketSize %d for key %d value %d", l.BucketSize, l.KeySize, l.ValueSize)
	}
	if l.Entries != PeerEntries(l.Participants) || l.Entries != l.Participants+1 {
		t.Fatalf("%d entries for %d participants, want %d (the repairer entry last)", l.Entries, l.Participants, l.Participants+1)
	}
	if l.Entries > 1<<bucketOwnerBits-1 {
		t.Fatalf("%d entries: owner %d does not fit the owner field", l.Entries, l.Entries)
	}
	tableEnd := l.ParticipantOff(l.Entries)
	if l.BucketsOff < tableEnd || l.BucketsOff-tableEnd >= CacheLine {
		t.Fatalf("BucketsOff %d, participant table ends at %d", l.BucketsOff, tableEnd)
	}
	last := l.Capacity - 1
	if l.BucketOff(last)+l.BucketSize != l.BodySize {
		t.Fatalf("last bucket at %d + %d != BodySize %d", l.BucketOff(last), l.BucketSize, l.BodySize)
	}
	if l.ValueOff(last, 1)+l.ValueSize > l.BodySize || l.ValueOff(last, 0)+l.ValueSize != l.ValueOff(last, 1) {
		t.Fatalf("value copies of the last bucket at %d and %d", l.ValueOff(last, 0), l.ValueOff(last, 1))
	}
	if l.ValueLenOff(last, 0)%4 != 0 || l.ValueLenOff(last, 1) != l.ValueLenOff(last, 0)+4 {
		t.Fatalf("value length words at %d, %d", l.ValueLenOff(last, 0), l.ValueLenOff(last, 1))
	}
	if l.BodySize > MaxFileSize {
		t.Fatalf("BodySize %d beyond MaxFileSize", l.BodySize)
	}
}

// TestHashMapFieldMapCoversBody: the field map names every byte of the
// area exactly once, and every control word is an aligned atomic word.
func TestHashMapFieldMapCoversBody(t *testing.T) {
	for _, g := range []Geometry{
		HashMapGeometry(2, 1, 1, 1),
		HashMapGeometry(8, 16, 32, 3),
		HashMapGeometry(4, 16, 8, 2), // no padding anywhere
		HashMapGeometry(16, 100, 300, HashMapDefaultPeers),
	} {
		l, err := NewHashMapLayout(g)
		if err != nil {
			t.Fatal(err)
		}
		m := l.fieldMap()
		type span struct {
			name     string
			from, to uint64
		}
		var spans []span
		for _, f := range m.Fields {
			spans = append(spans, span{f.Name, f.Offset, f.Offset + f.Size})
		}
		for _, a := range m.Areas {
			var inRecord uint64
			for _, f := range a.Fields {
				inRecord += f.Size
			}
			if inRecord != a.Stride {
				t.Errorf("%+v: area %s fields cover %d of %d bytes per record", g, a.Name, inRecord, a.Stride)
			}
			for i := uint64(0); i < a.Count; i++ {
				for _, f := range a.Fields {
					o := a.Offset + i*a.Stride + f.Offset
					spans = append(spans, span{a.Name + "." + f.Name, o, o + f.Size})
				}
			}
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
		var at uint64
		for _, s := range spans {
			if s.from != at {
				t.Fatalf("%+v: %s starts at %d, previous field ends at %d (gap or overlap)", g, s.name, s.from, at)
			}
			at = s.to
		}
		if at != l.BodySize {
			t.Fatalf("%+v: fields end at %d, body is %d", g, at, l.BodySize)
		}
		for _, f := range m.Fields[:9] {
			if f.Size != 8 || f.Offset%8 != 0 || f.Offset+f.Size > HashMapOffParticipants {
				t.Errorf("%s: %d bytes at %d", f.Name, f.Size, f.Offset)
			}
		}
	}
}

// TestHashMapHeaderMap: a header of kind hashmap names bytes through the
// common Map/Locate machinery, as ringctl hexdump uses it.
func TestHashMapHeaderMap(t *testing.T) {
	g := HashMapGeometry(4, 8, 16, 2)
	h, err := NewHeader(KindHashMap, g, 1, Creator{PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := NewHashMapLayout(g)
	m, err := h.Map()
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(HeaderSize)
	for _, c := range []struct {
		off  uint64
		want string
	}{
		{base + HashMapOffLive, "hashmap.live"},
		{base + HashMapOffRepairLock, "hashmap.repair_lock"},
		{base + HashMapOffRepairLock + 9, "hashmap.reserved"},
		{base + l.ParticipantOff(1), "participant[1].ctl"},
		// Entry 2 of 2 participants: the repairer entry.
		{base + l.ParticipantOff(2) + PeerOffPidNS, "participant[2].pid_ns"},
		{base + l.ParticipantOff(2) + 40, "participant[2].reserved"},
		{base + HashMapOffParticipants + 3*64, "bucket[0].ctl"},
		{base + l.BucketOff(2), "bucket[2].ctl"},
		{base + l.BucketOff(3) + HashMapBucketHomeLock, "bucket[3].home_lock"},
		{base + l.KeyOff(1) + 3, "bucket[1].key"},
		{base + l.ValueOff(0, 1), "bucket[0].value1"},
		{base + l.ValueLenOff(2, 1), "bucket[2].value_len1"},
	} {
		name, _, _, ok := m.Locate(c.off)
		if !ok || name != c.want {
			t.Errorf("Locate(%d) = %q %v, want %q", c.off, name, ok, c.want)
		}
	}
	if _, _, _, ok := m.Locate(h.FileSize); ok {
		t.Error("Locate named a byte past the file")
	}
}

func TestHashMapWordRoundTrip(t *testing.T) {
	for _, w := range []HashMapWord{
		{},
		{State: BucketInserting, Owner: 1, Version: 1},
		{State: BucketFull, Owner: HashMapMaxParticipants, Active: 1, Version: HashMapVersionMask},
		{State: BucketFull, Active: 1, Version: 12345},
		{State: BucketTombstone, Version: 1 << 40},
	} {
		if got := UnpackHashMapWord(w.Pack()); got != w {
			t.Errorf("round trip %+v -> %#x -> %+v", w, w.Pack(), got)
		}
	}
	// Every word decodes to something that packs back to itself.
	for _, v := range []uint64{0, 1, math.MaxUint64, 0x8000000000000000, 0xdeadbeefcafebabe} {
		if got := UnpackHashMapWord(v).Pack(); got != v {
			t.Errorf("%#x -> %#x", v, got)
		}
	}
	w := HashMapWord{State: BucketFull, Version: HashMapVersionMask}
	if w.Next().Version != 0 {
		t.Errorf("version does not wrap: %d", w.Next().Version)
	}
	if (HashMapWord{Owner: 0x3ff}).Pack() != HashMapOwnerMask {
		t.Errorf("owner mask %#x", uint64(HashMapOwnerMask))
	}
}

func TestHashMapWordValidate(t *testing.T) {
	l, err := NewHashMapLayout(HashMapGeometry(8, 8, 8, 4))
	if err != nil {
		t.Fatal(err)
	}
	if l.Entries != 5 {
		t.Fatalf("%d entries for 4 participants, want 5", l.Entries)
	}
	tests := []struct {
		w  HashMapWord
		ok bool
	}{
		{HashMapWord{}, true},
		{HashMapWord{State: BucketEmpty, Version: 1}, false},
		{HashMapWord{State: BucketEmpty, Active: 1}, false},
		{HashMapWord{State: BucketEmpty, Owner: 1}, false},
		{HashMapWord{State: BucketInserting, Owner: 1, Version: 3}, true},
		{HashMapWord{State: BucketInserting, Owner: 4}, true},
		{HashMapWord{State: BucketInserting}, false},
		// Owner 5 is entry 4 of 4 participants, the repairer entry: valid.
		{HashMapWord{State: BucketInserting, Owner: 5}, true},
		{HashMapWord{State: BucketInserting, Owner: 6}, false},
		{HashMapWord{State: BucketFull, Version: 9}, true},
		{HashMapWord{State: BucketFull, Owner: 2, Active: 1}, true},
		{HashMapWord{State: BucketFull, Owner: 5, Active: 1}, true},
		{HashMapWord{State: BucketFull, Owner: 6}, false},
		{HashMapWord{State: BucketFull, Owner: 1023}, false},
		{HashMapWord{State: BucketTombstone, Version: 2}, true},
		{HashMapWord{State: BucketTombstone, Owner: 1}, false},
		{HashMapWord{State: 4}, false},
		{HashMapWord{State: 7, Owner: 1}, false},
	}
	for _, tt := range tests {
		err := tt.w.Validate(&l)
		if (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tt.w, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBucketCorrupt) {
			t.Errorf("Validate(%+v): %v does not wrap ErrBucketCorrupt", tt.w, err)
		}
	}
	for _, c := range []struct {
		k, v uint32
		ok   bool
	}{{0, 0, true}, {8, 8, true}, {9, 0, false}, {0, 9, false}, {math.MaxUint32, math.MaxUint32, false}} {
		if err := l.CheckLengths(c.k, c.v); (err == nil) != c.ok {
			t.Errorf("CheckLengths(%d, %d) = %v", c.k, c.v, err)
		}
	}
	for s, want := range map[BucketState]string{BucketEmpty: "empty", BucketInserting: "inserting", BucketFull: "full", BucketTombstone: "tombstone", 6: "state(6)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q", s, got)
		}
	}
}

// TestHashMapHash pins the hash function: it is part of the format, so a
// change would strand every key of existing files.
func TestHashMapHash(t *testing.T) {
	fmix := func(h uint64) uint64 {
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		return h
	}
	// Published FNV-1a 64 vectors, finalised.
	for key, fnv := range map[string]uint64{"": 0xcbf29ce484222325, "a": 0xaf63dc4c8601ec8c, "foobar": 0x85944171f73967e8} {
		if got, want := HashMapHash([]byte(key)), fmix(fnv); got != want {
			t.Errorf("HashMapHash(%q) = %#x, want %#x", key, got, want)
		}
	}
	// Keys that differ in one byte land in different buckets of a small
	// table often enough.
	seen := map[uint64]bool{}
	for i := 0; i < 64; i++ {
		seen[HashMapHash([]byte(strings.Repeat("k", 10)+string(rune('0'+i))))&63] = true
	}
	if len(seen) < 30 {
		t.Errorf("64 similar keys fill only %d of 64 buckets", len(seen))
	}
}

// FuzzHashMapLayout: NewHashMapLayout never panics on any geometry; what it
// accepts is a layout that fits (aligned, within MaxFileSize, the last
// bucket ending at BodySize, a field map naming every byte) and the header
// agrees; and any control word decodes, validates without panicking, and
// packs back to itself.
func FuzzHashMapLayout(f *testing.F) {
	f.Add(uint64(8), uint32(0), uint32(16), uint32(32), uint32(4), uint64(0))
	f.Add(uint64(HashMapMaxCapacity), uint32(0), uint32(HashMapMaxKeySize), uint32(HashMapMaxValueSize), uint32(HashMapMaxParticipants), uint64(math.MaxUint64))
	f.Add(uint64(HashMapMaxCapacity), uint32(0), uint32(8), uint32(8), uint32(1), uint64(0x12))
	f.Add(uint64(1<<63), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(math.MaxUint32), uint64(3))
	f.Add(uint64(0), uint32(0), uint32(0), uint32(0), uint32(0), uint64(0))
	f.Fuzz(func(t *testing.T, capacity uint64, slotSize, p0, p1, p2 uint32, word uint64) {
		g := Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{p0, p1, p2}}
		l, err := NewHashMapLayout(g)
		h, herr := NewHeader(KindHashMap, g, 0, Creator{})
		if err != nil {
			if herr == nil {
				t.Fatalf("NewHeader accepted %+v that NewHashMapLayout rejects: %v", g, err)
			}
			return
		}
		if herr != nil {
			t.Fatalf("NewHeader rejected %+v that NewHashMapLayout accepts: %v", g, herr)
		}
		checkHashMapLayout(t, g, l)
		if h.FileSize != HeaderSize+l.BodySize || h.FileSize > MaxFileSize {
			t.Fatalf("FileSize %d for body %d", h.FileSize, l.BodySize)
		}
		w := UnpackHashMapWord(word)
		if w.Pack() != word {
			t.Fatalf("%#x decodes to %+v, packs to %#x", word, w, w.Pack())
		}
		if err := w.Validate(&l); err == nil {
			if uint64(w.Owner) > l.Entries || (w.State == BucketInserting) != (w.Owner != 0 && w.State != BucketFull) {
				t.Fatalf("Validate accepted %+v for %d participants (%d entries)", w, l.Participants, l.Entries)
			}
		} else if !errors.Is(err, ErrBucketCorrupt) {
			t.Fatalf("Validate: %v", err)
		}
		if err := l.CheckLengths(uint32(word), uint32(word>>32)); err == nil && (uint64(uint32(word)) > l.KeySize || word>>32 > l.ValueSize) {
			t.Fatalf("CheckLengths accepted %d, %d", uint32(word), word>>32)
		}
	})
}
