package transport

import "testing"

// What message ids cost on the per-message path: BenchmarkTryPushTryPop's
// loop on a ring created with ids, with the plain calls (the position's
// id stamped and not read back) and with the id calls (the caller's id
// stamped, the id returned). A ring without ids pays one test of a field
// cached at open (BenchmarkTryPushTryPop itself).

func BenchmarkRingIDsTryPushTryPop(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024, MessageIDs: true})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := r.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRingTryPushIDTryPopID(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024, MessageIDs: true})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	id := uint64(0)
	for b.Loop() {
		id++
		if err := r.TryPushID(benchMsg, id); err != nil {
			b.Fatal(err)
		}
		if _, got, err := r.TryPopID(buf); err != nil || got != id {
			b.Fatalf("popped id %d, pushed %d: %v", got, id, err)
		}
	}
}
