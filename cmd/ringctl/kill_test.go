package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDrainLeaseKilled: a drain --lease --exec killed with SIGKILL in the
// middle of a ring of numbered messages loses none of them. repair --apply
// (with the heartbeat table the drain registered in) brings back what it
// held, a second drain handles the rest, and every number was handled at
// least once.
func TestDrainLeaseKilled(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	ring, hb, out := filepath.Join(dir, "ring"), filepath.Join(dir, "hb"), filepath.Join(dir, "handled")
	if r := run(t, "", "create", ring, "--capacity", "512"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "push", ring, "--seq", "1:"+strconv.Itoa(n)); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	handler := fmt.Sprintf(`x=$(cat); echo "$x" >> %s`, out)
	drain := exec.Command(ringctl(t), "drain", ring, "--heartbeat", hb, "--create-heartbeat", "--exec", handler)
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- drain.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); countLines(out) < 50; time.Sleep(2 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("drain ended before it was killed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			drain.Process.Kill()
			t.Fatal("drain handled fewer than 50 messages in 30s")
		}
	}
	drain.Process.Signal(syscall.SIGKILL)
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("drain was not killed: %v", err)
	}

	// The dry run sees the dead drain: its participant entry (and a lease,
	// unless the kill fell between two messages) and its heartbeat slot.
	r := run(t, "", "repair", ring, "--heartbeat", hb, "--json")
	var plan repairReport
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || r.code != 1 || plan.ToRepair < 2 {
		t.Fatalf("%v %+v", err, r)
	}
	r = run(t, "", "repair", ring, "--heartbeat", hb, "--apply", "--no-backup", "--json")
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	pid := int32(drain.Process.Pid)
	if res := rep.Result; len(res.DeadParticipants) != 1 || res.DeadParticipants[0].PID != pid ||
		len(res.Reclaimed) != 1 || res.Reclaimed[0].PID != pid || res.Reclaimed[0].Label != hbLabel || res.Counts["defer"] != 0 {
		t.Fatalf("pid %d: %s", pid, r.stdout)
	}

	if r := run(t, "", "drain", ring, "--lease", "--heartbeat", hb, "--exec", handler); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	seen := map[int]int{}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		v, err := strconv.Atoi(sc.Text())
		if err != nil || v < 1 || v > n {
			t.Fatalf("handled %q, not a number pushed", sc.Text())
		}
		seen[v]++
	}
	dups := 0
	for v := 1; v <= n; v++ {
		switch seen[v] {
		case 0:
			t.Errorf("message %d was never handled", v)
		case 1:
		default:
			dups++
		}
	}
	if dups > 1 {
		t.Errorf("%d messages handled twice; only the one in flight at the kill may be", dups)
	}
	for _, args := range [][]string{{"verify", ring}, {"repair", ring, "--heartbeat", hb}} {
		if r := run(t, "", args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}
