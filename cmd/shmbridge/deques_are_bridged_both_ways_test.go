package main

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// Deques work as rings do: out claims from deque A's top (a thief's
// leases), in owns deque B (it adopts it) and pushes at its bottom. Each
// bridge is killed once (out after its PubAcks, in after a push) and
// restarted: the stream holds every message once, B gets every message,
// each copy with its one id.
func TestDequesAreBridgedBothWays(t *testing.T) {
	const n = 1500
	srv := startServer(t)
	js := srv.client(t)
	dir := t.TempDir()
	cfg := transport.DequeConfig{Capacity: 2048, DeliveryLimit: 15, MessageIDs: true}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	da, err := transport.CreateDeque(a, cfg) // the test owns A and pushes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { da.Close() })
	db, err := transport.CreateDeque(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Disown(); err != nil { // B is the in bridge's to own; the test steals
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range uint64(n) {
		if err := da.Push(ctx, makeMsg(i)); err != nil {
			t.Fatal(err)
		}
	}
	outA := outArgs(srv, a, "DQ", "dq.msgs", "--batch", "64", "--in-flight", "1")
	inB := inArgs(srv, b, "DQ", "dq.msgs", "--batch", "64")
	startBridge(t, proctest.Arm("bridge.out.after-puback", 5), outA...).waitKilledAt(t, "bridge.out.after-puback")
	startBridge(t, proctest.Arm("bridge.in.after-push", 300), inB...).waitKilledAt(t, "bridge.in.after-push")
	out := startBridge(t, nil, outA...)
	in := startBridge(t, nil, inB...)

	got := newTally()
	for got.distinct() < n {
		l, err := db.Claim(ctx)
		if err != nil {
			t.Fatalf("%d of %d arrived in deque B: %v", got.distinct(), n, err)
		}
		got.add(t, l.Data(), strconv.FormatUint(l.ID(), 10))
		if err := db.Ack(l); err != nil {
			t.Fatal(err)
		}
	}
	got.check(t, n)
	got.idsDistinct(t)
	ost := out.stop(t)
	in.stop(t)
	if ost.Counters["duplicates"] != 64 || ost.Counters["redelivered"] != 64 {
		t.Fatalf("out counters %v: want the dead bridge's 64 republished and dropped by the window", ost.Counters)
	}
	stream := readStream(t, js, "DQ")
	if dups := stream.check(t, n); dups != 0 {
		t.Fatalf("the stream stores %d duplicates", dups)
	}
	wantMsgIDsOf(t, stream, da.FileID())
}
