package pass

import (
	"bytes"
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Regression (found in review): parking.retry holds k.mu for its whole sweep. A parked result
// whose reply ring's TryPush fails with anything but ErrFull (the ring is
// corrupt or detached) goes to p.unreachable, which, for a submitter that
// is not proven gone, hands the pass back (handBack); when the submit ring
// is full, Release returns ErrFull and handBack parks the lease again:
// parking.add takes k.mu, which this goroutine already holds. The parking
// loop deadlocks on itself; every worker that later parks (add) blocks on
// k.mu for ever, and Stop hangs in parking.stop (<-k.done), whatever its
// context.
//
// Setup: a live submitter whose reply ring (2 slots) is full, so the third
// result is parked; the pool's one worker then busy with a stalling pass
// while the submit ring (4 slots) is filled; then the reply ring's tail slot
// word is corrupted (what a buggy or dying client process can leave).
func TestParkingHandsBackWithoutDeadlock(t *testing.T) {
	f := newSchedFiles(t)
	gate := make(chan struct{})
	defer close(gate)
	cfg := f.pool(1)
	cfg.Ring.Capacity = 4
	cfg.Registry = NewRegistry()
	cfg.Registry.Register(closureEcho, func(_ context.Context, a []byte) ([]byte, error) { return a, nil })
	stalling := make(chan struct{}, 1)
	cfg.Registry.Register(closureStall, func(_ context.Context, a []byte) ([]byte, error) {
		stalling <- struct{}{}
		<-gate
		return a, nil
	})
	// No startPool: its clean-up Stop would hang with the pool.
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A mute client (newMuteClient) on the 4-slot submit ring.
	hb, _, err := heartbeat.OpenOrCreate(f.hb, cfg.Heartbeat)
	if err != nil {
		t.Fatal(err)
	}
	submit, _, err := transport.OpenOrCreateRing(f.submit, cfg.Ring)
	if err != nil {
		t.Fatal(err)
	}
	member, err := hb.Register("mute", submit)
	if err != nil {
		t.Fatal(err)
	}
	reply, _, err := transport.OpenOrCreateRing(ReplyPath(f.submit, member.Slot()), transport.RingConfig{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := &muteClient{member: member, submit: submit, reply: reply}
	for i := 0; i < 3; i++ {
		m.push(t, closureEcho, []byte("r"))
	}
	eventually(t, "the third result parked", func() bool { return p.Stats().Parked == 1 })
	m.push(t, closureStall, []byte("s"))
	await(t, stalling, "the worker busy")
	buf := make([]byte, m.submit.MaxPayload())
	for {
		n, err := encodeSubmit(buf, submitMsg{closure: closureEcho, token: m.submit.NextID(), reply: m.member.Ticket(), args: []byte("f")})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.submit.TryPush(buf[:n]); errors.Is(err, transport.ErrFull) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// Corrupt the reply ring's slot at its tail (position 2: slot 0, lap 1).
	reg, err := shm.Open(m.reply.Path(), layout.KindRing)
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
	w.Store(layout.SlotWord{State: layout.SlotFree, Lap: 1, Length: 5}.Pack())

	time.Sleep(100 * time.Millisecond) // a few parking retries
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		stopped <- p.Stop(ctx)
	}()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		var stacks bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&stacks, 2)
		stuck := ""
		for _, g := range strings.Split(stacks.String(), "\n\n") {
			if strings.Contains(g, "(*parking).add") && strings.Contains(g, "(*parking).retry") {
				stuck = g
			}
		}
		t.Fatalf("Stop with a 100 ms context has not returned in 3 s: the parking loop is deadlocked in retry -> unreachable -> handBack -> parking.add (k.mu held):\n%s", head(stuck, 16))
	}
}
