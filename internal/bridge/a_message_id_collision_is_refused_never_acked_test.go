package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/transport"
)

// Two different messages of one ring with one id (a plain push stamps
// position+1, a caller's PushID stamped the same number): the server
// drops the second as a duplicate of the first; the out bridge reads the
// stored copy back, sees another message, stops with ErrIDCollision and
// never acks the lease: the message stays in the ring. Before the check,
// the lease was acked as a duplicate and the message was gone.
func TestAMessageIDCollisionIsRefusedNeverAcked(t *testing.T) {
	conn, js, stats := inProcessServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	info, err := EnsureStream(ctx, js, StreamOptions{Stream: "R", Subject: "r", Create: true, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	r, path := idRing(t)
	if err := r.Push(ctx, []byte("local producer")); err != nil {
		t.Fatal(err)
	}
	if err := r.PushID(ctx, []byte("a caller's id 1"), 1); err != nil {
		t.Fatal(err)
	}
	err = runOutUntil(t, ctx, r, path, conn, js, info.Config.Duplicates, stats, func() bool { return stats.LeasesAcked.Load() >= 2 })
	if !errors.Is(err, ErrIDCollision) {
		t.Fatalf("Run: %v; want ErrIDCollision", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), MsgID(r.FileID(), 1)) {
		t.Errorf("Run: %q; want the ring's path and the message id", err)
	}
	// Both are of one batch, whose leases are acked together: none is.
	if got := stats.LeasesAcked.Load(); got != 0 {
		t.Errorf("%d leases acked, want 0 (the batch holding the collision)", got)
	}
	if got := stats.Duplicates.Load(); got != 0 {
		t.Errorf("%d duplicates counted, want 0 (a collision is not one)", got)
	}
	// Closing the handle hands the held leases back: both are there.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2, err := transport.OpenRing(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	buf := make([]byte, r2.MaxPayload())
	var got []string
	for range 2 {
		n, _, err := r2.PopID(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(buf[:n]))
	}
	if got[0] != "local producer" || got[1] != "a caller's id 1" {
		t.Fatalf("after the refusal the ring gives %q; want both messages", got)
	}
}

// A duplicate whose stored copy is the same message (published by an
// earlier life whose journal was lost) is a true duplicate: counted, and
// its lease acked.
func TestATrueDuplicateWithoutAJournalIsAcked(t *testing.T) {
	conn, js, stats := inProcessServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	info, err := EnsureStream(ctx, js, StreamOptions{Stream: "R", Subject: "r", Create: true, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	r, path := idRing(t)
	defer r.Close()
	if err := r.Push(ctx, []byte("m1")); err != nil {
		t.Fatal(err)
	}
	// The earlier life's publish of the same message, under its id.
	m := nats.NewMsg("r")
	m.Header.Set(jetstream.MsgIDHeader, MsgID(r.FileID(), 1))
	m.Data = []byte("m1")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := runOutUntil(t, ctx, r, path, conn, js, info.Config.Duplicates, stats, func() bool { return stats.LeasesAcked.Load() >= 1 }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if stats.Duplicates.Load() != 1 || stats.Published.Load() != 0 {
		t.Errorf("duplicates %d published %d; want 1 and 0", stats.Duplicates.Load(), stats.Published.Load())
	}
}
