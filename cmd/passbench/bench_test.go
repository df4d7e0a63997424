package main

import (
	"testing"

	"github.com/shmkit/shmkit/shm"
)

// What every message costs passbench itself, whatever the transport: the
// producer reads the clock, stamps and seals; the consumer reads the clock,
// verifies, marks the message seen and records its latency. docs/bench.md
// quotes these.

func BenchmarkStamp(b *testing.B) {
	m := newMsg(64, 1)
	for i := 0; b.Loop(); i++ {
		stamp(m, uint64(i), shm.MonoNow())
	}
}

func BenchmarkConsumerSide(b *testing.B) {
	msgs := make([][]byte, 1024)
	for i := range msgs {
		msgs[i] = newMsg(64, 0)
		stamp(msgs[i], uint64(i), shm.MonoNow())
	}
	seen := newSeenSet(1, nil)
	rec := newRecorder()
	for i := 0; b.Loop(); i++ {
		m := msgs[i%len(msgs)]
		now := shm.MonoNow()
		h, err := parseMsg(m, 64)
		if err != nil || !seen.add(h.producer, h.seq) {
			b.Fatal("bad message")
		}
		rec.record(now - h.sent)
	}
}

// Recording one latency: in a histogram of the process's own (popping
// consumers), and in a shared one (leased consumers, whose latencies
// must survive them).
func BenchmarkRecordLatency(b *testing.B) {
	b.Run("recorder", func(b *testing.B) {
		r := newRecorder()
		for i := 0; b.Loop(); i++ {
			r.record(int64(100000 + i%4096*37))
		}
	})
	b.Run("shared", func(b *testing.B) {
		l, err := newSharedLatency(1)
		if err != nil {
			b.Fatal(err)
		}
		defer l.close()
		w, err := l.writer(0)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			w.record(int64(100000 + i%4096*37))
		}
	})
}
