package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// follower is a long-running ringctl (drain --follow, watch).
type follower struct {
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr bytes.Buffer
	done   chan struct{} // closed when it has exited
	wait   func() result // waits for its exit, bounded
}

// lockedBuffer is a bytes.Buffer the test reads while the child writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startFollower(t *testing.T, args ...string) *follower {
	t.Helper()
	exe := ringctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := &follower{cmd: exec.CommandContext(ctx, exe, args...), done: make(chan struct{})}
	f.cmd.Stdout, f.cmd.Stderr = &f.stdout, &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.cmd.Wait(); close(f.done) }()
	t.Cleanup(func() { f.cmd.Process.Signal(syscall.SIGCONT) })
	f.wait = func() result {
		<-f.done
		if ctx.Err() != nil {
			t.Fatalf("ringctl %v still running 30 s on: %q", args, f.stderr.String())
		}
		return result{code: f.cmd.ProcessState.ExitCode(), stdout: f.stdout.String(), stderr: f.stderr.String()}
	}
	return f
}

// printed waits until the follower has written want to stdout: it has
// opened the file and is following it. Bounded by progress, not time: it
// fails only if the follower exits first or 30 s pass.
func (f *follower) printed(t *testing.T, want string) {
	t.Helper()
	for !strings.Contains(f.stdout.String(), want) {
		select {
		case <-f.done:
			t.Fatalf("follower gone before printing %q: %q", want, f.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFollowersNoticeTruncation: drain --follow, blocked on an empty ring
// whose file is truncated under it, exits 3 with one line (it waited
// forever, then died of SIGBUS on Ctrl-C); watch exits 3 at its next frame
// when the file shrank, and when it was truncated and restored (holes).
// Each follower is seen following before the file is changed, and watch
// is stopped (SIGSTOP) while the file is truncated and restored, so that
// no frame falls between the two (it would rightly say "truncated").
func TestFollowersNoticeTruncation(t *testing.T) {
	path := newRing(t, 1024)
	f := startFollower(t, "drain", path, "--follow")
	run(t, "", "push", path, "--seq", "1:1")
	f.printed(t, "1")
	time.Sleep(100 * time.Millisecond) // blocked again, most likely; either way it must notice
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, f.wait(), path, "truncated")

	path = newRing(t, 1024)
	f = startFollower(t, "watch", path, "--interval", "20ms")
	f.printed(t, "\n")
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, f.wait(), path, "truncated")

	path = newRing(t, 1024)
	f = startFollower(t, "watch", path, "--interval", "20ms")
	f.printed(t, "\n")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()); err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	expectUnusable(t, f.wait(), path, "file has holes")
}
