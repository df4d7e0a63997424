package exporter

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// TestScrapesFollowLiveProcesses scrapes a directory over HTTP while real
// processes push into a ring, lease from it, pop from it, beat in a
// heartbeat table, and are killed: each scrape shows what the library
// reports at that moment (counters, depth, participants, the verdict),
// and /healthz turns from 200 to 503 when a death leaves something to
// repair.
func TestScrapesFollowLiveProcesses(t *testing.T) {
	dir := t.TempDir()
	ringPath, hbPath := filepath.Join(dir, "orders"), filepath.Join(dir, "cluster.hb")
	r, err := transport.CreateRing(ringPath, transport.RingConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	hb, err := heartbeat.Create(hbPath, heartbeat.Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	hb.Close()
	col := NewCollector([]string{dir}, Options{})
	srv := server(t, col)
	ring := []string{"file=" + ringPath, "kind=ring"}
	table := []string{"file=" + hbPath, "kind=heartbeat"}

	// A producer pushes 40 and stays; a consumer leases 3 and stays.
	pusher := helper.Start(t, "push", proctest.PathArg(ringPath), countEnv+"=40")
	pusher.WaitLine(t, "pushed")
	claimer := helper.Start(t, "claim", proctest.PathArg(ringPath), countEnv+"=3")
	claimer.WaitLine(t, "claimed")
	member := helper.Start(t, "member", proctest.PathArg(hbPath))
	member.WaitLine(t, "registered")

	m := scrape(t, srv)
	for _, c := range []struct {
		name  string
		want  float64
		extra []string
	}{
		{"shmkit_file_up", 1, nil},
		{"shmkit_healthy", 1, nil},
		{"shmkit_capacity", 64, nil},
		{"shmkit_depth", 37, nil}, // 40 pushed, 3 leased: the head is past them
		{"shmkit_ring_pushed_total", 40, nil},
		{"shmkit_ring_claimed_total", 3, nil},
		{"shmkit_participants", 2, []string{"state=alive"}},
		{"shmkit_participants", 0, []string{"state=dead"}},
		{"shmkit_findings_to_repair", 0, nil},
	} {
		if got := m.get(t, c.name, append(ring, c.extra...)...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.extra, got, c.want)
		}
	}
	if got := m.get(t, "shmkit_participants", append(table, "state=alive")...); got != 1 {
		t.Errorf("heartbeat alive = %v, want 1", got)
	}
	if got := m.get(t, "shmkit_heartbeat_dead", append(table, "label=worker")...); got != 0 {
		t.Errorf("heartbeat_dead{worker} = %v, want 0", got)
	}
	if code, body := health(t, srv, ""); code != http.StatusOK || !strings.HasPrefix(lastLine(body), "ok:") {
		t.Fatalf("/healthz with everyone alive: %d\n%s", code, body)
	}

	// The consumer dies holding its 3 leases, the member dies: the
	// library proves both dead, the findings say what a repair would do.
	kill(claimer)
	kill(member)
	m = scrape(t, srv)
	if got := m.get(t, "shmkit_healthy", ring...); got != 0 {
		t.Errorf("ring healthy = %v after a consumer died holding leases", got)
	}
	if got := m.get(t, "shmkit_participants", append(ring, "state=dead")...); got != 1 {
		t.Errorf("ring dead participants = %v, want 1", got)
	}
	if got := m.get(t, "shmkit_findings", append(ring, "problem=orphaned_lease")...); got != 3 {
		t.Errorf("orphaned leases = %v, want 3\n%s", got, m.dump("shmkit_findings"))
	}
	if got := m.get(t, "shmkit_findings_to_repair", ring...); got < 4 {
		t.Errorf("findings to repair = %v, want the 3 leases and the entry", got)
	}
	if got := m.get(t, "shmkit_heartbeat_dead", append(table, "label=worker")...); got != 1 {
		t.Errorf("heartbeat_dead{worker} = %v after its kill", got)
	}
	if got := m.get(t, "shmkit_healthy", table...); got != 0 {
		t.Errorf("heartbeat healthy = %v with a dead member", got)
	}
	code, body := health(t, srv, "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "problems "+ringPath) ||
		!strings.Contains(body, "problems "+hbPath) || !strings.HasPrefix(lastLine(body), "PROBLEMS:") {
		t.Fatalf("/healthz after the deaths: %d\n%s", code, body)
	}

	// A producer and a consumer run flat out while the test scrapes:
	// every scrape parses and lints, and the counters never go back.
	pump := helper.Start(t, "pump", proctest.PathArg(ringPath))
	pump.WaitLine(t, "pumping")
	drain := helper.Start(t, "drain", proctest.PathArg(ringPath))
	drain.WaitLine(t, "draining")
	var lastPushed, lastPopped float64
	for i := range 20 {
		m := scrape(t, srv)
		pushed, popped := m.get(t, "shmkit_ring_pushed_total", ring...), m.get(t, "shmkit_ring_popped_total", ring...)
		if pushed < lastPushed || popped < lastPopped {
			t.Fatalf("scrape %d: pushed %v popped %v, after %v and %v", i, pushed, popped, lastPushed, lastPopped)
		}
		lastPushed, lastPopped = pushed, popped
		if alive := m.get(t, "shmkit_participants", append(ring, "state=alive")...); alive != 3 {
			t.Fatalf("scrape %d: %v alive participants, want the pusher, the pump and the drain", i, alive)
		}
	}
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
		t.Fatalf("lint under load: %v %v", err, problems)
	}
	kill(pump)
	kill(drain)
	m = scrape(t, srv)
	if got := m.get(t, "shmkit_participants", append(ring, "state=dead")...); got != 3 {
		t.Errorf("dead participants = %v after three kills, want 3", got)
	}
	if got := m.get(t, "shmkit_participants", append(ring, "state=alive")...); got != 1 {
		t.Errorf("alive participants = %v, want the pusher", got)
	}
	if pushed := m.get(t, "shmkit_ring_pushed_total", ring...); pushed < lastPushed {
		t.Errorf("pushed %v after %v", pushed, lastPushed)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
