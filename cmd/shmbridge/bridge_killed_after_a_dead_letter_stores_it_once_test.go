package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/internal/proctest"
)

// An in bridge SIGKILLed after a too-large message's dead letter was
// stored, before the message was terminated: JetStream redelivers it
// after the ack wait, the next bridge dead-letters it again under the
// same id, the server drops that as a duplicate, the bridge reads the
// stored copy back (the same message) and terminates it. The dead-letter
// stream holds it once; the messages around it reach the ring.
func TestBridgeKilledAfterADeadLetterStoresItOnce(t *testing.T) {
	srv := startServer(t)
	js := srv.client(t)
	fillStream(t, js, "KD", "kd.msgs", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	big := bytes.Repeat([]byte("y"), 200)
	if _, err := js.Publish(ctx, "kd.msgs", big); err != nil {
		t.Fatal(err)
	}
	fillStream(t, js, "KD", "kd.msgs", 10, 10)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KDEAD", Subjects: []string{"kd.dead"}}); err != nil {
		t.Fatal(err)
	}
	b := newRing(t, 64)
	rb := openRing(t, b)
	args := inArgs(srv, b, "KD", "kd.msgs", "--dead-letter", "kd.dead")
	dead := startBridge(t, proctest.Arm("bridge.in.after-dead-letter", 1), args...)
	dead.waitKilledAt(t, "bridge.in.after-dead-letter")
	if got := streamMsgs(t, js, "KDEAD"); got != 1 {
		t.Fatalf("the dead letter stored %d times before the kill, want 1", got)
	}
	next := startBridge(t, nil, append(args, "--listen", "127.0.0.1:0")...)
	addr := strings.TrimSuffix(strings.TrimPrefix(next.waitLine(t, "serving http://"), "serving http://"), "/metrics and /status")
	got := newTally()
	drainRing(t, rb, got, 20)
	// The redelivered too-large message comes after the ack wait.
	waitFor(t, "the next bridge to terminate the redelivered message", func() bool {
		return fetchStatus(t, addr).Counters["too_large"] == 1
	})
	next.stop(t)
	got.check(t, 20)
	if got := streamMsgs(t, js, "KDEAD"); got != 1 {
		t.Fatalf("the dead-letter stream holds %d copies, want 1", got)
	}
}
