package pass

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// Only a deque's owner can push, so a result deque works only with the
// workers in its owner's process. A worker process whose result deque
// another process owns is refused at start (before, each of its results
// hit ErrNotOwner, the pass was released and re-run until poisoned, and the
// submitter heard nothing). The topology that works, the seed's own
// pairing, runs across processes: the worker process owns the result
// deque, the submitter steals its results from it.
func TestResultDequeWorkersOutsideTheOwnerAreRefused(t *testing.T) {
	f := newSchedFiles(t)
	owner := passHelper.Start(t, "deque-worker", f.env()...)
	owner.WaitLine(t, "ready")

	other := passHelper.Start(t, "deque-worker", f.env()...)
	line := other.WaitLine(t, "refused:")
	other.MustSucceed(t)
	for _, want := range []string{ErrResultDequeOwner.Error(), f.result, "another process owns it"} {
		if !strings.Contains(line, want) {
			t.Errorf("refusal %q does not say %q", line, want)
		}
	}

	s, sf, rf, err := StartByWorkloadShape(f.config(0), transport.StreamingShape(1, 1), transport.WorkStealingShape(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if sf != transport.FamilyRing || rf != transport.FamilyDeque {
		t.Fatalf("families %v, %v", sf, rf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 100
	want := map[uint64]string{}
	for i := 0; i < n; i++ {
		tok, err := s.Submitter().Submit(ctx, closureEcho, []byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[tok] = strconv.Itoa(i)
	}
	got := recvAll(t, s.Collector(), n)
	for tok, arg := range want {
		if r := got[tok]; r.Err() != nil || string(r.Data) != arg {
			t.Fatalf("token %d: %+v, want %q", tok, r, arg)
		}
	}
	owner.Stop(t)
}

// The refusals, in one process: workers over a thief's handle, no workers
// over the owner's handle, and a worker-less shape start that would have
// to create the result deque. None registers in (or creates) the
// heartbeat table, and the last creates no result file.
func TestResultDequeRefusalsSayWhy(t *testing.T) {
	f := newSchedFiles(t)
	submit, err := transport.CreateRing(f.submit, transport.RingConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	owned, err := transport.CreateDeque(f.result, transport.DequeConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer owned.Close()
	stolen, err := transport.OpenDeque(f.result)
	if err != nil {
		t.Fatal(err)
	}
	given := true // the queues are still ours to close
	defer func() {
		if given {
			submit.Close()
			stolen.Close()
		}
	}()

	refused := func(name string, err error, says string) {
		t.Helper()
		if !errors.Is(err, ErrResultDequeOwner) || !errors.Is(err, heartbeat.ErrInvalidConfig) {
			t.Fatalf("%s: %v, want ErrResultDequeOwner and ErrInvalidConfig", name, err)
		}
		if !strings.Contains(err.Error(), f.result) || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %q does not name %s or say %q", name, err, f.result, says)
		}
		if _, err := os.Stat(f.hb); !os.IsNotExist(err) {
			t.Fatalf("%s: the heartbeat table was created (%v)", name, err)
		}
	}
	_, err = StartWithQueues(f.config(1), submit, stolen)
	refused("workers, thief's handle", err, "another process owns it")
	_, err = StartWithQueues(f.config(0), submit, owned)
	refused("no workers, owner's handle", err, "runs no workers")

	g := newSchedFiles(t)
	_, _, _, err = StartByWorkloadShape(g.config(0), transport.StreamingShape(1, 1), transport.WorkStealingShape(1))
	if !errors.Is(err, ErrResultDequeOwner) || !strings.Contains(err.Error(), g.result) {
		t.Fatalf("no workers, no result deque yet: %v", err)
	}
	if _, err := os.Stat(g.result); !os.IsNotExist(err) {
		t.Fatalf("the result deque was created (%v)", err)
	}

	// Collecting over a thief's handle, without workers, is the
	// submitter's side of the pairing: accepted.
	s, err := StartWithQueues(f.config(0), submit, stolen)
	if err != nil {
		t.Fatal(err)
	}
	given = false // Stop closes the queues it was given
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
