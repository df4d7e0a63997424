package pass

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
)

// Crash points of the Pass scheduler's workers: a real worker process
// dies at each, holding the pass's lease; a watchdog scan (Pool.ScanNow,
// here in a pool started after the death) reclaims it and requeues the
// pass, that pool's worker runs it again, and the pass resolves once at
// its client. A death after the result was pushed (before the ack) runs
// the pass twice: the second result reaches the same client, which drops
// it as unmatched (ClientStats.Unmatched), never as another pass's. (The
// heartbeat table's and the watchdog's own crash points are tested in
// package heartbeat.)
func TestPassWorkerCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		point     string
		duplicate bool // the result arrives twice
	}{
		{crashPassWorkerAfterClaim, false},
		{crashPassWorkerAfterExecute, false},
		{crashPassWorkerAfterResult, true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			f := newSchedFiles(t)
			c := startClient(t, f.client())
			doomed := startWorkers(t, f, 1, proctest.Arm(tc.point, 1)...)[0]
			h, err := c.Submit(context.Background(), closureEcho, []byte("payload"))
			if err != nil {
				t.Fatal(err)
			}
			doomed.WaitKilled(t, tc.point)

			wd := startPool(t, f.pool(1)) // the watchdog, and the worker that runs the pass again
			rep := wd.ScanNow()
			if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].ID.PID != int32(doomed.PID()) || len(rep.Reclaimed[0].Leases) != 1 {
				t.Fatalf("watchdog report: %+v, want the dead worker reclaimed with its one lease", rep)
			}
			if got := awaitAll(t, []*Handle{h}); string(got[0]) != "payload" {
				t.Fatalf("result %q", got[0])
			}
			unmatched := uint64(0)
			if tc.duplicate {
				unmatched = 1
			}
			if st := settled(t, f, c, 1); st.Resolved != 1 || st.Unmatched != unmatched || st.Undecoded != 0 {
				t.Fatalf("client stats %+v: want the pass resolved once and %d duplicate(s) unmatched", st, unmatched)
			}
			if st := wd.Stats(); st.Executed != 1 || st.Reclaimed != 1 {
				t.Fatalf("watchdog pool stats %+v: want the pass run again here", st)
			}
		})
	}

	// A worker that parked a result (its submitter's reply ring full) and
	// died still held the pass's lease: the pass runs again, and its
	// submitter, once it reads, has every result once.
	t.Run(crashPassWorkerAfterPark, func(t *testing.T) {
		f := newSchedFiles(t)
		m := newMuteClient(t, f, 2)
		// One worker: it finishes (acks) each pass before the next, so
		// when it dies it holds the parked pass's lease alone.
		doomed := startWorkers(t, f, 1, append([]string{"WORKERS=1"}, proctest.Arm(crashPassWorkerAfterPark, 1)...)...)[0]
		want := map[uint64]string{}
		for i := 0; i < 3; i++ {
			arg := fmt.Sprint("p", i)
			want[m.push(t, closureEcho, []byte(arg))] = arg
		}
		doomed.WaitKilled(t, crashPassWorkerAfterPark)

		wd := startPool(t, f.pool(1))
		rep := wd.ScanNow()
		if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].ID.PID != int32(doomed.PID()) || len(rep.Reclaimed[0].Leases) != 1 {
			t.Fatalf("watchdog report: %+v, want the dead worker reclaimed with the parked pass's lease", rep)
		}
		got := map[uint64]string{}
		for len(got) < len(want) {
			r := m.recv(t)
			if _, dup := got[r.token]; dup {
				t.Fatalf("token %d answered twice", r.token)
			}
			got[r.token] = string(r.data)
		}
		for tok, arg := range want {
			if got[tok] != arg {
				t.Fatalf("pass %d (%q): got %q", tok, arg, got[tok])
			}
		}
		submit := ringView(t, f.submit)
		eventually(t, "every pass acked", func() bool { return submit.Counters().Acked == 3 })
		if n := m.reply.Counters().Pushed; n != 3 {
			t.Fatalf("%d results pushed for 3 passes", n)
		}
		if st := wd.Stats(); st.Executed != 1 {
			t.Fatalf("watchdog pool stats %+v: want the parked pass run again here", st)
		}
	})
}

// TestPassWorkerKilledMidPass: a worker process dies inside a closure.
// The watchdog reclaims it (its report names the process and its one
// lease), its exit-event subscriber sees the death, the pass is requeued
// and run again, and the result reaches the client once.
func TestPassWorkerKilledMidPass(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	doomed := startWorkers(t, f, 1, proctest.Arm("test.pass.executing", 1)...)[0]
	h, err := c.Submit(context.Background(), closureCrash, []byte("survive me"))
	if err != nil {
		t.Fatal(err)
	}
	doomed.WaitKilled(t, "test.pass.executing")

	ev := heartbeat.NewExitEvents(16)
	sub, err := ev.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.pool(1)
	cfg.Events = ev
	wd := startPool(t, cfg)
	rep := wd.ScanNow()
	if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].ID.PID != int32(doomed.PID()) || len(rep.Reclaimed[0].Leases) != 1 {
		t.Fatalf("watchdog report: %+v", rep)
	}
	e, err := sub.RecvTimeout(time.Minute)
	if err != nil || e.PID != int32(doomed.PID()) || e.Reason != heartbeat.ExitReclaimed {
		t.Fatalf("exit event: %v %v", e, err)
	}
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != "survive me" {
		t.Fatalf("result %q", got[0])
	}
	if st := settled(t, f, c, 1); st.Resolved != 1 || st.Unmatched != 0 {
		t.Fatalf("client stats %+v", st)
	}
}
