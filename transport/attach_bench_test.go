package transport

import "testing"

// BenchmarkAttachDetach is the cost of taking and giving back a
// participant entry (OpenRing then Close of a second handle): the entry
// lock's two fcntl calls and the open and mapping themselves. Not a fast
// path; it is here to show what the entry lock adds.
func BenchmarkAttachDetach(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 64, Participants: 4})
	for b.Loop() {
		h, err := OpenRing(r.Path())
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeers is the cost of judging every entry of a 64-entry table
// with one live holder besides this handle (Peers: what Check, inspect
// and a full-table attach read).
func BenchmarkPeers(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 64})
	h, err := OpenRing(r.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for b.Loop() {
		if len(r.Peers()) == 0 {
			b.Fatal("no peers")
		}
	}
}
