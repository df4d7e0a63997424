package bridge

import (
	"context"
	"testing"
	"time"
)

// Two streams dead-letter their sequence 1 into one dead-letter stream:
// both are stored (the id names the stream, its creation and the
// sequence). With an id of the sequence alone the second was dropped as a
// duplicate, then terminated: lost.
func TestDeadLettersOfTwoStreamsNeverShareAnID(t *testing.T) {
	conn, js, stats := inProcessServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := EnsureStream(ctx, js, StreamOptions{Stream: "DLQ", Subject: "dlq", Create: true, Memory: true}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 200)
	for i, name := range []string{"S1", "S2"} {
		info, err := EnsureStream(ctx, js, StreamOptions{Stream: name, Subject: name + ".x", Create: true, Memory: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, name+".x", big); err != nil {
			t.Fatal(err)
		}
		cons, err := EnsureConsumer(ctx, js, name, "", ConsumerOptions{Durable: "d"}, true)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := idRing(t)
		defer r.Close()
		in := NewIn(ringSink{r}, conn, js, cons, InOptions{DeadLetter: "dlq", Stream: name, StreamCreated: info.Created, FetchWait: 200 * time.Millisecond}, stats)
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- in.Run(rctx) }()
		for stats.TooLarge.Load() < uint64(i+1) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 2 {
		t.Errorf("2 messages terminated, %d dead-lettered", si.State.Msgs)
	}
}
