package transport

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// Peek shows the queued messages in the order consumers take them and
// takes none: the file's bytes are the same after it, every message is
// still delivered, and it needs only a read-only handle.
func TestPeekNeverTakesAMessage(t *testing.T) {
	dir := t.TempDir()
	r, err := CreateRing(filepath.Join(dir, "r.shm"), RingConfig{Capacity: 8, SlotSize: 64, Participants: 4, DeliveryLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id := uint64(1); id <= 5; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := r.TryClaim() // 1 is leased: not queued any more
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenRingReadOnly(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		max  int
		want []uint64
	}{{10, []uint64{2, 3, 4, 5}}, {2, []uint64{2, 3}}, {0, nil}} {
		got, err := ro.Peek(tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if ids := peekedIDs(t, got); !slices.Equal(ids, tc.want) {
			t.Fatalf("Peek(%d) = %v, want %v", tc.max, ids, tc.want)
		}
		for i, p := range got {
			if p.Position != uint64(i+1) || p.Slot != uint64(i+1) || p.State != layout.SlotReady || p.Deliveries != 0 {
				t.Errorf("message %d: %+v, want position and slot %d, ready, 0 deliveries", i, p, i+1)
			}
		}
	}
	after, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("Peek changed the file")
	}
	// The lease's message, once released, is queued again and shows again.
	if err := r.Release(l); err != nil {
		t.Fatal(err)
	}
	got, err := ro.Peek(10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := peekedIDs(t, got); !slices.Equal(ids, []uint64{2, 3, 4, 5, 1}) || got[4].Deliveries != 1 {
		t.Fatalf("after the release: %v (last %+v), want [2 3 4 5 1], the last delivered once", ids, got[len(got)-1])
	}
	// PeekSlot previews a leased message (inspect --slots).
	l, err = r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	raw := r.slotWord(l.Slot()).Load()
	data, ok, err := ro.PeekSlot(l.Slot(), raw)
	if err != nil || !ok || !bytes.Equal(data, encodeMsg(2)) {
		t.Fatalf("PeekSlot of the leased slot = %x, %v, %v; want message 2", data, ok, err)
	}
	if _, ok, _ := ro.PeekSlot(l.Slot(), raw^1); ok {
		t.Fatal("PeekSlot copied a slot whose word is not the one given")
	}
}

// The deque's order: [top, bottom) from the top, then the returned
// messages.
func TestDequePeekListsReturnedMessagesLast(t *testing.T) {
	d, err := CreateDeque(filepath.Join(t.TempDir(), "d.shm"), DequeConfig{Capacity: 8, SlotSize: 64, Participants: 4, DeliveryLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for id := uint64(1); id <= 4; id++ {
		if err := d.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := d.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(l); err != nil { // 1 is returned
		t.Fatal(err)
	}
	ro, err := OpenDequeReadOnly(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Peek(10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := peekedIDs(t, got); !slices.Equal(ids, []uint64{2, 3, 4, 1}) {
		t.Fatalf("Peek = %v, want [2 3 4 1]", ids)
	}
	if last := got[3]; last.State != layout.SlotReturned || last.Position != 0 || last.Deliveries != 1 {
		t.Fatalf("the returned message: %+v, want returned, position 0, 1 delivery", last)
	}
	// What Peek shows is what the takes deliver.
	var taken []uint64
	buf := make([]byte, d.MaxPayload())
	for {
		n, err := d.TrySteal(buf)
		if err == ErrEmpty {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id, err := decodeMsg(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, id)
	}
	if !slices.Equal(taken, []uint64{2, 3, 4, 1}) {
		t.Fatalf("took %v, want what Peek showed", taken)
	}
}

// A peek running beside producers and consumers never returns a torn
// payload: a message overwritten during the copy is left out.
func TestPeekBesideTrafficReturnsWholeMessages(t *testing.T) {
	r, err := CreateRing(filepath.Join(t.TempDir(), "r.shm"), RingConfig{Capacity: 8, SlotSize: 64, Participants: 4, DeliveryLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ro, err := OpenRingReadOnly(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	const n = 20000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for id := uint64(1); id <= n; id++ {
			if err := r.Push(ctx, encodeMsg(id)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, r.MaxPayload())
		for i := 0; i < n; i++ {
			if _, err := r.Pop(ctx, buf); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for peeks := 0; ; peeks++ {
		select {
		case <-done:
			if peeks == 0 {
				t.Fatal("no peek ran")
			}
			return
		default:
		}
		got, err := ro.Peek(8)
		if err != nil {
			t.Fatal(err)
		}
		prev := uint64(0)
		for _, p := range got {
			if p.State != layout.SlotReady {
				continue
			}
			id, err := decodeMsg(p.Data)
			if err != nil {
				t.Fatalf("torn payload at position %d: %v", p.Position, err)
			}
			if id != p.Position+1 || id <= prev {
				t.Fatalf("message %d at position %d (after %d)", id, p.Position, prev)
			}
			prev = id
		}
	}
}

func peekedIDs(t *testing.T, ps []Peeked) []uint64 {
	t.Helper()
	var ids []uint64
	for _, p := range ps {
		id, err := decodeMsg(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}
