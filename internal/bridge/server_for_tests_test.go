package bridge

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/internal/bridge/journal"
	"github.com/shmkit/shmkit/transport"
)

// testTimeout bounds a test's waits for conditions: long, for loaded
// machines; a passing test never waits it out.
const testTimeout = 60 * time.Second

// inProcessServer is a JetStream server in the test process, reached
// without a socket, and a Conn on it.
func inProcessServer(t *testing.T) (*Conn, jetstream.JetStream, *Stats) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(testTimeout) {
		t.Fatal("server not ready")
	}
	stats := &Stats{}
	conn := &Conn{stats: stats, up: make(chan struct{})}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	conn.Conn = nc
	conn.setUp(true)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return conn, js, stats
}

// idRing is a ring with message ids in a temporary directory.
func idRing(t *testing.T) (*transport.Ring, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring")
	r, err := transport.CreateRing(path, transport.RingConfig{Capacity: 16, MessageIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	return r, path
}

// runOutUntil runs an out bridge on r until cond holds or Run returns
// by itself, and returns Run's error.
func runOutUntil(t *testing.T, ctx context.Context, r *transport.Ring, path string, conn *Conn, js jetstream.JetStream, window time.Duration, stats *Stats, cond func() bool) error {
	t.Helper()
	j, err := journal.Open(path+".j", r.FileID())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	out := NewOut(ringSource{r}, conn, js, j, OutOptions{Subject: "r", DupWindow: window}, stats)
	done := make(chan error, 1)
	go func() { done <- out.Run(rctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			t.Fatalf("timed out: %d leases acked", stats.LeasesAcked.Load())
		case <-time.After(5 * time.Millisecond):
			if cond() {
				stop()
				return <-done
			}
		}
	}
}
