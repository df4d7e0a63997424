package pass

import (
	"context"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"testing"
	"time"
)

// Regression (found in review): the package doc says a client that leaves by Close has the
// workers "cancel the closures running for it". Close does that only
// through cancel-board requests, which it removes again (clearOwner) before
// unregistering, and nothing bumps the board's epoch after the
// registration ends (only a pool's ScanNow that reclaimed members does).
// So a watcher that did not see the requests in the short time they were
// posted, or that never saw them because the board was full (the request
// refused, counted CancelsUndelivered), never wakes for the client's
// departure: the closure runs on (a closure that waits for its context runs
// forever, holding a worker).
//
// Here the board is full (one entry, taken by a live member's request):
// after Close the closure's context is never cancelled.
func TestClosingClientHasItsRunningClosuresCancelledEvenWithAFullBoard(t *testing.T) {
	f := newSchedFiles(t)
	running := make(chan struct{}, 1)
	cause := make(chan error, 1)
	cfg := f.pool(1)
	cfg.CancelEntries = 1
	cfg.Registry = NewRegistry()
	cfg.Registry.Register(closureStall, func(ctx context.Context, a []byte) ([]byte, error) {
		running <- struct{}{}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(2 * time.Second):
			cause <- nil
		}
		return a, nil
	})
	p := startPool(t, cfg)
	// The one entry is taken by another live participant's request (any
	// live client's cancellation whose result has not come yet).
	if !p.board.request(p.member.Ticket(), 1<<60) {
		t.Fatal("the board refused the first request")
	}
	cc := f.client()
	cc.CancelEntries = 1
	c := startClient(t, cc)
	if _, err := c.Submit(context.Background(), closureStall, []byte("x")); err != nil {
		t.Fatal(err)
	}
	await(t, running, "the closure running")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Stats().CancelsUndelivered != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
	if err := <-cause; err == nil {
		t.Fatal("the client closed (its registration ended) but the closure running for it was never cancelled: it ran to its own end")
	}
}

// The same gap for a client that died: the design has "a pool whose
// watchdog reclaimed members" wake every watcher, but a dead client is as
// often reclaimed by a Register that finds the table full (or by any
// heartbeat watchdog not run by a Pool, or by a pool that dies between its
// Scan and its sweep+wake: a crash window the table does not list). Then
// nothing bumps the board's epoch, and the closure running for the dead
// client is never cancelled (here: it waits for its context, so it would
// hold its worker until Stop).
func TestDeadClientReclaimedByRegisterHasItsClosuresCancelled(t *testing.T) {
	f := newSchedFiles(t)
	running := make(chan struct{}, 1)
	cause := make(chan error, 1)
	cfg := f.pool(1)
	cfg.Registry = NewRegistry()
	cfg.Registry.Register(closureAwaitCancel, func(ctx context.Context, a []byte) ([]byte, error) {
		running <- struct{}{}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(3 * time.Second):
			cause <- nil
		}
		return a, nil
	})
	p := startPool(t, cfg)
	// A client process with a pass running here, killed.
	child := passHelper.Start(t, "canceller", append(f.env(), "GATE="+f.submit+".never")...)
	child.WaitLine(t, "ready")
	await(t, running, "the dead-to-be client's closure running")
	child.Kill()
	_ = child.Wait()
	// The table fills up; the next Register reclaims the dead client.
	hb := p.Heartbeat()
	var members []*heartbeat.Member
	defer func() {
		for _, m := range members {
			m.Unregister()
		}
	}()
	for hb.Totals().Reclaimed == 0 && len(members) < hb.Capacity() {
		m, err := hb.Register("filler", p.submit)
		if err != nil {
			t.Fatalf("register %d: %v", len(members), err)
		}
		members = append(members, m)
	}
	if got := hb.Totals().Reclaimed; got != 1 {
		t.Fatalf("the dead client was not reclaimed by Register (reclaimed %d)", got)
	}
	if err := <-cause; err == nil {
		t.Fatal("the dead client was reclaimed (its ticket ended) but the closure running for it was never cancelled: no watcher was woken")
	}
}
