package main

import (
	"context"
	"os"
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
