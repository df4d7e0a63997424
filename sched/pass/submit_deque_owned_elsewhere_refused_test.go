package pass

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// TestSubmitDequeOwnedElsewhereIsRefused: a deque submit side pushes only
// from its owner. A worker process that started first created (and owns)
// the submit deque, so a submitter that starts after it could never
// submit: it is refused at start with a reason, instead of starting and
// failing every Submit with ErrNotOwner (found by a review).
func TestSubmitDequeOwnedElsewhereIsRefused(t *testing.T) {
	f := newSchedFiles(t)
	w, _, _, err := StartByWorkloadShape(f.config(1), transport.WorkStealingShape(2), transport.StreamingShape(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	s, _, _, err := StartByWorkloadShape(f.config(0), transport.WorkStealingShape(2), transport.StreamingShape(2, 1))
	if err == nil {
		s.Stop(context.Background())
		t.Fatal("a submitter that cannot own the submit deque started")
	}
	if !errors.Is(err, ErrSubmitDequeOwner) || !strings.Contains(err.Error(), f.config(0).SubmitPath) {
		t.Fatalf("refusal: %v", err)
	}
}
