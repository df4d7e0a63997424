package transport

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// TestAttachWaitsOnPassingStatesOnlyAsLongAsTold: when no entry can be
// taken but the table holds a state that passes by itself (an entry read
// free whose lock another process holds, claiming or releasing it; a
// holder that released its lock and still runs), an attach waits for it,
// at most shm.WithAttachTimeout, and then fails with ErrTooManyPeers
// saying what it waited on. When the state passes within the wait, the
// attach succeeds. A hostile file cannot hold an open for longer.
func TestAttachWaitsOnPassingStatesOnlyAsLongAsTold(t *testing.T) {
	const wait = 150 * time.Millisecond
	// Each case leaves entry 1 of a 2-entry table (entry 0 is the
	// creator's) in a state no attach takes, and returns what undoes it.
	cases := []struct {
		name  string
		set   func(t *testing.T, r *Ring) (undo func())
		cause string
	}{
		{"entry read free, its lock held", func(t *testing.T, r *Ring) func() {
			h, err := OpenRing(r.Path()) // takes entry 1 and holds its lock
			if err != nil {
				t.Fatal(err)
			}
			// As between a claimer's lock and its word, or a detacher's
			// word and its unlock.
			h.tab.Entry(1).Ctl.Store(layout.PeerCtl{State: layout.PeerFree, Gen: 7}.Pack())
			return func() { h.Close() }
		}, "1 read free but stayed locked by other processes (claiming or releasing them)"},
		{"holder unlocked and still running", func(t *testing.T, r *Ring) func() {
			e, self := r.tab.Entry(1), shm.Self()
			e.Start.Store(self.Start)
			e.Boot.Store(shm.BootTag())
			e.PidNS.Store(shm.PidNamespace())
			e.Ctl.Store(layout.PeerCtl{State: layout.PeerActive, Gen: 3, PID: uint32(self.PID)}.Pack())
			return func() { e.Ctl.Store(layout.PeerCtl{State: layout.PeerFree, Gen: 4}.Pack()) }
		}, "1 of processes that can be proven neither alive nor dead (waited"},
	}
	for _, c := range cases {
		t.Run(c.name+"/times out", func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 8, Participants: 2})
			defer c.set(t, r)()
			started := time.Now()
			o, err := OpenRing(r.Path(), shm.WithAttachTimeout(wait))
			took := time.Since(started)
			if err == nil {
				o.Close()
				t.Fatal("attached to a table with no entry to take")
			}
			if !errors.Is(err, ErrTooManyPeers) || !strings.Contains(err.Error(), c.cause) || !strings.Contains(err.Error(), r.Path()) {
				t.Fatalf("error %q: want ErrTooManyPeers naming the file and %q", err, c.cause)
			}
			// A lower bound only: a loaded machine makes it longer.
			if took < wait {
				t.Fatalf("gave up after %v, before the %v it was told to wait", took, wait)
			}
		})
		t.Run(c.name+"/no wait", func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 8, Participants: 2})
			defer c.set(t, r)()
			o, err := OpenRing(r.Path(), shm.WithAttachTimeout(0))
			if err == nil {
				o.Close()
				t.Fatal("attached to a table with no entry to take")
			}
			if !errors.Is(err, ErrTooManyPeers) || !strings.Contains(err.Error(), c.cause) {
				t.Fatalf("error %q: want ErrTooManyPeers and %q", err, c.cause)
			}
		})
		t.Run(c.name+"/passes", func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 8, Participants: 2})
			undo := c.set(t, r)
			// The state passes while the attach waits (or before it
			// starts: then it attaches at once). The default wait is
			// seconds, far longer than a loaded machine needs here.
			go func() {
				time.Sleep(20 * time.Millisecond)
				undo()
			}()
			o, err := OpenRing(r.Path())
			if err != nil {
				t.Fatalf("the state passed, yet the attach failed: %v", err)
			}
			if o.tab.Self != 2 {
				t.Fatalf("attached as entry %d, want entry 1 (index+1 = 2)", o.tab.Self)
			}
			o.Close()
		})
	}
}
