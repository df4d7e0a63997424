package pass

import (
	"context"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Crash points of the Pass scheduler's workers: a real process dies at
// each; a watchdog scan recovers, and the pass still completes. (The
// heartbeat table's and the watchdog's own crash points are tested in
// package heartbeat.)

func TestPassWorkerCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		point     string
		duplicate bool // the result may arrive twice
	}{
		{crashPassWorkerAfterClaim, false},
		{crashPassWorkerAfterExecute, false},
		{crashPassWorkerAfterResult, true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			f := newSchedFiles(t)
			s := startSched(t, f.config(0))
			doomed := startWorkers(t, f, 1, proctest.Arm(tc.point, 1)...)[0]
			tok, err := s.Submitter().Submit(context.Background(), closureEcho, []byte("payload"))
			if err != nil {
				t.Fatal(err)
			}
			doomed.WaitKilled(t, tc.point)
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
