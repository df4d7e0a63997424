package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// A ring created with message ids stamps every message with one (a plain
// push: its position+1; TryPushID, PushID, Loan.SetID: the caller's),
// stores it in the slot's last 8 bytes, and reports it on every way out:
// TryPopID, PopID, Lease.ID (single and batch claims), Peek, PeekSlotID.
// A ring without ids refuses the id calls and reports id 0; its payload
// keeps the whole slot but the word.

func TestRingWithoutIDsRefusesIDCallsAndReportsZero(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	if r.MessageIDs() {
		t.Fatal("MessageIDs true for a ring created without")
	}
	if r.MaxPayload() != 56 {
		t.Fatalf("64-byte slot carries %d bytes, want 56", r.MaxPayload())
	}
	if err := r.TryPushID([]byte("x"), 7); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("TryPushID: %v, want ErrNoMessageIDs", err)
	}
	if err := r.PushID(context.Background(), []byte("x"), 7); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("PushID: %v, want ErrNoMessageIDs", err)
	}
	l, err := r.TryLoan(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetID(7); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("Loan.SetID: %v, want ErrNoMessageIDs", err)
	}
	copy(l.Data(), "loan")
	if err := r.Publish(l); err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Pushed != 1 {
		t.Fatalf("refused id calls pushed something: %+v", c)
	}
	full := bytes.Repeat([]byte{0xa5}, 56)
	if err := r.TryPush(full); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Peek(10); err != nil || len(p) != 2 || p[0].ID != 0 || p[1].ID != 0 {
		t.Fatalf("Peek: %+v, %v; want two messages with id 0", p, err)
	}
	buf := make([]byte, 64)
	n, id, err := r.TryPopID(buf)
	if err != nil || string(buf[:n]) != "loan" || id != 0 {
		t.Fatalf("TryPopID: %q id %d, %v", buf[:n], id, err)
	}
	le, err := r.TryClaim()
	if err != nil || le.ID() != 0 || !bytes.Equal(le.Data(), full) {
		t.Fatalf("TryClaim: id %d data % x, %v", le.ID(), le.Data(), err)
	}
}

