package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// running reports whether pid is a live process (not a zombie): hogs are
// reaped by stop, so a stopped hog's pid is gone altogether.
func running(t *testing.T, pid int) bool {
	t.Helper()
	err := unix.Kill(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false
	}
	b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	return !strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

func checkGone(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		if err := unix.Kill(p, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("hog %d still exists after the run (kill 0: %v)", p, err)
		}
	}
}

// Hogs run until stopped, and stop leaves none behind, not even a zombie.
func TestHogsAreGoneAfterStop(t *testing.T) {
	h, err := startHogs(t.Context(), 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pids := h.pids()
	if len(pids) != 2 {
		t.Fatalf("%d hogs, want 2", len(pids))
	}
	for _, p := range pids {
		if !running(t, p) {
			t.Errorf("hog %d is not running", p)
		}
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, pids)
}

// An interrupted run (its context ends, as on Ctrl-C) kills the hogs too.
func TestHogsAreKilledWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	h, err := startHogs(ctx, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pids := h.pids()
	cancel()
	for _, c := range h.kids {
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("hog %d still runs after its context ended", c.cmd.Process.Pid)
		}
	}
	h.stop() // reports that they exited "early": they were killed
	checkGone(t, pids)
}

// The default comparison with --hogs, scaled down: the busy section is
// there, and every hog it started is gone when it returns.
func TestCompareWithHogsLeavesNoHogBehind(t *testing.T) {
	var mu sync.Mutex
	var pids []int
	hogStarted = func(p []int) {
		mu.Lock()
		defer mu.Unlock()
		pids = append(pids, p...)
	}
	defer func() { hogStarted = nil }()
	out, code, err := runApp(t, "compare", "--messages", strconv.Itoa(testMsgs), "--rounds", "100", "--warmup", "10",
		"--repeat", "1", "--hogs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep CompareReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	busy := 0
	for _, r := range rep.Rows {
		if r.Hogs == 2 {
			busy++
		}
	}
	if busy != len(busyThroughput) || rep.Hogs != 2 {
		t.Errorf("%d busy rows (hogs %d), want %d", busy, rep.Hogs, len(busyThroughput))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pids) != 2 {
		t.Fatalf("%d hogs started, want 2", len(pids))
	}
	checkGone(t, pids)
	checkNoLeftovers(t)
}
