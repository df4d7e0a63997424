package pass

import (
	"context"
	"os"
	"testing"
)

// Every scheduler, submitter or worker pool, registers its process in the
// heartbeat table under its label (what hbdump shows and what the
// watchdog judges): this process's, and a worker process's seen from here.
func TestSchedulerRegistersInHeartbeatTable(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.config(0)
	cfg.Label = "svc-submitter"
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	worker := startBenchChild(t, f)

	find := func(label string, pid int) {
		t.Helper()
		for _, p := range s.Heartbeat().Snapshots() {
			if p.Label == label {
				if p.State != "active" || int(p.ID.PID) != pid || p.Health(0) != "alive" {
					t.Fatalf("%s: %+v, want active and alive, pid %d", label, p, pid)
				}
				return
			}
		}
		t.Fatalf("no participant labelled %q in %+v", label, s.Heartbeat().Snapshots())
	}
	find("svc-submitter", os.Getpid())
	find("test-worker", worker.PID())
	if p, err := s.Heartbeat().Snapshot(s.Member().Slot()); err != nil || p.Label != "svc-submitter" || !p.Self {
		t.Fatalf("own slot %d: %+v %v", s.Member().Slot(), p, err)
	}
	worker.Stop(t)
}
