package hashmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

func hashMapPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-hashmap-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func newHashMap(t testing.TB, cfg Config) *Map {
	t.Helper()
	m, err := Create(hashMapPath(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func openHashMap(t testing.TB, path string) *Map {
	t.Helper()
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// hmValue is a self-checking value: key id, writer, sequence number, a
// filler whose length varies with seq (up to room), and a CRC-32 of all of
// it. A torn value (two writes mixed) fails the check.
func hmValue(key uint32, writer uint16, seq uint32, room int) []byte {
	fill := 0
	if room > 14 {
		fill = int(seq*7+uint32(writer)) % (room - 14 + 1)
	}
	b := make([]byte, 10, 14+fill)
	binary.LittleEndian.PutUint32(b, key)
	binary.LittleEndian.PutUint16(b[4:], writer)
	binary.LittleEndian.PutUint32(b[6:], seq)
	for i := 0; i < fill; i++ {
		b = append(b, byte(seq)+byte(i)*31)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// hmCheckValue verifies a value made by hmValue and returns its fields.
func hmCheckValue(v []byte) (key uint32, writer uint16, seq uint32, err error) {
	if len(v) < 14 {
		return 0, 0, 0, fmt.Errorf("value of %d bytes", len(v))
	}
	body := v[:len(v)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return 0, 0, 0, fmt.Errorf("torn value (checksum mismatch), %d bytes: % x...", len(v), v[:14])
	}
	return binary.LittleEndian.Uint32(v), binary.LittleEndian.Uint16(v[4:]), binary.LittleEndian.Uint32(v[6:]), nil
}

func hmKey(id uint32) []byte { return []byte(fmt.Sprintf("key-%d", id)) }

func TestHashMapConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Capacity: 8, KeySize: 8},
		{Capacity: 8, ValueSize: 8},
		{Capacity: 3, KeySize: 8, ValueSize: 8},
		{Capacity: 1, KeySize: 8, ValueSize: 8},
		{Capacity: 1 << 25, KeySize: 8, ValueSize: 8},
		{Capacity: 8, KeySize: 1025, ValueSize: 8},
		{Capacity: 8, KeySize: 8, ValueSize: 65537},
		{Capacity: 8, KeySize: 8, ValueSize: 8, Participants: 1024},
		{Capacity: 1 << 24, KeySize: 1024, ValueSize: 65536}, // over 1 TiB
	} {
		if _, err := Create(hashMapPath(t), cfg); !errors.Is(err, transport.ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8})
	if m.Header().Geometry.Params[2] != layout.HashMapDefaultPeers || m.Capacity() != 8 || m.KeySize() != 8 || m.ValueSize() != 8 {
		t.Fatalf("geometry %+v", m.Header().Geometry)
	}
	if m.ID() == 0 || m.Participant() != 0 || m.Path() == "" {
		t.Fatalf("id %d participant %d path %q", m.ID(), m.Participant(), m.Path())
	}
}

// TestHashMapCRUD runs a table of operations against the map and a Go map
// model side by side.
func TestHashMapCRUD(t *testing.T) {
	type op struct {
		do, key, value string // do: put, get, del
		inserted       bool   // put
		err            error  // expected (errors.Is)
	}
	steps := []op{
		{do: "get", key: "a", err: transport.ErrNotFound},
		{do: "del", key: "a", err: transport.ErrNotFound},
		{do: "put", key: "a", value: "1", inserted: true},
		{do: "get", key: "a", value: "1"},
		{do: "put", key: "a", value: "22", inserted: false},
		{do: "get", key: "a", value: "22"},
		{do: "put", key: "b", value: "", inserted: true}, // empty value
		{do: "get", key: "b", value: ""},
		{do: "put", key: "", value: "empty key", inserted: true},
		{do: "get", key: "", value: "empty key"},
		{do: "del", key: "a"},
		{do: "get", key: "a", err: transport.ErrNotFound},
		{do: "del", key: "a", err: transport.ErrNotFound},
		{do: "put", key: "a", value: "3", inserted: true},
		{do: "get", key: "a", value: "3"},
		{do: "get", key: "a\x00", err: transport.ErrNotFound}, // lengths are part of the key
		{do: "put", key: "a\x00", value: "4", inserted: true},
		{do: "get", key: "a", value: "3"},
		{do: "get", key: "a\x00", value: "4"},
		{do: "del", key: ""},
		{do: "get", key: "", err: transport.ErrNotFound},
	}
	m := newHashMap(t, Config{Capacity: 16, KeySize: 8, ValueSize: 16})
	model := map[string]string{}
	buf := make([]byte, 16)
	for i, s := range steps {
		var err error
		switch s.do {
		case "put":
			var ins bool
			ins, err = m.Put([]byte(s.key), []byte(s.value))
			if err == nil && ins != s.inserted {
				t.Fatalf("step %d %+v: inserted %v", i, s, ins)
			}
			model[s.key] = s.value
		case "get":
			var n int
			n, err = m.Get([]byte(s.key), buf)
			if err == nil && string(buf[:n]) != s.value {
				t.Fatalf("step %d %+v: got %q", i, s, buf[:n])
			}
		case "del":
			err = m.Delete([]byte(s.key))
			if err == nil {
				delete(model, s.key)
			}
		}
		if (s.err == nil) != (err == nil) || (s.err != nil && !errors.Is(err, s.err)) {
			t.Fatalf("step %d %+v: err %v", i, s, err)
		}
	}
	if m.Len() != len(model) {
		t.Fatalf("Len %d, model %d", m.Len(), len(model))
	}
	got := map[string]string{}
	if err := m.Range(func(k, v []byte) bool {
		if _, dup := got[string(k)]; dup {
			t.Errorf("Range reported %q twice", k)
		}
		got[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(model) {
		t.Fatalf("Range %v, model %v", got, model)
	}
	c := m.Counters()
	if c.Inserts != 5 || c.Updates != 1 || c.Deletes != 2 || c.Live != uint64(len(model)) {
		t.Fatalf("counters %+v", c)
	}
	// Range stops when fn says so.
	calls := 0
	m.Range(func(k, v []byte) bool { calls++; return false })
	if calls != 1 {
		t.Fatalf("Range went on after false: %d calls", calls)
	}
}

// TestHashMapLengthsPreserved: every key length from 0 to KeySize and value
// lengths from 0 to ValueSize come back exactly, trailing zeros included.
func TestHashMapLengthsPreserved(t *testing.T) {
	const ks, vs = 12, 40
	m := newHashMap(t, Config{Capacity: 32, KeySize: ks, ValueSize: vs})
	key := func(n int) []byte { return bytes.Repeat([]byte{0}, n) } // only the length tells them apart
	val := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 13)
		}
		if n > 0 {
			b[n-1] = 0
		}
		return b
	}
	for n := 0; n <= ks; n++ {
		if _, err := m.Put(key(n), val(n*3)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, vs)
	for n := 0; n <= ks; n++ {
		got, err := m.Get(key(n), buf)
		if err != nil || !bytes.Equal(buf[:got], val(n*3)) {
			t.Fatalf("key of %d bytes: %d %v", n, got, err)
		}
	}
	// Updates alternate copies: shrink and grow.
	for _, n := range []int{vs, 0, 1, vs - 1, 7} {
		if _, err := m.Put(key(5), val(n)); err != nil {
			t.Fatal(err)
		}
		got, err := m.Get(key(5), buf)
		if err != nil || !bytes.Equal(buf[:got], val(n)) {
			t.Fatalf("value of %d bytes: got %d %v", n, got, err)
		}
	}
}

func TestHashMapTooLargeAndShortBuffer(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 4, ValueSize: 8})
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"put long key", func() error { _, err := m.Put([]byte("12345"), nil); return err }, transport.ErrTooLarge},
		{"put long value", func() error { _, err := m.Put([]byte("k"), make([]byte, 9)); return err }, transport.ErrTooLarge},
		{"get long key", func() error { _, err := m.Get([]byte("12345"), nil); return err }, transport.ErrTooLarge},
		{"delete long key", func() error { return m.Delete([]byte("12345")) }, transport.ErrTooLarge},
		{"put max", func() error { _, err := m.Put([]byte("1234"), make([]byte, 8)); return err }, nil},
		{"get short buffer", func() error {
			n, err := m.Get([]byte("1234"), make([]byte, 7))
			if n != 8 {
				return fmt.Errorf("n = %d, want the value's length", n)
			}
			return err
		}, transport.ErrShortBuffer},
	}
	for _, tt := range tests {
		err := tt.run()
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if tt.want == transport.ErrTooLarge && !bytes.Contains([]byte(err.Error()), []byte(m.Path())) {
			t.Errorf("%s: error %q does not name the file", tt.name, err)
		}
	}
	if m.Len() != 1 {
		t.Fatalf("Len %d", m.Len())
	}
}

