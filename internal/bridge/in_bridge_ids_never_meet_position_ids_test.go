package bridge

import (
	"context"
	"testing"
	"time"
)

// The in bridge stamps 1<<63 | stream sequence: never a position id
// (position+1, below 2^63), so a ring fed by local producers and an in
// bridge holds no two messages with one id.
func TestInBridgeIDsNeverMeetPositionIDs(t *testing.T) {
	conn, js, stats := inProcessServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := EnsureStream(ctx, js, StreamOptions{Stream: "S", Subject: "s", Create: true, Memory: true}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c"} {
		if _, err := js.Publish(ctx, "s", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := EnsureConsumer(ctx, js, "S", "", ConsumerOptions{Durable: "d"}, true)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := idRing(t)
	defer r.Close()
	if err := r.Push(ctx, []byte("local")); err != nil { // id 1
		t.Fatal(err)
	}
	in := NewIn(ringSink{r}, conn, js, cons, InOptions{FetchWait: 200 * time.Millisecond}, stats)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- in.Run(rctx) }()
	for stats.Acked.Load() < 3 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []struct {
		data string
		id   uint64
	}{{"local", 1}, {"a", 1<<63 | 1}, {"b", 1<<63 | 2}, {"c", 1<<63 | 3}}
	buf := make([]byte, r.MaxPayload())
	for _, w := range want {
		n, id, err := r.TryPopID(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != w.data || id != w.id {
			t.Errorf("popped %q id %#x; want %q id %#x", buf[:n], id, w.data, w.id)
		}
	}
}
