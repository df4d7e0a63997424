package hashmap

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// The hash map's hot paths (Get hit and miss, Put update, Put insert,
// Delete) allocate nothing: a hash, a few atomics on the mapping and
// copies. The benchmarks report allocations to show it;
// TestHashMapZeroAllocs asserts it.

const (
	hmBenchKeys  = 512
	hmBenchValue = 64
)

// hmBenchMap is a map of 1024 buckets, half full, with 64-byte values, and
// the keys it holds and keys it does not.
func hmBenchMap(tb testing.TB) (m *Map, present, absent [][]byte) {
	m = newHashMap(tb, Config{Capacity: 2 * hmBenchKeys, KeySize: 16, ValueSize: hmBenchValue})
	v := make([]byte, hmBenchValue)
	for i := uint32(0); i < hmBenchKeys; i++ {
		present = append(present, hmKey(i))
		absent = append(absent, hmKey(hmBenchKeys+i))
		if _, err := m.Put(present[i], v); err != nil {
			tb.Fatal(err)
		}
	}
	return m, present, absent
}

func BenchmarkHashMapGetHit(b *testing.B) {
	m, keys, _ := hmBenchMap(b)
	buf := make([]byte, hmBenchValue)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.Get(keys[i%hmBenchKeys], buf); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkHashMapGetMiss(b *testing.B) {
	m, _, keys := hmBenchMap(b)
	buf := make([]byte, hmBenchValue)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.Get(keys[i%hmBenchKeys], buf); err != transport.ErrNotFound {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkHashMapPutUpdate(b *testing.B) {
	m, keys, _ := hmBenchMap(b)
	v := make([]byte, hmBenchValue)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.Put(keys[i%hmBenchKeys], v); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkHashMapPutDeleteInsert: one op is an insert of an absent key
// and its delete (the bucket goes tombstone and is reused).
func BenchmarkHashMapPutDeleteInsert(b *testing.B) {
	m, _, keys := hmBenchMap(b)
	v := make([]byte, hmBenchValue)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%hmBenchKeys]
		if ins, err := m.Put(k, v); err != nil || !ins {
			b.Fatal(ins, err)
		}
		if err := m.Delete(k); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkHashMapGetParallelWithWriter: parallel Gets of the keys one
// writer goroutine keeps updating; readers re-read a bucket that changed
// under them.
func BenchmarkHashMapGetParallelWithWriter(b *testing.B) {
	m, keys, _ := hmBenchMap(b)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		v := make([]byte, hmBenchValue)
		for i := 0; !stop.Load(); i++ {
			v[0] = byte(i)
			if _, err := m.Put(keys[i%hmBenchKeys], v); err != nil {
				b.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, hmBenchValue)
		i := 0
		for pb.Next() {
			if _, err := m.Get(keys[i%hmBenchKeys], buf); err != nil {
				b.Error(err)
				return
			}
			i += 7
		}
	})
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
}

// TestHashMapZeroAllocs asserts that the hot paths allocate nothing.
func TestHashMapZeroAllocs(t *testing.T) {
	m, present, absent := hmBenchMap(t)
	buf := make([]byte, hmBenchValue)
	v := make([]byte, hmBenchValue)
	i := 0
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Get hit", func() {
			if _, err := m.Get(present[i%hmBenchKeys], buf); err != nil {
				t.Fatal(err)
			}
		}},
		{"Get miss", func() {
			if _, err := m.Get(absent[i%hmBenchKeys], buf); err != transport.ErrNotFound {
				t.Fatal(err)
			}
		}},
		{"Put update", func() {
			if _, err := m.Put(present[i%hmBenchKeys], v); err != nil {
				t.Fatal(err)
			}
		}},
		{"Put insert and Delete", func() {
			if _, err := m.Put(absent[i%hmBenchKeys], v); err != nil {
				t.Fatal(err)
			}
			if err := m.Delete(absent[i%hmBenchKeys]); err != nil {
				t.Fatal(err)
			}
		}},
		{"Delete miss", func() {
			if err := m.Delete(absent[i%hmBenchKeys]); err != transport.ErrNotFound {
				t.Fatal(err)
			}
		}},
	} {
		if n := testing.AllocsPerRun(1000, func() { c.f(); i++ }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}