// TestHashMapFullAndTombstones: a full map refuses inserts but still
// updates, finds and misses (a miss walks the whole table and stops);
// deleted buckets are reused.
func TestHashMapFullAndTombstones(t *testing.T) {
	const capacity = 8
	m := newHashMap(t, Config{Capacity: capacity, KeySize: 8, ValueSize: 8})
	for i := uint32(0); i < capacity; i++ {
		if ins, err := m.Put(hmKey(i), []byte{byte(i)}); err != nil || !ins {
			t.Fatal(i, ins, err)
		}
	}
	_, err := m.Put(hmKey(100), []byte("x"))
	if !errors.Is(err, transport.ErrFull) || m.Counters().FullHits != 1 {
		t.Fatalf("insert into a full map: %v, %+v", err, m.Counters())
	}
	if ins, err := m.Put(hmKey(3), []byte("upd")); err != nil || ins {
		t.Fatalf("update in a full map: %v %v", ins, err)
	}
	buf := make([]byte, 8)
	if _, err := m.Get(hmKey(100), buf); err != transport.ErrNotFound {
		t.Fatalf("miss in a full map: %v", err)
	}
	if err := m.Delete(hmKey(100)); err != transport.ErrNotFound {
		t.Fatalf("delete miss in a full map: %v", err)
	}
	// Delete two: they become tombstones, lookups pass them.
	for _, i := range []uint32{2, 5} {
		if err := m.Delete(hmKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s := m.Scan(); s.States[layout.BucketTombstone] != 2 || s.States[layout.BucketFull] != capacity-2 || s.Problems != 0 {
		t.Fatalf("scan %+v", s)
	}
	for i := uint32(0); i < capacity; i++ {
		_, err := m.Get(hmKey(i), buf)
		if (i == 2 || i == 5) != (err == transport.ErrNotFound) {
			t.Fatalf("key %d after deletes: %v", i, err)
		}
	}
	// No empty bucket is left: a miss walks every bucket, past tombstones.
	if _, err := m.Get(hmKey(200), buf); err != transport.ErrNotFound {
		t.Fatal(err)
	}
	// Inserts reuse the tombstones, and then the map is full again.
	for _, i := range []uint32{100, 101} {
		if ins, err := m.Put(hmKey(i), []byte("new")); err != nil || !ins {
			t.Fatal(i, ins, err)
		}
	}
	if s := m.Scan(); s.States[layout.BucketTombstone] != 0 || s.States[layout.BucketFull] != capacity {
		t.Fatalf("tombstones not reused: %+v", s.States)
	}
	if _, err := m.Put(hmKey(102), []byte("x")); !errors.Is(err, transport.ErrFull) {
		t.Fatalf("full again: %v", err)
	}
	if m.Len() != capacity {
		t.Fatalf("Len %d", m.Len())
	}
}

// hmCollide returns n keys with the same home bucket in a map of the given
// capacity.
func hmCollide(capacity uint64, n int) [][]byte {
	byHome := map[uint64][][]byte{}
	for i := uint32(0); ; i++ {
		k := hmKey(i)
		h := layout.HashMapHash(k) & (capacity - 1)
		byHome[h] = append(byHome[h], k)
		if len(byHome[h]) == n {
			return byHome[h]
		}
	}
}

// TestHashMapProbeChains: keys sharing a home bucket occupy consecutive
// buckets; deleting one in the middle leaves a tombstone that lookups of
// the later ones pass, and the next insert of the chain reuses it.
func TestHashMapProbeChains(t *testing.T) {
	const capacity = 16
	m := newHashMap(t, Config{Capacity: capacity, KeySize: 8, ValueSize: 8})
	keys := hmCollide(capacity, 5)
	for i, k := range keys {
		if _, err := m.Put(k, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Delete(keys[1]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	for i, k := range keys {
		n, err := m.Get(k, buf)
		if i == 1 {
			if err != transport.ErrNotFound {
				t.Fatalf("deleted key: %v", err)
			}
			continue
		}
		if err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("key %d past a tombstone: %d %v", i, n, err)
		}
	}
	// Updating a key behind the tombstone must not insert it again there.
	if ins, err := m.Put(keys[3], []byte("u")); err != nil || ins {
		t.Fatalf("update behind a tombstone: %v %v", ins, err)
	}
	if m.Len() != 4 {
		t.Fatalf("Len %d after updating behind a tombstone", m.Len())
	}
	home := layout.HashMapHash(keys[0]) & (capacity - 1)
	raw := m.ctl(home + 1).Load()
	if layout.UnpackHashMapWord(raw).State != layout.BucketTombstone {
		t.Fatalf("bucket after home: %+v", layout.UnpackHashMapWord(raw))
	}
	more := hmCollide(capacity, 6)[5]
	if ins, err := m.Put(more, []byte("m")); err != nil || !ins {
		t.Fatal(ins, err)
	}
	if w := layout.UnpackHashMapWord(m.ctl(home + 1).Load()); w.State != layout.BucketFull {
		t.Fatalf("tombstone on the chain not reused: %+v", w)
	}
}

func TestHashMapReadOnlyAndClose(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8, Participants: 2})
	m.Put([]byte("k"), []byte("v"))
	for _, open := range []func() (*Map, error){
		func() (*Map, error) { return OpenReadOnly(m.Path()) },
		func() (*Map, error) { return Open(m.Path(), shm.ReadOnly()) },
	} {
		ro, err := open()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if n, err := ro.Get([]byte("k"), buf); err != nil || string(buf[:n]) != "v" {
			t.Fatalf("read-only Get: %q %v", buf[:n], err)
		}
		if ro.Participant() != -1 || ro.Len() != 1 || ro.Scan().Problems != 0 {
			t.Fatalf("read-only: participant %d len %d", ro.Participant(), ro.Len())
		}
		if _, err := ro.Put([]byte("k"), nil); err != transport.ErrNotAttached {
			t.Fatalf("read-only Put: %v", err)
		}
		if err := ro.Delete([]byte("k")); err != transport.ErrNotAttached {
			t.Fatalf("read-only Delete: %v", err)
		}
		if _, err := ro.Repair(); err != transport.ErrNotAttached {
			t.Fatalf("read-only Repair: %v", err)
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := ro.Get([]byte("k"), buf); err != transport.ErrNotAttached {
			t.Fatalf("Get after Close: %v", err)
		}
		if err := ro.Range(func(k, v []byte) bool { return true }); err != transport.ErrNotAttached {
			t.Fatalf("Range after Close: %v", err)
		}
	}
	// Entries are reused after Close: a table of 2 serves any number of
	// handles that come and go.
	for i := 0; i < 5; i++ {
		o, err := Open(m.Path())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Put([]byte("k"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		o.Close()
	}
	o := openHashMap(t, m.Path())
	if _, err := Open(m.Path()); !errors.Is(err, transport.ErrTooManyPeers) {
		t.Fatalf("third handle in a table of 2: %v", err)
	}
	o.Close()
	if _, err := transport.OpenRing(m.Path()); !errors.Is(err, layout.ErrWrongKind) {
		t.Fatalf("opened a hash map as a ring: %v", err)
	}
	if _, err := Open(hashMapPath(t)); err == nil {
		t.Fatal("opened a missing file")
	}
}

// TestHashMapConcurrentWriters: goroutines on one shared handle and on
// handles of their own update, delete and re-insert a small set of keys
// while readers Get and Range them. No read may see a torn value or a
// value of another key; afterwards no key is in two buckets and every
// key's value is the last one some writer stored.
func TestHashMapConcurrentWriters(t *testing.T) {
	const keys, vs = 12, 4096
	ops := 30000
	if proctest.RaceEnabled {
		ops = 4000
	}
	m := newHashMap(t, Config{Capacity: 32, KeySize: 16, ValueSize: vs, Participants: 8})
	own := []*Map{m, m, openHashMap(t, m.Path()), openHashMap(t, m.Path())} // two goroutines share m
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		mu      sync.Mutex
		lastOps = map[uint32][]string{} // key -> each writer's last op on it
		fail    = make(chan error, 16)
	)
	report := func(err error) {
		select {
		case fail <- err:
		default:
		}
		stop.Store(true)
	}
	for w, h := range own {
		wg.Add(1)
		go func(w int, h *Map) {
			defer wg.Done()
			last := map[uint32]string{}
			for i := 0; i < ops && !stop.Load(); i++ {
				k := uint32((i*7 + w*3) % keys)
				if i%5 == 4 {
					err := h.Delete(hmKey(k))
					if err != nil && err != transport.ErrNotFound {
						report(err)
						return
					}
					last[k] = "absent"
					continue
				}
				v := hmValue(k, uint16(w), uint32(i), vs)
				if _, err := h.Put(hmKey(k), v); err != nil {
					report(err)
					return
				}
				last[k] = string(v)
			}
			mu.Lock()
			for k, v := range last {
				lastOps[k] = append(lastOps[k], v)
			}
			mu.Unlock()
		}(w, h)
	}
	var readers sync.WaitGroup
	expect := func(k uint32, v []byte) error {
		gk, _, _, err := hmCheckValue(v)
		if err == nil && gk != k {
			err = fmt.Errorf("key %d holds a value of key %d", k, gk)
		}
		return err
	}
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func(r int) {
			defer readers.Done()
			h := own[2+r]
			buf := make([]byte, vs)
			for !stop.Load() {
				for k := uint32(0); k < keys; k++ {
					n, err := h.Get(hmKey(k), buf)
					if err == transport.ErrNotFound {
						continue
					}
					if err == nil {
						err = expect(k, buf[:n])
					}
					if err != nil {
						report(err)
						return
					}
				}
				if err := h.Range(func(key, v []byte) bool {
					var k uint32
					if _, err := fmt.Sscanf(string(key), "key-%d", &k); err != nil {
						report(fmt.Errorf("Range key %q", key))
						return false
					}
					if err := expect(k, v); err != nil {
						report(err)
						return false
					}
					return true
				}); err != nil {
					report(err)
				}
			}
		}(r)
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
	seen := map[string]bool{}
	if err := m.Range(func(k, v []byte) bool {
		if seen[string(k)] {
			t.Errorf("key %q in two buckets", k)
		}
		seen[string(k)] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, vs)
	for k, lasts := range lastOps {
		n, err := m.Get(hmKey(k), buf)
		got := "absent"
		if err == nil {
			got = string(buf[:n])
		} else if err != transport.ErrNotFound {
			t.Fatal(err)
		}
		ok := false
		for _, l := range lasts {
			ok = ok || l == got
		}
		if !ok {
			t.Errorf("key %d ends as %q, not the last op of any writer", k, got)
		}
	}
	if s := m.Scan(); s.Problems != 0 || len(s.HomeLocks) != 0 || len(s.Buckets) != 0 || m.Len() != len(seen) {
		t.Fatalf("after the run: %+v, Len %d, %d keys", s, m.Len(), len(seen))
	}
}

// TestHashMapNoDuplicateInserts: in each round, handles start together
// and race to insert the same absent keys, in the same order. Each key
// must be reported inserted exactly once and be in one bucket (a second
// bucket is what two writers that both found the key absent would make).
// Large values make an insert take a few µs of copying between claim and
// publish, so racing writers meet inside it.
func TestHashMapNoDuplicateInserts(t *testing.T) {
	const keys, workers, vs = 4, 4, 16 << 10
	rounds := 300
	if proctest.RaceEnabled {
		rounds = 60
	}
	m := newHashMap(t, Config{Capacity: 16, KeySize: 16, ValueSize: vs, Participants: 8})
	handles := []*Map{m}
	for len(handles) < workers {
		handles = append(handles, openHashMap(t, m.Path()))
	}
	value := make([]byte, vs)
	for r := 0; r < rounds; r++ {
		var inserted [keys]atomic.Int32
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		for _, h := range handles {
			ready.Add(1)
			done.Add(1)
			go func(h *Map) {
				defer done.Done()
				ready.Done()
				<-start
				for k := 0; k < keys; k++ {
					ins, err := h.Put(hmKey(uint32(r*keys+k)), value)
					if err != nil {
						t.Error(err)
						return
					}
					if ins {
						inserted[k].Add(1)
					}
				}
			}(h)
		}
		ready.Wait()
		close(start)
		done.Wait()
		seen := map[string]int{}
		m.Range(func(k, v []byte) bool { seen[string(k)]++; return true })
		for k := range inserted {
			if n, b := inserted[k].Load(), seen[string(hmKey(uint32(r*keys+k)))]; n != 1 || b != 1 {
				t.Fatalf("round %d: key %d reported inserted %d times, in %d buckets", r, k, n, b)
			}
		}
		for k := 0; k < keys; k++ {
			if err := m.Delete(hmKey(uint32(r*keys + k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.Len() != 0 {
		t.Fatalf("Len %d after deleting everything", m.Len())
	}
}

// TestHashMapHomeLockHolders: a home lock held by a live participant is
// waited for (here: it stays held, so the wait ends with
// transport.ErrDeadlineOrClose after homeWaitMax); a word naming no possible
// holder is taken over.
func TestHashMapHomeLockHolders(t *testing.T) {
	m := newHashMap(t, Config{Capacity: 8, KeySize: 8, ValueSize: 8})
	m.homeWaitMax = 30 * time.Millisecond
	o := openHashMap(t, m.Path())
	key := []byte("k")
	home := m.home(layout.HashMapHash(key) & m.mask)
	for _, held := range []uint64{o.tab.MyLock(), m.tab.MyLock()} { // another handle; this handle's other goroutine
		home.Store(held)
		start := time.Now()
		if _, err := m.Put(key, []byte("v")); !errors.Is(err, transport.ErrDeadlineOrClose) {
			t.Fatalf("Put under a live holder: %v", err)
		}
		if err := m.Delete(key); !errors.Is(err, transport.ErrDeadlineOrClose) {
			t.Fatalf("Delete under a live holder: %v", err)
		}
		if d := time.Since(start); d < 2*m.homeWaitMax {
			t.Fatalf("gave up after %v", d)
		}
		if home.Load() != held {
			t.Fatal("the live holder's lock was taken")
		}
	}
	for _, junk := range []uint64{1 << 40, 0xffff, uint64(0x7f)<<16 | 1} { // out of range; no such entry; wrong generation
		home.Store(junk)
		if _, err := m.Put(key, []byte("v")); err != nil {
			t.Fatalf("Put under home lock word %#x: %v", junk, err)
		}
		if home.Load() != 0 {
			t.Fatalf("home lock %#x after Put", home.Load())
		}
	}
	if c := m.Counters(); c.HomeTakeovers != 3 {
		t.Fatalf("counters %+v", c)
	}
}
