package pass

import (
	"context"
	"errors"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// A pass whose arguments do not fit the submit slot (34 bytes in the
// default 56-byte payload) is refused by Submit with ErrArgsTooLarge
// before it takes a token or a credit or pushes anything; one that fits
// exactly goes through whole. A queue with larger slots carries more.
func TestPassArgsTooLarge(t *testing.T) {
	f := newSchedFiles(t)
	startWorkers(t, f, 1)
	c := startClient(t, f.client())
	if c.MaxArgs() != 34 {
		t.Fatalf("MaxArgs %d, want 34", c.MaxArgs())
	}
	submit := ringView(t, f.submit)
	before := submit.Counters()
	if _, err := c.Submit(context.Background(), closureEcho, make([]byte, 35)); !errors.Is(err, ErrArgsTooLarge) {
		t.Fatalf("35 bytes of arguments: %v", err)
	}
	if after := submit.Counters(); after.NextID != before.NextID || after.Pushed != before.Pushed {
		t.Fatalf("a refused pass took %d tokens and pushed %d messages", after.NextID-before.NextID, after.Pushed-before.Pushed)
	}
	if st := c.Stats(); st.Submitted != 0 || c.Pending() != 0 {
		t.Fatalf("a refused pass is counted: %+v, %d pending", st, c.Pending())
	}
	args := []byte("0123456789abcdefghijklmnopqrstuvwx") // 34 bytes
	h, err := c.Submit(context.Background(), closureEcho, args)
	if err != nil {
		t.Fatalf("34 bytes: %v", err)
	}
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != string(args) {
		t.Fatalf("34 bytes came back as %q", got[0])
	}
	if used := submit.Counters().NextID - before.NextID; used != 1 {
		t.Fatalf("%d tokens used for one pass", used)
	}

	// 128-byte slots: a 120-byte payload carries 98 argument bytes.
	g := newSchedFiles(t)
	cfg := g.client()
	cfg.Ring = transport.RingConfig{Capacity: 16, SlotSize: 128}
	big := startClient(t, cfg)
	if big.MaxArgs() != 98 {
		t.Fatalf("MaxArgs with 128-byte slots: %d, want 98", big.MaxArgs())
	}
	if _, err := big.Submit(context.Background(), closureEcho, make([]byte, 99)); !errors.Is(err, ErrArgsTooLarge) {
		t.Fatalf("99 bytes in 128-byte slots: %v", err)
	}
}
