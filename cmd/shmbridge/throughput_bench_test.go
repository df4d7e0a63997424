package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Throughput of the bridge against the plain client in the same run, on
// a NATS server in this process over loopback TCP (docs/bench.md):
//
//	go test -run '^$' -bench . -benchtime 200000x ./cmd/shmbridge
//
// Each op is one message. Out: the test pushes into ring A while a
// shmbridge out process publishes it (ns/op from the first push to the
// last lease acked); the plain client publishes asynchronously with a
// Nats-Msg-Id and awaits every PubAck. In: a shmbridge in process pushes
// a filled stream into ring B while the test pops it; the plain client
// fetches and acks the same way without a ring.

func BenchmarkOutBridge(b *testing.B) {
	srv := startServer(b)
	a := newRing(b, 4096)
	ra := openRing(b, a)
	out := startBridge(b, nil, outArgs(srv, a, "BO", "bo.msgs", append([]string{"--memory"}, strings.Fields(os.Getenv("BENCH_ARGS"))...)...)...)
	out.waitLine(b, "bridging out:")
	b.ResetTimer()
	produceAsync(b, ra, 0, uint64(b.N))
	waitFor(b, "every lease acked", func() bool { return ra.Counters().Acked >= uint64(b.N) })
	b.StopTimer()
	out.stop(b)
}

func BenchmarkOutPlainAsyncPublish(b *testing.B) {
	srv := startServer(b)
	js := srv.client(b)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BP", Subjects: []string{"bp.msgs"}, Storage: jetstream.MemoryStorage, Duplicates: 2 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := js.PublishAsync("bp.msgs", makeMsg(uint64(i)), jetstream.WithMsgID(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("PubAcks not all back")
	}
}

func BenchmarkInBridge(b *testing.B) {
	srv := startServer(b)
	js := srv.client(b)
	fillStream(b, js, "BI", "bi.msgs", 0, uint64(b.N))
	rb := newRing(b, 4096)
	r := openRing(b, rb)
	b.ResetTimer()
	in := startBridge(b, nil, inArgs(srv, rb, "BI", "bi.msgs")...)
	got := newTally()
	drainRing(b, r, got, b.N)
	b.StopTimer()
	in.stop(b)
}

func BenchmarkInPlainPullConsumer(b *testing.B) {
	srv := startServer(b)
	js := srv.client(b)
	fillStream(b, js, "BC", "bc.msgs", 0, uint64(b.N))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cons, err := js.CreateConsumer(ctx, "BC", jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for got := 0; got < b.N; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			if _, err := parseMsg(m.Data()); err != nil {
				b.Fatal(err)
			}
			_ = m.Ack()
			got++
		}
	}
}

// BenchmarkRingToRingLatency sends one message at a time ring A → out →
// JetStream → in → ring B and reports the percentiles of the time from
// the push into A to the pop from B (each op one message).
func BenchmarkRingToRingLatency(b *testing.B) {
	srv := startServer(b)
	a, bb := newRing(b, 256), newRing(b, 256)
	ra, rb := openRing(b, a), openRing(b, bb)
	out := startBridge(b, nil, outArgs(srv, a, "LAT", "lat.msgs", "--memory")...)
	out.waitLine(b, "bridging out:")
	in := startBridge(b, nil, inArgs(srv, bb, "LAT", "lat.msgs")...)
	in.waitLine(b, "bridging in:")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	buf := make([]byte, rb.MaxPayload())
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := ra.Push(ctx, makeMsg(uint64(i))); err != nil {
			b.Fatal(err)
		}
		n, err := rb.Pop(ctx, buf)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if got, err := parseMsg(buf[:n]); err != nil || got != uint64(i) {
			b.Fatalf("popped %d (%v), want %d", got, err, i)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	out.stop(b)
	in.stop(b)
}

// BenchmarkPlainPublishConsumeLatency is the plain client's counterpart:
// a synchronous publish (awaiting its PubAck), then the message taken
// from a durable pull consumer (Messages, acked), one at a time.
func BenchmarkPlainPublishConsumeLatency(b *testing.B) {
	srv := startServer(b)
	js := srv.client(b)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PL", Subjects: []string{"pl.msgs"}, Storage: jetstream.MemoryStorage}); err != nil {
		b.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "PL", jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := js.Publish(ctx, "pl.msgs", makeMsg(uint64(i)), jetstream.WithMsgID(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		_ = m.Ack()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
