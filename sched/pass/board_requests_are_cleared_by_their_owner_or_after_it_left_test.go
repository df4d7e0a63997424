package pass

import (
	"testing"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// The cancel board's entries: taken by a request, found by token, freed by
// their owner (one token, or all of a closing client's), or by a sweep once
// the owner's registration has ended; a full board refuses a request; the
// requests hint never counts fewer entries than are in use.
func TestBoardRequestsAreClearedByTheirOwnerOrAfterItLeft(t *testing.T) {
	f := newSchedFiles(t)
	b, err := openBoard(f.submit, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	hb, _, err := heartbeat.OpenOrCreate(f.hb, heartbeat.Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	live, err := hb.Register("live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Unregister()
	leaving, err := hb.Register("leaving")
	if err != nil {
		t.Fatal(err)
	}
	a, z := live.Ticket(), leaving.Ticket()

	if b.has(7) || b.requests.Load() != 0 {
		t.Fatal("a new board has a request")
	}
	e0 := b.epoch.Load()
	if !b.request(a, 7) || !b.request(z, 8) {
		t.Fatal("requests refused on a board with room")
	}
	if b.epoch.Load() == e0 {
		t.Fatal("a request did not bump the epoch")
	}
	if b.request(a, 9) {
		t.Fatal("a request taken on a full board")
	}
	if !b.has(7) || !b.has(8) || b.has(9) || b.requests.Load() != 2 {
		t.Fatalf("has 7 %v, 8 %v, 9 %v, requests %d", b.has(7), b.has(8), b.has(9), b.requests.Load())
	}
	b.clear(z, 7) // not z's: nothing happens
	if !b.has(7) {
		t.Fatal("another owner cleared a request")
	}
	if n := b.sweep(hb); n != 0 {
		t.Fatalf("sweep freed %d entries of live owners", n)
	}
	if err := leaving.Unregister(); err != nil {
		t.Fatal(err)
	}
	if n := b.sweep(hb); n != 1 || b.has(8) || !b.has(7) {
		t.Fatalf("sweep after the owner left freed %d (has 8 %v, 7 %v)", n, b.has(8), b.has(7))
	}
	b.clear(a, 7)
	if b.has(7) || b.requests.Load() != 0 {
		t.Fatalf("after clear: has 7 %v, requests %d", b.has(7), b.requests.Load())
	}
	// A request half-written by a client that died between taking the
	// entry and writing the token: a sweep frees it once the client's
	// registration has ended.
	b.requests.Add(1)
	b.owner(0).Store(ownerWord(z))
	if n := b.sweep(hb); n != 1 || b.owner(0).Load() != 0 {
		t.Fatalf("half-written entry: sweep freed %d", n)
	}
	for _, tok := range []uint64{11, 12} {
		if !b.request(a, tok) {
			t.Fatal("refused after entries were freed")
		}
	}
	b.clearOwner(a)
	if b.has(11) || b.has(12) || b.requests.Load() != 0 {
		t.Fatalf("clearOwner left requests: %d", b.requests.Load())
	}
}
