package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/transport"
)

// Issue 15, item 5: push read a stream without a bound (--file /dev/zero
// spun at 100 % for ever) and ignored SIGINT and SIGTERM while reading
// (--file on a FIFO without a writer, --file - on a silent pipe).

// TestPushEndlessStreamRefused: a message is at most the slot payload, so
// push stops reading an endless stream soon past the limit and refuses it
// (exit 1, one line), by itself: no signal needed.
func TestPushEndlessStreamRefused(t *testing.T) {
	path := newRing(t, 4)
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	defer zero.Close()
	for _, args := range [][]string{
		{"push", path, "--file", "/dev/zero"},
		{"push", path, "--file", "-"}, // stdin is /dev/zero
		{"push", path},                // one line, never ending
	} {
		r := runStdin(t, zero, args...)
		expectLine(t, r, 1, "message 1 is over ")
		if !strings.Contains(r.stderr, "(read no further), more than the limit of 56 bytes") {
			t.Errorf("%v: %q", args, r.stderr)
		}
	}
	if r := run(t, "", "drain", path); r.code != 0 || r.stdout != "" {
		t.Fatalf("something was pushed: %+v", r)
	}
}

// runStdin is run with a file as standard input, bounded by 30 s.
func runStdin(t *testing.T, stdin *os.File, args ...string) result {
	t.Helper()
	exe := ringctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ringctl %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ringctl %v did not finish in 30 s", args)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// TestPushBlockedReadEndsOnSignal: push blocked opening a FIFO nobody
// writes to, or reading a pipe nobody writes to, ends at SIGTERM or
// SIGINT with "interrupted" (exit 1, as Ctrl-C on a full ring), nothing
// pushed, its participant entry released.
func TestPushBlockedReadEndsOnSignal(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tc := range []struct {
		name  string
		args  func(ring string) []string
		stdin bool     // stdin is a pipe the test holds open and never writes
		wchan []string // where the child blocks (kernels name it differently)
	}{
		{"fifo without a writer", func(ring string) []string { return []string{"push", ring, "--file", fifo} }, false, []string{"wait_for_partner"}},
		{"silent pipe, --file -", func(ring string) []string { return []string{"push", ring, "--file", "-"} }, true, []string{"pipe_read", "anon_pipe_read", "pipe_wait"}},
		{"silent pipe, lines", func(ring string) []string { return []string{"push", ring} }, true, []string{"pipe_read", "anon_pipe_read", "pipe_wait"}},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(tc.name+" "+sig.String(), func(t *testing.T) {
				ring := newRing(t, 4)
				exe := ringctl(t)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, exe, tc.args(ring)...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if tc.stdin {
					pr, pw, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					defer pw.Close()
					defer pr.Close()
					cmd.Stdin = pr
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				waitBlocked(t, ring, cmd.Process.Pid, tc.wchan, exited)
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err := <-exited
				if ctx.Err() != nil {
					t.Fatalf("push did not end at %v (killed after 30 s)", sig)
				}
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
				expectLine(t, r, 1, "interrupted")
				if !strings.Contains(r.stderr, "0 messages were pushed") {
					t.Errorf("stderr %q", r.stderr)
				}
				if got := attached(t, ring, cmd.Process.Pid); got {
					t.Errorf("the interrupted push left its participant entry")
				}
			})
		}
	}
}

// waitBlocked waits until the child pid is attached to ring (so its
// signal handling is set up: ringctl installs it before opening anything)
// and, best effort, until one of its threads sleeps in wchan. It fails if
// the child exits first.
func waitBlocked(t *testing.T, ring string, pid int, wchan []string, exited <-chan error) {
	t.Helper()
	seen := false
	for i := 0; ; i++ {
		select {
		case err := <-exited:
			t.Fatalf("push exited before the signal: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if !seen {
			seen = attached(t, ring, pid)
			continue
		}
		if inWchan(pid, wchan) {
			return
		}
		if i > 400 { // about 2 s after attaching: the kernel names it differently
			t.Logf("no thread of pid %d seen in %v; signalling anyway", pid, wchan)
			return
		}
	}
}

// attached reports whether pid holds an active entry of ring.
func attached(t *testing.T, ring string, pid int) bool {
	t.Helper()
	r, err := transport.OpenRingReadOnly(ring)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range r.Peers() {
		if int(p.ID.PID) == pid && (p.State == "active" || p.State == "claiming") {
			return true
		}
	}
	return false
}

func inWchan(pid int, wchan []string) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
	for _, f := range tasks {
		if b, err := os.ReadFile(f); err == nil && slices.Contains(wchan, strings.TrimSpace(string(b))) {
			return true
		}
	}
	return false
}
