package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A message larger than the ring's slot payload coming in is never
// truncated: it goes to the dead-letter subject (with its stream
// sequence) and is terminated; the messages around it arrive.
func TestTooLargeMessageIsRefusedNeverTruncated(t *testing.T) {
	srv := startServer(t)
	js := srv.client(t)
	fillStream(t, js, "TL", "tl.msgs", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte("x"), 200)
	ack, err := js.Publish(ctx, "tl.msgs", big)
	if err != nil {
		t.Fatal(err)
	}
	fillStream(t, js, "TL", "tl.msgs", 10, 10)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"tl.dead"}}); err != nil {
		t.Fatal(err)
	}
	b := newRing(t, 64)
	rb := openRing(t, b)
	in := startBridge(t, nil, inArgs(srv, b, "TL", "tl.msgs", "--dead-letter", "tl.dead")...)
	got := newTally()
	drainRing(t, rb, got, 20)
	waitFor(t, "the dead letter", func() bool { return streamMsgs(t, js, "DEAD") == 1 })
	st := in.stop(t)
	got.check(t, 20)
	if st.Counters["too_large"] != 1 {
		t.Fatalf("too_large %d, want 1: %v", st.Counters["too_large"], st.Counters)
	}
	_, errOut := in.output()
	if !strings.Contains(errOut, "refused stream sequence "+strconv.FormatUint(ack.Sequence, 10)+": 200 bytes, larger than") {
		t.Fatalf("no line about the refused message: %q", errOut)
	}
	s, _ := js.Stream(ctx, "DEAD")
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, big) || m.Header.Get("Shmbridge-Stream-Seq") != strconv.FormatUint(ack.Sequence, 10) {
		t.Fatalf("dead letter %d bytes, header %v; want the 200 bytes and sequence %d", len(m.Data), m.Header, ack.Sequence)
	}
}
