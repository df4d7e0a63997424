package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Files truncated, restored or holed under ringctl (issue 15, item 3): no
// command dies of a file's size or holes; each says so in one line naming
// the file, exit 3.

const faultHelper = "TestRingctlFaultHelperProcess"

// TestRingctlFaultHelperProcess is the child side: the truncator.
func TestRingctlFaultHelperProcess(t *testing.T) {
	role, _ := proctest.Role()
	proctest.RunTruncator(role)
}

// crashed reports whether a run died instead of reporting: a Go fatal
// error or panic, a signal, or the usage exit code for no usage error.
func crashed(r result) bool {
	for _, s := range []string{"SIGBUS", "fatal error", "goroutine ", "panic", "internal error"} {
		if strings.Contains(r.stderr, s) {
			return true
		}
	}
	return r.code < 0 || r.code == 2
}

// expectUnusable checks a run that must fail as unusable: exit 3, one
// line "ringctl: PATH: ..." containing want.
func expectUnusable(t *testing.T, r result, path, want string) {
	t.Helper()
	expectLine(t, r, 3, path+": ")
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q lacks %q", r.stderr, want)
	}
}

// TestCommandsWhileTruncated: a child truncates the ring and restores it
// in a loop while ringctl verify, inspect, hexdump, watch, drain and push
// run a fixed number of times. None may crash (verify died of SIGBUS in
// 68 runs of 100); each run succeeds, finds problems (exit 1), or says in
// one line naming the file that it cannot be used (exit 3).
func TestCommandsWhileTruncated(t *testing.T) {
	path := newRing(t, 1024)
	run(t, "", "push", path, "--seq", "1:20")
	proctest.StartTruncator(t, faultHelper, path)
	cmds := [][]string{
		{"verify", path}, {"inspect", path}, {"hexdump", path}, {"watch", path, "--count", "2", "--interval", "1ms"},
		{"drain", path, "--max", "1"}, {"push", path, "--seq", "1:1"},
	}
	runs := 25 * len(cmds)
	if testing.Short() {
		runs = 4 * len(cmds)
	}
	codes := map[string]map[int]int{}
	for i := 0; i < runs; i++ {
		args := cmds[i%len(cmds)]
		r := run(t, "", args...)
		if crashed(r) {
			t.Fatalf("ringctl %v crashed: exit %d\n%s", args, r.code, r.stderr)
		}
		switch r.code {
		case 0, 1:
			if r.code == 1 {
				t.Logf("ringctl %v: exit 1: %q", args, r.stderr)
			}
		case 3:
			expectLine(t, r, 3, path+": ")
		default:
			t.Fatalf("ringctl %v: exit %d, %q", args, r.code, r.stderr)
		}
		if codes[args[0]] == nil {
			codes[args[0]] = map[int]int{}
		}
		codes[args[0]][r.code]++
	}
	t.Logf("exit codes by command over %d runs: %v", runs, codes)
}

// sparseRing makes a ring with a message at a fresh path and a sparse copy
// of it (as cp --sparse=always makes) at dst.
func sparseRing(t *testing.T, dst string) {
	t.Helper()
	src := newRing(t, 4096)
	run(t, "", "push", src, "--seq", "7:7")
	proctest.SparseCopy(t, src, dst)
}

// TestSparseCopy: the read-only commands refuse a ring copied sparse (exit
// 3, "file has holes"); push and drain, which open it for writing, reserve
// its holes and work, after which verify finds it clean.
func TestSparseCopy(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "copy")
	sparseRing(t, dst)
	for _, args := range [][]string{{"verify", dst}, {"inspect", dst}, {"watch", dst, "--count", "1"}} {
		expectUnusable(t, run(t, "", args...), dst, "file has holes")
	}
	if r := run(t, "", "drain", dst); r.code != 0 || r.stdout != "7\n" {
		t.Fatalf("drain: %+v", r)
	}
	if r := run(t, "", "verify", dst); r.code != 0 {
		t.Fatalf("verify after the fill: %+v", r)
	}
}

// TestSparseCopyOnFullTmpfs: a ring copied sparse onto a full tmpfs: every
// command exits 3 with one line naming the file and its holes (push and
// drain died of SIGBUS inside attach). Needs root to mount a small tmpfs.
func TestSparseCopyOnFullTmpfs(t *testing.T) {
	dir := proctest.SmallTmpfs(t, "256k")
	dst := filepath.Join(dir, "copy")
	sparseRing(t, dst)
	proctest.FillFilesystem(t, dir)
	// repair --apply plans through a read-only open first.
	for _, args := range [][]string{{"verify", dst}, {"inspect", dst}, {"hexdump", dst}, {"repair", dst}, {"repair", dst, "--apply"}} {
		expectUnusable(t, run(t, "", args...), dst, "file has holes")
	}
	for _, args := range [][]string{{"push", dst, "--seq", "1:1"}, {"drain", dst}, {"drain", dst, "--follow"}} {
		r := run(t, "", args...)
		expectUnusable(t, r, dst, "file has holes")
		if !strings.Contains(r.stderr, "no space") {
			t.Fatalf("ringctl %v: %q does not say the filesystem is full", args, r.stderr)
		}
	}
}

// startFollower starts a long-running ringctl (drain --follow, watch) and
// returns a function that waits for its exit, bounded.
func startFollower(t *testing.T, args ...string) func() result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, ringctl(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() result {
		cmd.Wait()
		if ctx.Err() != nil {
			t.Fatalf("ringctl %v still running 30 s on: %q", args, stderr.String())
		}
		return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	}
}

// TestFollowersNoticeTruncation: drain --follow, blocked on an empty ring
// whose file is truncated under it, exits 3 with one line (it waited
// forever, then died of SIGBUS on Ctrl-C); watch exits 3 at its next frame
// when the file shrank, and when it was truncated and restored (holes).
func TestFollowersNoticeTruncation(t *testing.T) {
	path := newRing(t, 1024)
	wait := startFollower(t, "drain", path, "--follow")
	time.Sleep(300 * time.Millisecond) // blocked by now
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, wait(), path, "truncated")

	path = newRing(t, 1024)
	wait = startFollower(t, "watch", path, "--interval", "20ms")
	time.Sleep(200 * time.Millisecond)
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, wait(), path, "truncated")

	path = newRing(t, 1024)
	wait = startFollower(t, "watch", path, "--interval", "20ms")
	time.Sleep(200 * time.Millisecond)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, wait(), path, "file has holes")
}
