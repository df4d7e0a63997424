package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An in bridge whose ring is full holds at most one fetch and waits (a
// message waiting for room is kept with in-progress acks); drained, the
// ring gets everything. Its status says so, on /status, on SIGUSR1 and in
// shmbridge status, and /metrics has the counters.
func TestFullRingStopsTheFetching(t *testing.T) {
	const n, capacity = 500, 16
	srv := startServer(t)
	js := srv.client(t)
	fillStream(t, js, "BP", "bp.msgs", 0, n)
	b := newRing(t, capacity)
	rb := openRing(t, b)
	in := startBridge(t, nil, inArgs(srv, b, "BP", "bp.msgs", "--batch", "64", "--listen", "127.0.0.1:0")...)
	addr := strings.TrimSuffix(strings.TrimPrefix(in.waitLine(t, "serving http://"), "serving http://"), "/metrics and /status")

	waitFor(t, "the ring to fill", func() bool { return rb.Counters().Depth() == capacity })
	var st status
	waitFor(t, "a push waiting for room", func() bool {
		st = fetchStatus(t, addr)
		return st.Counters["full_waits"] > 0 && st.InFlight == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, "BP", "in")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The acks of the messages pushed went out on the bridge's
	// connection before the fetch whose message now waits: the server
	// has them. So exactly the waiting message is pending; a bridge that
	// ignored the ring's room would have fetched up to --batch.
	if ci.NumAckPending > 1 {
		t.Fatalf("%d messages delivered and not acked while the ring is full, want at most 1 (the one waiting for room): the bridge fetched past the ring's room", ci.NumAckPending)
	}
	if st.Counters["pushed"] != capacity {
		t.Fatalf("pushed %d into a ring of %d that nobody drains", st.Counters["pushed"], capacity)
	}

	// shmbridge status, the SIGUSR1 line and /metrics.
	r := runTool(t, "status", addr, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"schema":"shmbridge.status/1"`) || !strings.Contains(r.stdout, `"direction":"in"`) {
		t.Fatalf("shmbridge status: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	before := strings.Count(func() string { o, _ := in.output(); return o }(), "\n")
	_ = in.cmd.Process.Signal(syscall.SIGUSR1)
	waitFor(t, "the SIGUSR1 status line", func() bool {
		o, _ := in.output()
		return strings.Count(o, "\n") > before && strings.Contains(o[strings.LastIndex(o[:len(o)-1], "\n")+1:], `"full_waits"`)
	})
	metrics := httpGet(t, "http://"+addr+"/metrics")
	for _, name := range []string{"shmkit_bridge_full_waits_total", "shmkit_bridge_pushed_total", "shmkit_bridge_in_flight", "shmkit_bridge_connected", "shmkit_bridge_lag"} {
		if !strings.Contains(metrics, name+"{") {
			t.Fatalf("/metrics has no %s:\n%s", name, metrics)
		}
	}

	got := newTally()
	drainRing(t, rb, got, n)
	got.check(t, n)
	in.stop(t)
}

func fetchStatus(t testing.TB, addr string) status {
	t.Helper()
	r := runTool(t, "status", addr, "--json")
	if r.code != 0 {
		t.Fatalf("shmbridge status %s: exit %d: %s", addr, r.code, r.stderr)
	}
	var st status
	if err := jsonUnmarshal(r.stdout, &st); err != nil {
		t.Fatalf("status %q: %v", r.stdout, err)
	}
	return st
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// result is what one short run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// runTool runs the binary to its end, bounded by testTimeout.
func runTool(t testing.TB, args ...string) result {
	t.Helper()
	exe := shmbridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("shmbridge %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("shmbridge %v did not finish: %s %s", args, stdout.String(), stderr.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

var _ = jetstream.ConsumerInfo{}
