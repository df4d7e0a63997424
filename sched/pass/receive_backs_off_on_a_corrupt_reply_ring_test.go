package pass

import (
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Regression (found in review): Client.receive treats any Pop error other than its context's end
// and ErrNotAttached as "corrupt ring memory: reported by the ring's own
// Scan" and goes straight back to Pop. A corrupt word at the reply ring's
// head makes every Pop fail at once, so the goroutine spins for ever on a
// CPU, and ClientStats.Undecoded ("reply messages that could not be
// decoded") counts millions of messages for one bad word. (A pool's worker
// sleeps BeatInterval after such an error from its submit queue.)
func TestReceiveBacksOffOnACorruptReplyRing(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	reg, err := shm.Open(c.ReplyPath(), layout.KindRing)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	lay, err := layout.NewRingLayout(reg.Header().Geometry)
	if err != nil {
		t.Fatal(err)
	}
	w, err := reg.Uint64(uint64(reg.Header().HeaderSize) + lay.SlotOff(0))
	if err != nil {
		t.Fatal(err)
	}
	// One READY word with an owner (no ring operation writes that) at the
	// head, then a wake so that the receiver looks.
	w.Store(layout.SlotWord{State: layout.SlotReady, Owner: 3, Length: 4}.Pack())
	if err := c.reply.TryPush([]byte("wake")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := c.Stats().Undecoded; n > 100 {
		t.Fatalf("one corrupt slot word counted as %d undecoded messages in 200 ms: the receiving goroutine spins on Pop's error without pausing", n)
	}
}
