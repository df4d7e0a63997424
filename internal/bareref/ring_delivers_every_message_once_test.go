package bareref

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// aligned returns n zeroed bytes starting on a cache line, as a mapping is.
func aligned(n int) []byte {
	b := make([]byte, n+cacheLine)
	off := cacheLine - int(uintptr(unsafe.Pointer(&b[0]))%cacheLine)
	if off == cacheLine {
		off = 0
	}
	return b[off : off+n]
}

func TestGeometryIsChecked(t *testing.T) {
	for _, c := range []struct {
		slots, size int
		ok          bool
	}{
		{8, 64, true}, {2, 16, true}, {3, 64, false}, {1, 64, false},
		{8, 60, false}, {8, 8, false}, {8, 272, false}, {8, 256, true},
	} {
		_, err := Init(aligned(Size(8, 264)), c.slots, c.size)
		if (err == nil) != c.ok {
			t.Errorf("Init(%d, %d): err %v, want ok=%v", c.slots, c.size, err, c.ok)
		}
	}
	if _, err := Init(aligned(Size(8, 64)-1), 8, 64); err == nil {
		t.Error("Init accepted memory one byte short")
	}
}

func TestFullAndEmptyAreReported(t *testing.T) {
	r, err := Init(aligned(Size(4, 64)), 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, ok := r.TryPop(buf); ok {
		t.Fatal("pop from an empty ring succeeded")
	}
	for lap := 0; lap < 3; lap++ {
		for i := 0; i < 4; i++ {
			if !r.TryPush([]byte{byte(lap), byte(i)}) {
				t.Fatalf("lap %d push %d refused", lap, i)
			}
		}
		if r.TryPush([]byte{9}) {
			t.Fatalf("lap %d: push into a full ring succeeded", lap)
		}
		for i := 0; i < 4; i++ {
			n, ok := r.TryPop(buf)
			if !ok || !bytes.Equal(buf[:n], []byte{byte(lap), byte(i)}) {
				t.Fatalf("lap %d pop %d: %v %x", lap, i, ok, buf[:n])
			}
		}
	}
	if got := r.TryPush(make([]byte, 100)); !got {
		t.Fatal("long push refused")
	}
	if n, _ := r.TryPop(buf); n != r.MaxPayload() {
		t.Fatalf("long message came out %d bytes, want it cut to %d", n, r.MaxPayload())
	}
}

// Two producers and two consumers: every message comes out exactly once.
func TestConcurrentMessagesComeOutExactlyOnce(t *testing.T) {
	mem := aligned(Size(16, 64))
	if _, err := Init(mem, 16, 64); err != nil {
		t.Fatal(err)
	}
	const per = 20000
	var seen [2][per]atomic.Int32
	var taken atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			msg := make([]byte, 16)
			for i := 0; i < per; i++ {
				binary.LittleEndian.PutUint64(msg, uint64(p))
				binary.LittleEndian.PutUint64(msg[8:], uint64(i))
				for !v.TryPush(msg) {
					runtime.Gosched()
				}
			}
		}(p)
	}
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			buf := make([]byte, 64)
			for taken.Load() < 2*per {
				n, ok := v.TryPop(buf)
				if !ok {
					runtime.Gosched()
					continue
				}
				p := binary.LittleEndian.Uint64(buf)
				i := binary.LittleEndian.Uint64(buf[8:])
				if n != 16 || p > 1 || i >= per {
					t.Errorf("bad message %x", buf[:n])
					taken.Store(2 * per)
					return
				}
				seen[p][i].Add(1)
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	for p := range seen {
		for i := range seen[p] {
			if n := seen[p][i].Load(); n != 1 {
				t.Fatalf("message %d of producer %d came out %d times", i, p, n)
			}
		}
	}
}
