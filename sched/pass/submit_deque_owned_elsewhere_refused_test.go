package pass

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

func stealShared(f schedFiles, label string) Shared {
	sh := f.shared(label)
	sh.Submit = transport.WorkStealingShape(2)
	return sh
}

// TestSubmitDequeOwnedElsewhereIsRefused: a deque submit side pushes only
// from its owner. A client process that started first created (and owns)
// the submit deque, so a second client could never submit: it is refused
// at start with a reason naming the file (instead of starting and failing
// every Submit with ErrNotOwner), registering nothing. A pool beside the
// owner starts (it only steals) and serves the owner's passes.
func TestSubmitDequeOwnedElsewhereIsRefused(t *testing.T) {
	f := newSchedFiles(t)
	owner := passHelper.Start(t, "steal-client", f.env()...)
	owner.WaitLine(t, "ready")
	c, err := NewClient(ClientConfig{Shared: stealShared(f, "second-client")})
	if err == nil {
		c.Close()
		t.Fatal("a client that cannot own the submit deque started")
	}
	if !errors.Is(err, ErrSubmitDequeOwner) || !errors.Is(err, heartbeat.ErrInvalidConfig) || !strings.Contains(err.Error(), f.submit) {
		t.Fatalf("refusal: %v", err)
	}
	p := startPool(t, PoolConfig{Shared: stealShared(f, "thief-pool"), Workers: 1, Registry: testRegistry()})
	for _, s := range p.Heartbeat().Snapshots() {
		if s.Label == "second-client" && s.State != "free" {
			t.Fatalf("the refused client holds slot %d: %+v", s.Slot, s)
		}
	}
	owner.Stop(t)
}

// A pool never creates a submit deque: the deque's creator owns it and is
// the only process that can push, so a pool that created one would hold
// a queue nobody can submit to. Started first, it is refused (start the
// client first), creating nothing.
func TestPoolDoesNotCreateSubmitDeque(t *testing.T) {
	f := newSchedFiles(t)
	_, err := NewPool(PoolConfig{Shared: stealShared(f, "early-pool"), Workers: 1, Registry: testRegistry()})
	if !errors.Is(err, ErrSubmitDequeOwner) || !errors.Is(err, heartbeat.ErrInvalidConfig) || !strings.Contains(err.Error(), f.submit) {
		t.Fatalf("a pool started before any client: %v", err)
	}
	for _, p := range []string{f.submit, f.hb, BoardPath(f.submit)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was created (%v)", p, err)
		}
	}
}

// The owner of a submit deque dies (SIGKILL): the next client adopts the
// deque and submits, and worker processes that steal from it serve its
// passes.
func TestSubmitDequeOfDeadOwnerIsAdoptedByTheNextClient(t *testing.T) {
	f := newSchedFiles(t)
	owner := passHelper.Start(t, "steal-client", f.env()...)
	owner.WaitLine(t, "ready")
	owner.Kill()
	<-owner.Done()

	c := startClient(t, ClientConfig{Shared: stealShared(f, "heir"), Reply: transport.RingConfig{Capacity: 256}})
	startWorkers(t, f, 1, "SCHED_STEAL=1")
	const n = 50
	hs := make([]*Handle, n)
	for i := range hs {
		var err error
		if hs[i], err = c.Submit(context.Background(), closureEcho, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("submit to the adopted deque: %v", err)
		}
	}
	for i, v := range awaitAll(t, hs) {
		if string(v) != strconv.Itoa(i) {
			t.Fatalf("pass %d: %q", i, v)
		}
	}
}
