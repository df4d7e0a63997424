package sched

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Crash points of the Pass scheduler and heartbeat table: a real process
// dies at each; a watchdog scan recovers, and the pass still completes.

func waitKilled(t *testing.T, c *proctest.Child, point string) {
	t.Helper()
	if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		out, errOut := c.Output()
		t.Fatalf("child did not die at %s: %v\n%s\n%s", point, err, out, errOut)
	}
}

func TestPassWorkerCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		point     string
		duplicate bool // the result may arrive twice
	}{
		{"pass.worker.after-claim", false},
		{"pass.worker.after-execute", false},
		{"pass.worker.after-result", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			f := newSchedFiles(t)
			s := startSched(t, f.config(0))
			doomed := startWorkers(t, f, 1, shm.CrashPointEnv+"="+tc.point)[0]
			tok, err := s.Submitter().Submit(context.Background(), closureEcho, []byte("payload"))
			if err != nil {
				t.Fatal(err)
			}
			waitKilled(t, doomed, tc.point)
			rep := s.ScanNow()
			if len(rep.Reclaimed) != 1 {
				t.Fatalf("report %+v", rep)
			}
			startWorkers(t, f, 1)
			col := s.Collector()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := col.Recv(ctx)
			if err != nil || r.Token != tok || string(r.Data) != "payload" {
				t.Fatalf("result %+v %v", r, err)
			}
			short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel2()
			if extra, err := col.Recv(short); err == nil && !(tc.duplicate && extra.Token == tok) {
				t.Fatalf("unexpected extra result %+v", extra)
			}
		})
	}
}

// TestHeartbeatRegisterCrash: a process killed while registering leaves a
// claiming slot; a watchdog proves the pid gone and frees it.
func TestHeartbeatRegisterCrash(t *testing.T) {
	f := newSchedFiles(t)
	h, err := CreateHeartbeat(f.hb, HeartbeatConfig{Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := proctest.Start(t, schedHelper, "sched-register", append(f.env(), shm.CrashPointEnv+"=hb.register.after-claim")...)
	waitKilled(t, c, "hb.register.after-claim")
	if p, _ := h.Snapshot(0); p.State != "claiming" || p.Health(0) != "dead" {
		t.Fatalf("slot %+v", p)
	}
	if _, err := h.Register("x"); err == nil {
		t.Fatal("registered into a table whose only slot is claimed")
	}
	if rep := NewWatchdog(h, WatchdogConfig{}).Scan(true); len(rep.Reclaimed) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := h.Register("x"); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogCrashBeforeFree: a watchdog dies after requeueing a dead
// holder's lease but before freeing its slot. The next scan finishes the
// job, and the message is in the ring exactly once.
func TestWatchdogCrashBeforeFree(t *testing.T) {
	f, h, _ := holderSetup(t)
	c := proctest.Start(t, schedHelper, "sched-watchdog", append(f.env(), shm.CrashPointEnv+"=hb.reclaim.before-free")...)
	waitKilled(t, c, "hb.reclaim.before-free")
	if p, _ := h.Snapshot(0); p.State != "reclaiming" {
		t.Fatalf("slot %+v", p)
	}
	r := openRing(t, f.submit)
	rep := NewWatchdog(h, WatchdogConfig{Rings: []*transport.Ring{r}}).Scan(true)
	if len(rep.Reclaimed) != 1 || len(rep.Problems) != 0 {
		t.Fatalf("report %+v", rep)
	}
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if _, err := r.TryPop(buf); err != transport.ErrEmpty {
		t.Fatalf("message requeued twice: %v", err)
	}
}
