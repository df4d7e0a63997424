package gather

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The invariant: a participant whose process runs in another pid
// namespace (recording pid 1, which means another process here) is never
// judged dead while it lives; once killed, it is, and the round fails
// with ErrPeerDead naming it as it was recorded.

// TestOtherNamespaceParticipantAliveUntilKilled: participant 1 runs as pid
// 1 of its own pid namespace. While it waits to start, participant 0 (in
// this namespace) judges it alive (its entry lock is held) and the
// liveness check of a round waiting for it passes; they run three rounds.
// Then it is SIGKILLed: the next round fails with ErrPeerDead, naming
// "pid 1 in another pid namespace".
func TestOtherNamespaceParticipantAliveUntilKilled(t *testing.T) {
	path := fairShmPath(t)
	ag, err := Create(path, Config{Participants: 2, MaxWords: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	m := joinGather(t, ag, 0, Timeout(time.Minute))
	gate := path + "-go"
	t.Cleanup(func() { os.Remove(gate) })
	c := fairHelper.StartInPidNamespace(t, "gated", proctest.PathArg(path), fairEnvRank+"=1", "FAIR_GATE="+gate)
	c.WaitLine(t, "joined")
	inner := proctest.InnerOf(t, c)

	p := ag.Peers()[1]
	t.Logf("participant 1: %s: %s", p.Where(), p.Verdict.Reason)
	if p.State != "active" || p.PID != 1 || !strings.Contains(p.Where(), "pid 1 in another pid namespace (pid:[") {
		t.Fatalf("participant 1 recorded as %s, %s (pid_ns %d, ours %d)", p.State, p.Where(), p.PidNS, shm.PidNamespace())
	}
	if v := p.Verdict; v.Dead || v.Unknown || !v.OtherNS || v.Lock != shm.LockHeld {
		t.Fatalf("live participant in another namespace judged %+v", v)
	}
	// The check a round waiting for it makes: participant 1 has not
	// published round 1, so it is judged.
	if err := m.checkLiveness(1); err != nil {
		t.Fatalf("liveness check of a round waiting for the live participant: %v", err)
	}
	if _, aborted := ag.Aborted(); aborted {
		t.Fatal("group aborted")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for r := uint32(1); r <= 3; r++ {
		out, err := m.AllGather(nil, []uint32{0, r})
		if err != nil {
			t.Fatalf("round %d with the participant in another namespace: %v", r, err)
		}
		if out[2] != 1 || out[3] != r {
			t.Fatalf("round %d: %v", r, out)
		}
	}
	c.WaitLine(t, "round 3")

	c.Kill() // --kill-child: the namespace's pid 1 dies with unshare
	c.Wait()
	inner.WaitExited(t)
	if v := ag.Peers()[1].Verdict; !v.Dead || !v.OtherNS || v.Lock != shm.LockReleased {
		t.Fatalf("killed participant judged %+v", v)
	}
	_, err = m.AllGather(nil, []uint32{0, 4})
	if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), "participant 1 (pid 1 in another pid namespace (pid:[") {
		t.Fatalf("round 4 after the kill: %v", err)
	}
	if abort, _ := ag.Aborted(); abort.Reason != layout.AGAbortDead || abort.Culprit != 2 || abort.Round != 4 {
		t.Fatalf("abort %+v", abort)
	}
	t.Log(err)
}

// TestSameHandleParticipantsAlive: participants joined through one handle
// cannot see each other's locks; the handle answers for them (alive), so
// a round waiting for one of them never calls it dead, and once one has
// left its lock is released (a left participant is not judged).
func TestSameHandleParticipantsAlive(t *testing.T) {
	ag := newGatherFile(t, 2, 4)
	a := joinGather(t, ag, 0)
	b := joinGather(t, ag, 1)
	if v := ag.Peers()[1].Verdict; v.Dead || v.Unknown || v.Lock != shm.LockHeld {
		t.Fatalf("participant joined through this handle: %+v", v)
	}
	if err := a.checkLiveness(1); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ag.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if v := other.Peers()[1].Verdict; v.Dead || v.Lock != shm.LockHeld || !strings.Contains(v.Reason, "entry lock") {
		t.Fatalf("participant seen from another handle: %+v", v)
	}
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	off, n := ag.slotLock(1)
	if st, err := other.reg.EntryLock(off, n); st != shm.LockReleased || err != nil {
		t.Fatalf("lock after Leave: %v %v", st, err)
	}
	if _, err := ag.Join(1); !errors.Is(err, ErrRankTaken) {
		t.Fatalf("rejoin a left slot: %v", err)
	}

}
