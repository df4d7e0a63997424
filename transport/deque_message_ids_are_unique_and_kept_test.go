package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// A deque created with message ids numbers its pushes from a counter in
// the file (next_id), not by position: the owner pops back below a
// position and pushes there again, and the new message gets a new id. The
// id stays with the message in its slot when it is handed back (Release,
// a dead consumer) and taken again, and every way out reports it. A push
// killed after taking a number leaves a gap (deque_message_id_crash_test.go).

func TestDequeWithoutIDsRefusesIDCalls(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	if d.MessageIDs() || d.MaxPayload() != 56 {
		t.Fatalf("MessageIDs %v, MaxPayload %d; want false, 56", d.MessageIDs(), d.MaxPayload())
	}
	if err := d.TryPushID([]byte("x"), 5); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("TryPushID: %v", err)
	}
	if err := d.PushID(context.Background(), []byte("x"), 5); !errors.Is(err, ErrNoMessageIDs) {
		t.Fatalf("PushID: %v", err)
	}
	if err := d.TryPush([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, id, err := d.TryPopID(buf); err != nil || string(buf[:n]) != "x" || id != 0 {
		t.Fatalf("TryPopID: %q id %d, %v", buf[:n], id, err)
	}
	if c := d.Counters(); c.NextMessageID != 0 {
		t.Fatalf("next_id %d in a deque without ids", c.NextMessageID)
	}
}

func TestDequeMessageIDsAreUniqueAndKept(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, MessageIDs: true})
	thief := openThief(t, d)
	if !d.MessageIDs() || d.MaxPayload() != 48 || d.FileID() != d.ID() || d.FileID() == 0 {
		t.Fatalf("MessageIDs %v MaxPayload %d FileID %d ID %d", d.MessageIDs(), d.MaxPayload(), d.FileID(), d.ID())
	}
	if h := d.Header(); h.Geometry.Params[2] != layout.RingOptMessageIDs {
		t.Fatalf("options word %#x", h.Geometry.Params[2])
	}
	if err := d.TryPushID([]byte("x"), 0); !errors.Is(err, ErrZeroID) {
		t.Fatalf("TryPushID(0): %v", err)
	}
	if err := thief.TryPushID([]byte("x"), 9); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a thief's TryPushID: %v", err)
	}
	buf := make([]byte, 64)
	push := func(msg string) {
		t.Helper()
		if err := d.TryPush([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// a=1 b=2 c=3 at positions 0..2; the owner pops c back and pushes d
	// at position 2 again: id 4, not 3.
	push("a")
	push("b")
	push("c")
	if n, id, err := d.TryPopID(buf); err != nil || string(buf[:n]) != "c" || id != 3 {
		t.Fatalf("owner's pop: %q id %d, %v", buf[:n], id, err)
	}
	push("d")
	if err := d.PushID(context.Background(), bytes.Repeat([]byte{0xee}, 48), 1<<62); err != nil {
		t.Fatal(err)
	}
	if n, err := d.TryPushBatch([][]byte{[]byte("e"), []byte("f")}); n != 2 || err != nil {
		t.Fatalf("TryPushBatch: %d, %v", n, err)
	}
	if c := d.Counters(); c.NextMessageID != 6 {
		t.Fatalf("next_id %d after 6 numbered pushes", c.NextMessageID)
	}
	want := []struct {
		data string
		id   uint64
	}{{"a", 1}, {"b", 2}, {"d", 4}, {string(bytes.Repeat([]byte{0xee}, 48)), 1 << 62}, {"e", 5}, {"f", 6}}
	peeked, err := thief.Peek(10)
	if err != nil || len(peeked) != len(want) {
		t.Fatalf("Peek: %+v, %v", peeked, err)
	}
	for i, p := range peeked {
		if string(p.Data) != want[i].data || p.ID != want[i].id {
			t.Fatalf("Peek[%d] = %q id %d, want %q id %d", i, p.Data, p.ID, want[i].data, want[i].id)
		}
	}
	// A thief steals a; claims b, hands it back, and claims it again:
	// the same id. Then a batch claim takes the rest with their ids.
	if n, id, err := thief.TryPopID(buf); err != nil || string(buf[:n]) != "a" || id != 1 {
		t.Fatalf("steal: %q id %d, %v", buf[:n], id, err)
	}
	l, err := thief.TryClaim()
	if err != nil || string(l.Data()) != "b" || l.ID() != 2 {
		t.Fatalf("claim: %q id %d, %v", l.Data(), l.ID(), err)
	}
	if err := thief.Release(l); err != nil {
		t.Fatal(err)
	}
	leases := make([]Lease, 8)
	n, err := thief.TryClaimBatch(leases)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, le := range leases[:n] {
		got[string(le.Data())] = le.ID()
	}
	if err := thief.AckBatch(leases[:n]); err != nil {
		t.Fatal(err)
	}
	for {
		l, err := thief.TryClaim() // the returned b, taken once the rest is gone
		if err == ErrEmpty {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[string(l.Data())] = l.ID()
		thief.Ack(l)
	}
	for _, w := range want[1:] {
		if got[w.data] != w.id {
			t.Fatalf("%q taken with id %d, want %d (all %v)", w.data, got[w.data], w.id, got)
		}
	}
	// The counter is in the file: a new owner after this one closes goes on
	// from it.
	d.Close()
	if _, err := thief.Adopt(); err != nil {
		t.Fatal(err)
	}
	if err := thief.TryPush([]byte("g")); err != nil {
		t.Fatal(err)
	}
	if n, id, err := thief.PopID(context.Background(), buf); err != nil || string(buf[:n]) != "g" || id != 7 {
		t.Fatalf("new owner's message: %q id %d, %v; want id 7", buf[:n], id, err)
	}
}
