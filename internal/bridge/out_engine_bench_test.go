package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/internal/bridge/journal"
	"github.com/shmkit/shmkit/transport"
)

// The out engine in one process with an in-process server (no TCP): what
// a message costs the bridge itself, for profiling (-cpuprofile).
func BenchmarkOutEngine(b *testing.B) {
	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: b.TempDir(), DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("not ready")
	}
	stats := &Stats{}
	conn := &Conn{stats: stats, up: make(chan struct{})}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	conn.Conn = nc
	conn.setUp(true)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, err := EnsureStream(ctx, js, StreamOptions{Stream: "B", Subject: "b", Create: true, Memory: true})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "ring")
	r, err := transport.CreateRing(path, transport.RingConfig{Capacity: 4096, MessageIDs: true})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	j, err := journal.Open(path+".j", r.FileID())
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	out := NewOut(ringSource{r}, conn, js, j, OutOptions{Subject: "b", DupWindow: info.Config.Duplicates, Batch: benchInt("BATCH"), InFlight: benchInt("INFLIGHT")}, stats)
	done := make(chan error, 1)
	go func() { done <- out.Run(ctx) }()
	msg := make([]byte, 24)
	b.ResetTimer()
	for range b.N {
		if err := r.Push(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
	for stats.LeasesAcked.Load() < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func benchInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv("BENCH_" + name))
	return n
}
