package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDepthMeansQueuedInInspectWatchAndServe: a walkthrough asked whether
// `ringctl serve`'s shmkit_depth counts a leased message (claimed, not yet
// acked). It does not, and neither do inspect's and watch's depth: depth
// is the messages queued, waiting to be taken. A message taken and not
// acknowledged is counted apart, by one classification in all three
// (inspect's states, watch's leased and orphaned, the exporter's
// shmkit_slots): leased while its consumer lives, orphaned once that
// consumer is SIGKILLed, queued again (depth + 1) after repair --apply.
func TestDepthMeansQueuedInInspectWatchAndServe(t *testing.T) {
	ring := newRing(t, 8)
	if r := run(t, "", "push", ring, "--seq", "1:3"); r.code != 0 {
		t.Fatalf("push: %+v", r)
	}
	started := filepath.Join(t.TempDir(), "started")
	drain := exec.Command(ringctl(t), "drain", ring, "--lease", "--max", "1",
		"--exec", fmt.Sprintf(`echo "$RINGCTL_POS" >> %s; exec sleep 100`, started))
	drain.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- drain.Wait() }()
	t.Cleanup(func() { syscall.Kill(-drain.Process.Pid, syscall.SIGKILL) })
	waitFor(t, func() bool { return countLines(started) == 1 })

	serve := exec.Command(ringctl(t), "serve", ring, "--listen", "127.0.0.1:0")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving http://") {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	addr := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(line, "serving http://"))[0], "/metrics")
	metric := func(body, name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in the scrape:\n%s", name, body)
		}
		return m[1]
	}
	labels := fmt.Sprintf(`{file=%q,id=%q,kind="ring"`, ring, inspectJSON(t, ring).ID)

	// expect checks all three views: depth, and the slots leased,
	// orphaned and ready.
	expect := func(when string, depth, ready, leased, orphaned uint64) {
		t.Helper()
		rep := inspectJSON(t, ring)
		if rep.Depth != depth || rep.States.Ready != ready || rep.States.Leased != leased || rep.States.Orphaned != orphaned {
			t.Errorf("%s: inspect: depth %d, ready %d, leased %d, orphaned %d; want %d, %d, %d, %d",
				when, rep.Depth, rep.States.Ready, rep.States.Leased, rep.States.Orphaned, depth, ready, leased, orphaned)
		}
		w := run(t, "", "watch", ring, "--count", "1")
		for _, want := range []string{fmt.Sprintf("depth=%d/8 ", depth), fmt.Sprintf("leased=%d ", leased), fmt.Sprintf("orphaned=%d ", orphaned)} {
			if w.code != 0 || !strings.Contains(w.stdout, want) {
				t.Errorf("%s: watch printed %q (exit %d), want %q", when, w.stdout, w.code, want)
			}
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		for name, want := range map[string]uint64{
			"shmkit_depth" + labels + "}":                      depth,
			"shmkit_slots" + labels + `,state="ready"}`:        ready,
			"shmkit_slots" + labels + `,state="leased"}`:       leased,
			"shmkit_slots" + labels + `,state="orphaned"}`:     orphaned,
			"shmkit_slots" + labels + `,state="free"}`:         8 - ready - leased - orphaned,
			"shmkit_participants" + labels + `,state="alive"}`: leased,
			"shmkit_participants" + labels + `,state="dead"}`:  orphaned,
			"shmkit_findings_to_repair" + labels + "}":         2 * orphaned, // the lease and the entry
		} {
			if got := metric(body, name); got != fmt.Sprint(want) {
				t.Errorf("%s: %s = %s, want %d", when, name, got, want)
			}
		}
	}
	expect("a live consumer holds message 1", 2, 2, 1, 0)

	syscall.Kill(-drain.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the killed drain was not reaped")
	}
	expect("its consumer SIGKILLed", 2, 2, 0, 1)

	if r := run(t, "", "repair", ring, "--apply", "--no-backup"); r.code != 0 {
		t.Fatalf("repair --apply: %+v", r)
	}
	expect("repaired: the message queued again", 3, 3, 0, 0)
	if _, err := os.Stat(ring); err != nil {
		t.Fatal(err)
	}
}
