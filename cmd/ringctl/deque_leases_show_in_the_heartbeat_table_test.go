package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/transport"
)

// A deque created by ringctl, drained by a real `ringctl drain --exec
// --heartbeat` that holds a lease when it is SIGKILLed: hbdump --ring
// names who holds which deque message, watch warns of the dead process's
// message on stderr, repair --heartbeat --apply returns the message and
// reclaims the member, and the message then comes after the newer ones.
func TestDequeLeasesShowInTheHeartbeatTable(t *testing.T) {
	dir := t.TempDir()
	deque, hb, started := filepath.Join(dir, "jobs"), filepath.Join(dir, "hb"), filepath.Join(dir, "started")
	r := run(t, "", "create", deque, "--kind", "deque", "--capacity", "8", "--participants", "4")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created "+deque+": a deque of 8 slots") || !strings.Contains(r.stdout, "calls Adopt") {
		t.Fatalf("create: %+v", r)
	}
	owner, err := transport.OpenDeque(deque)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Adopt(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"job-1", "job-2", "job-3"} {
		if err := owner.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := owner.Close(); err != nil { // the messages stay; the deque has no owner
		t.Fatal(err)
	}

	// --heartbeat needs --create-heartbeat for a table that is not there.
	expectLine(t, run(t, "", "drain", deque, "--heartbeat", hb, "--exec", "true"), 3, "add --create-heartbeat")
	if _, err := os.Stat(hb); !os.IsNotExist(err) {
		t.Fatalf("a refused --heartbeat created the table: %v", err)
	}
	cmd := exec.Command(ringctl(t), "drain", deque, "--heartbeat", hb, "--create-heartbeat", "--max", "1",
		"--exec", fmt.Sprintf(`echo "$RINGCTL_POS" >> %s; exec sleep 60`, started))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for deadline := time.Now().Add(20 * time.Second); countLines(started) < 1; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("drain ended before it held its lease: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("drain never held its lease")
		}
	}
	pid := cmd.Process.Pid

	// hbdump names the live holder of the deque's message 0.
	hbdump := buildHbdump(t)
	out, err := exec.Command(hbdump, hb, "--ring", deque).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprint(pid)) || !strings.Contains(string(out), hbLabel) || !strings.Contains(string(out), deque+"@0") {
		t.Fatalf("hbdump while the drain holds its lease: %v\n%s", err, out)
	}

	syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	r = run(t, "", "watch", deque, "--count", "1")
	if r.code != 0 || r.stderr != fmt.Sprintf("ringctl: %s: 1 message of dead processes, not delivered until a repair gives it back: run ringctl repair %s --apply\n", deque, deque) {
		t.Fatalf("watch after the kill: %+v", r)
	}
	out, _ = exec.Command(hbdump, "check", hb, "--ring", deque).CombinedOutput()
	if !strings.Contains(string(out), fmt.Sprintf("pid %d (%s) dead", pid, hbLabel)) || !strings.Contains(string(out), deque+"@0 d1") {
		t.Fatalf("hbdump check after the kill:\n%s", out)
	}

	rep, r := repairJSON(t, deque, "--heartbeat", hb, "--apply", "--no-backup")
	if r.code != 0 || rep.Result == nil || rep.Result.Counts["return"] != 1 || len(rep.Result.Reclaimed) != 1 ||
		rep.Result.Reclaimed[0].PID != int32(pid) || rep.Result.Reclaimed[0].Label != hbLabel {
		t.Fatalf("repair --heartbeat --apply: %+v", r)
	}
	r = run(t, "", "watch", deque, "--count", "1")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("watch after the repair warns still: %+v", r)
	}
	if r := run(t, "", "drain", deque); r.code != 0 || r.stdout != "job-2\njob-3\njob-1\n" || r.stderr != "" {
		t.Fatalf("drain after the repair: %+v (want the returned job-1 after the newer ones)", r)
	}
	var plan repairReport
	r = run(t, "", "repair", deque, "--heartbeat", hb, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || r.code != 0 || plan.ToRepair != 0 {
		t.Fatalf("a second repair plans something: %v %+v", err, r)
	}
}

// buildHbdump builds the hbdump command beside this one, for tests that
// look at a heartbeat table the way an operator does.
func buildHbdump(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hbdump")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, "../hbdump").CombinedOutput(); err != nil {
		t.Fatalf("building hbdump: %v\n%s", err, out)
	}
	return bin
}
