package transport

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestAFailedAttachChangesNothing: an attach to a table whose every entry
// belongs to a live holder fails with ErrTooManyPeers, says so, and leaves
// the file byte for byte as it was (it writes into no entry it has not
// taken: no pid of its own on anyone's lease or entry).
func TestAFailedAttachChangesNothing(t *testing.T) {
	for _, kind := range []string{"ring", "deque"} {
		t.Run(kind, func(t *testing.T) {
			var path string
			var second func() (interface{ Close() error }, error)
			switch kind {
			case "ring":
				r := newRing(t, RingConfig{Capacity: 8, Participants: 2})
				path = r.Path()
				if err := r.TryPush([]byte("held")); err != nil {
					t.Fatal(err)
				}
				if _, err := r.TryClaim(); err != nil {
					t.Fatal(err)
				}
				second = func() (interface{ Close() error }, error) { return OpenRing(path) }
			case "deque":
				d := newDeque(t, DequeConfig{Capacity: 8, Participants: 2})
				path = d.Path()
				if err := d.TryPush([]byte("held")); err != nil {
					t.Fatal(err)
				}
				second = func() (interface{ Close() error }, error) { return OpenDeque(path) }
			}
			h, err := second() // the second live holder (another open file description)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = second()
			if !errors.Is(err, ErrTooManyPeers) || !strings.Contains(err.Error(), "2 of live processes") {
				t.Fatalf("attach to a table of live holders: %v", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				for i := range before {
					if before[i] != after[i] {
						t.Fatalf("the failed attach changed byte %d (%#x -> %#x)", i, before[i], after[i])
					}
				}
			}
		})
	}
}