func TestRingMessageIDsAreStampedAndReported(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, MessageIDs: true})
	if !r.MessageIDs() {
		t.Fatal("MessageIDs false for a ring created with")
	}
	if r.FileID() == 0 || r.FileID() != r.ID() {
		t.Fatalf("FileID %d, ID %d", r.FileID(), r.ID())
	}
	if h := r.Header(); h.Geometry.Params[2] != layout.RingOptMessageIDs {
		t.Fatalf("options word %#x, want %#x", h.Geometry.Params[2], layout.RingOptMessageIDs)
	}
	if r.MaxPayload() != 48 {
		t.Fatalf("64-byte slot with ids carries %d bytes, want 48", r.MaxPayload())
	}
	if err := r.TryPush(make([]byte, 49)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("49 bytes: %v, want ErrTooLarge", err)
	}
	for _, id := range []uint64{0} {
		if err := r.TryPushID([]byte("x"), id); !errors.Is(err, ErrZeroID) {
			t.Fatalf("TryPushID id 0: %v, want ErrZeroID", err)
		}
		if err := r.PushID(context.Background(), []byte("x"), id); !errors.Is(err, ErrZeroID) {
			t.Fatalf("PushID id 0: %v, want ErrZeroID", err)
		}
	}
	// Three laps of pushes and pops: a plain push's id is its position+1,
	// whatever slot it lands in; a full payload leaves the id intact.
	buf := make([]byte, 64)
	for pos := uint64(0); pos < 12; pos++ {
		msg := bytes.Repeat([]byte{byte(pos) | 0x80}, 48)
		var want uint64
		switch pos % 3 {
		case 0:
			want = pos + 1
			if err := r.TryPush(msg); err != nil {
				t.Fatal(err)
			}
		case 1:
			want = 1<<63 | pos*1000
			if err := r.TryPushID(msg, want); err != nil {
				t.Fatal(err)
			}
		case 2:
			want = ^uint64(0) - pos
			if err := r.PushID(context.Background(), msg, want); err != nil {
				t.Fatal(err)
			}
		}
		n, id, err := r.TryPopID(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) || id != want {
			t.Fatalf("position %d: popped % x id %d, %v; want id %d", pos, buf[:n], id, err, want)
		}
	}
	// PopID (blocking) and TryPop (no id) of id messages.
	if err := r.TryPushID([]byte("a"), 42); err != nil {
		t.Fatal(err)
	}
	if n, id, err := r.PopID(context.Background(), buf); err != nil || string(buf[:n]) != "a" || id != 42 {
		t.Fatalf("PopID: %q id %d, %v", buf[:n], id, err)
	}
	if err := r.TryPush([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "b" {
		t.Fatalf("TryPop: %q, %v", buf[:n], err)
	}
}

func TestRingLeasesLoansBatchesAndPeekCarryIDs(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, MessageIDs: true})
	// Positions 0..3: a push, a loan (position's id), a loan with SetID,
	// a batch of two (their positions' ids).
	if err := r.TryPushID([]byte("p"), 1000); err != nil {
		t.Fatal(err)
	}
	l, err := r.TryLoan(1)
	if err != nil {
		t.Fatal(err)
	}
	l.Data()[0] = 'l'
	if err := r.Publish(l); err != nil {
		t.Fatal(err)
	}
	l, err = r.TryLoan(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetID(0); !errors.Is(err, ErrZeroID) {
		t.Fatalf("SetID(0): %v", err)
	}
	if err := l.SetID(2000); err != nil {
		t.Fatal(err)
	}
	l.Data()[0] = 's'
	if err := r.Publish(l); err != nil {
		t.Fatal(err)
	}
	if n, err := r.TryPushBatch([][]byte{[]byte("b0"), []byte("b1")}); n != 2 || err != nil {
		t.Fatalf("TryPushBatch: %d, %v", n, err)
	}
	want := []struct {
		data string
		id   uint64
	}{{"p", 1000}, {"l", 2}, {"s", 2000}, {"b0", 4}, {"b1", 5}}
	peeked, err := r.Peek(10)
	if err != nil || len(peeked) != len(want) {
		t.Fatalf("Peek: %+v, %v", peeked, err)
	}
	for i, p := range peeked {
		if string(p.Data) != want[i].data || p.ID != want[i].id {
			t.Fatalf("Peek[%d] = %q id %d, want %q id %d", i, p.Data, p.ID, want[i].data, want[i].id)
		}
		raw := r.slotWord(p.Slot).Load()
		if data, id, ok, err := r.PeekSlotID(p.Slot, raw); err != nil || !ok || string(data) != want[i].data || id != want[i].id {
			t.Fatalf("PeekSlotID(%d) = %q id %d ok %v, %v", p.Slot, data, id, ok, err)
		}
	}
	// The first by TryClaim, released (re-published in place or
	// requeued: either way the same id), then all by a batch claim.
	first, err := r.TryClaim()
	if err != nil || first.ID() != 1000 {
		t.Fatalf("TryClaim: id %d, %v", first.ID(), err)
	}
	if err := r.Release(first); err != nil {
		t.Fatal(err)
	}
	leases := make([]Lease, 8)
	n, err := r.TryClaimBatch(leases)
	if err != nil || n != len(want) {
		t.Fatalf("TryClaimBatch: %d, %v", n, err)
	}
	got := map[string]uint64{}
	for _, le := range leases[:n] {
		got[string(le.Data())] = le.ID()
	}
	for _, w := range want {
		if got[w.data] != w.id {
			t.Fatalf("batch lease of %q has id %d, want %d (all: %v)", w.data, got[w.data], w.id, got)
		}
	}
	if err := r.AckBatch(leases[:n]); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownOptionBitsAndOtherFormatsAreRefusedAtOpen: a ring or deque
// file whose option word sets a bit this format does not define, with a
// valid checksum, does not open (layout.ErrGeometry), nor does a file of
// format 2 (layout.ErrVersionMismatch): a reader that guessed would take
// an id for payload bytes or the reverse.
func TestUnknownOptionBitsAndOtherFormatsAreRefusedAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		patch func(b []byte)
		want  error
	}{
		{"option bit 1", func(b []byte) { binary.LittleEndian.PutUint32(b[layout.OffParam2:], layout.RingOptMessageIDs|2) }, layout.ErrGeometry},
		{"option bit 31", func(b []byte) { binary.LittleEndian.PutUint32(b[layout.OffParam2:], 1<<31) }, layout.ErrGeometry},
		{"format 2", func(b []byte) { binary.LittleEndian.PutUint16(b[layout.OffMajor:], 2) }, layout.ErrVersionMismatch},
	} {
		for _, deque := range []bool{false, true} {
			path := ringPath(t)
			var err error
			if deque {
				var d *Deque
				d, err = CreateDeque(path, DequeConfig{Capacity: 4, MessageIDs: true})
				if err == nil {
					d.Close()
				}
			} else {
				var r *Ring
				r, err = CreateRing(path, RingConfig{Capacity: 4, MessageIDs: true})
				if err == nil {
					r.Close()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.patch(b)
			binary.LittleEndian.PutUint32(b[layout.OffChecksum:], layout.Checksum(b))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if deque {
				_, err = OpenDeque(path)
			} else {
				_, err = OpenRing(path)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("%s (deque %v): open gave %v, want %v", tc.name, deque, err, tc.want)
			}
		}
	}
}

// TestPushBatchesWithCallersIDs: TryPushBatchID and PushBatchID stamp
// msgs[i] with ids[i] on a ring and on a deque, and refuse, pushing
// nothing, ids of another count, an id 0, and a file without ids.
func TestPushBatchesWithCallersIDs(t *testing.T) {
	msgs := [][]byte{[]byte("x0"), []byte("x1"), []byte("x2")}
	ids := []uint64{900, 901, 1 << 50}
	type pusher struct {
		name      string
		try, wait func([][]byte, []uint64) (int, error)
		pop       func([]byte) (int, uint64, error)
		pushed    func() uint64
	}
	ctx := context.Background()
	ring := newRing(t, RingConfig{Capacity: 8, MessageIDs: true})
	deque := newDeque(t, DequeConfig{Capacity: 8, MessageIDs: true})
	thief := openThief(t, deque)
	plainRing := newRing(t, RingConfig{Capacity: 8})
	plainDeque := newDeque(t, DequeConfig{Capacity: 8})
	for _, p := range []pusher{
		{"ring", ring.TryPushBatchID, func(m [][]byte, i []uint64) (int, error) { return ring.PushBatchID(ctx, m, i) }, ring.TryPopID,
			func() uint64 { return ring.Counters().Pushed }},
		{"deque", deque.TryPushBatchID, func(m [][]byte, i []uint64) (int, error) { return deque.PushBatchID(ctx, m, i) }, thief.TryPopID,
			func() uint64 { return deque.Counters().Pushed }},
	} {
		for _, bad := range []struct {
			ids  []uint64
			want error
		}{{ids[:2], ErrInvalidConfig}, {[]uint64{1, 0, 2}, ErrZeroID}, {nil, ErrInvalidConfig}} {
			for _, call := range []func([][]byte, []uint64) (int, error){p.try, p.wait} {
				if n, err := call(msgs, bad.ids); n != 0 || !errors.Is(err, bad.want) {
					t.Fatalf("%s: ids %v: %d, %v; want 0, %v", p.name, bad.ids, n, err, bad.want)
				}
			}
		}
		if p.pushed() != 0 {
			t.Fatalf("%s: a refused batch pushed %d", p.name, p.pushed())
		}
		for round, call := range []func([][]byte, []uint64) (int, error){p.try, p.wait} {
			if n, err := call(msgs, ids); n != 3 || err != nil {
				t.Fatalf("%s round %d: %d, %v", p.name, round, n, err)
			}
			buf := make([]byte, 64)
			for i := range msgs {
				n, id, err := p.pop(buf)
				if err != nil || string(buf[:n]) != string(msgs[i]) || id != ids[i] {
					t.Fatalf("%s round %d: popped %q id %d, %v; want %q id %d", p.name, round, buf[:n], id, err, msgs[i], ids[i])
				}
			}
		}
	}
	if _, err := plainRing.TryPushBatchID(msgs, ids); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("ring without ids: %v", err)
	}
	if _, err := plainDeque.TryPushBatchID(msgs, ids); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("deque without ids: %v", err)
	}
}
