package gather

import (
	"testing"
	"time"
)

// BenchmarkAllGatherRound2Proc measures one shared-memory all-gather round
// of two words between this process and a child process that answers
// every round at once.
func BenchmarkAllGatherRound2Proc(b *testing.B) {
	path := fairShmPath(b)
	ag, err := Create(path, Config{Participants: 2, MaxWords: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer ag.Close()
	m := joinGather(b, ag, 0, Timeout(30*time.Second))
	child := startFairChild(b, "echo", path, 1)
	buf := make([]uint32, 0, 4)
	round := func(w uint32) {
		out, err := m.AllGather(buf[:0], []uint32{w, 0})
		if err != nil {
			b.Fatal(err)
		}
		if out[2] != 1 {
			b.Fatalf("round returned %v", out)
		}
	}
	round(1) // wait for the child to join
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		round(uint32(i))
	}
	b.StopTimer()
	round(fairStopWord)
	child.MustSucceed(b)
}
