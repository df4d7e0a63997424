package main

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// The message-id fixtures (files created with --msg-ids), built like the
// others (fixtures_test.go):
//
//	ring-ids.shm   "one" (id 1), "two" (id 1099511627778, a caller's) and
//	               "three" (id 3) pushed; "one" leased by participant 0
//	               (pid 2147483646), dead, the head past it
//	deque-ids.shm  ownerless: "one" (id 1) returned in slot 0, "two"
//	               (id 2) and "four" (id 4, pushed at position 2 after
//	               the owner popped "three", id 3, from there)
func addIDFixtures(t testing.TB, dir string, fx map[string][]byte) {
	le := binary.LittleEndian
	cfg := fixtureRing
	cfg.MessageIDs = true

	path := filepath.Join(dir, "gen-ring-ids")
	r, err := transport.CreateRing(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, push := range []func() error{
		func() error { return r.TryPush([]byte("one")) },
		func() error { return r.TryPushID([]byte("two"), 1<<40|2) },
		func() error { return r.TryPush([]byte("three")) },
	} {
		if err := push(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b := readFixed(t, path)
	slot, entry, area := fixtureOffsets(t, func(g layout.Geometry) (layout.SlotGeometry, error) {
		l, err := layout.NewRingLayout(g)
		return l.SlotGeometry, err
	})
	clearEntries(b, entry, cfg.Participants)
	le.PutUint64(b[slot(0):], layout.SlotWord{State: layout.SlotLeased, Deliveries: 1, Owner: 1, Length: 3}.Pack())
	le.PutUint64(b[area(layout.RingOffHead):], 1)
	le.PutUint64(b[area(layout.RingOffClaimed):], 1)
	le.PutUint64(b[entry(0)+layout.PeerOffCtl:], layout.PeerCtl{State: layout.PeerActive, Gen: 1, PID: deadPID}.Pack())
	le.PutUint64(b[entry(0)+layout.PeerOffStart:], 987654)
	le.PutUint64(b[entry(0)+layout.PeerOffAttached:], uint64(fixtureCreated+int64(time.Second)))
	fx["ring-ids.shm"] = b

	path = filepath.Join(dir, "gen-deque-ids")
	owner, err := transport.CreateDeque(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, owner.MaxPayload())
	for _, m := range []string{"one", "two", "three"} {
		if err := owner.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if n, id, err := owner.TryPopID(buf); err != nil || string(buf[:n]) != "three" || id != 3 {
		t.Fatalf("pop: %q id %d, %v", buf[:n], id, err)
	}
	if err := owner.TryPush([]byte("four")); err != nil {
		t.Fatal(err)
	}
	thief, err := transport.OpenDeque(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := thief.TryClaim()
	if err != nil || string(l.Data()) != "one" || l.ID() != 1 {
		t.Fatalf("claim: %q id %d, %v", l.Data(), l.ID(), err)
	}
	if err := thief.Release(l); err != nil {
		t.Fatal(err)
	}
	if err := thief.Close(); err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	b = readFixed(t, path)
	clearEntries(b, entry, cfg.Participants)
	fx["deque-ids.shm"] = b
}

// clearEntries clears what closed handles left in the participant table
// (all but the control words), as the other fixtures do.
func clearEntries(b []byte, entry func(uint32) uint64, participants uint32) {
	for i := uint32(0); i <= participants; i++ { // the repairer entry too
		off := entry(i)
		clear(b[off+8 : off+layout.PeerEntrySize])
	}
}
