package pass

import (
	"os"
	"testing"
)

// Every pool and every client registers its process in the heartbeat
// table under its label (what hbdump shows and what the watchdog judges):
// this process's pool and client, and a worker process's pool seen from
// here, each active and alive under its own pid; each side's own slot is
// its own (Self). A client's slot is also the address its results come
// to (its ticket and reply ring).
func TestPoolAndClientRegisterInHeartbeatTable(t *testing.T) {
	f := newSchedFiles(t)
	ccfg := f.client()
	ccfg.Label = "svc-client"
	c := startClient(t, ccfg)
	pcfg := f.pool(1)
	pcfg.Label = "svc-pool"
	p := startPool(t, pcfg)
	worker := startBenchChild(t, f)

	find := func(label string, pid int) int {
		t.Helper()
		for _, s := range c.Heartbeat().Snapshots() {
			if s.Label == label {
				if s.State != "active" || int(s.ID.PID) != pid || s.Health(0) != "alive" {
					t.Fatalf("%s: %+v, want active and alive, pid %d", label, s, pid)
				}
				return s.Slot
			}
		}
		t.Fatalf("no participant labelled %q in %+v", label, c.Heartbeat().Snapshots())
		return -1
	}
	if slot := find("svc-client", os.Getpid()); slot != int(c.Ticket().Slot) {
		t.Fatalf("the client's slot %d, its ticket names %d", slot, c.Ticket().Slot)
	}
	if slot := find("svc-pool", os.Getpid()); slot != p.Member().Slot() {
		t.Fatalf("the pool's slot %d, its member names %d", slot, p.Member().Slot())
	}
	find("test-worker", worker.PID())
	if s, err := c.Heartbeat().Snapshot(int(c.Ticket().Slot)); err != nil || s.Label != "svc-client" || !s.Self || s.Gen != c.Ticket().Gen {
		t.Fatalf("the client's own slot %d: %+v %v", c.Ticket().Slot, s, err)
	}
	if s, err := p.Heartbeat().Snapshot(p.Member().Slot()); err != nil || s.Label != "svc-pool" || !s.Self {
		t.Fatalf("the pool's own slot %d: %+v %v", p.Member().Slot(), s, err)
	}
	if want := ReplyPath(f.submit, int(c.Ticket().Slot)); c.ReplyPath() != want {
		t.Fatalf("reply ring %s, want %s", c.ReplyPath(), want)
	}
	worker.Stop(t)
}
