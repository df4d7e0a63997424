// Package proctest runs real child processes from Go tests.
//
// A test that needs another process re-executes its own test binary with
// -test.run pointing at a helper test and an environment variable naming the
// role the child plays. The helper test calls Role at its top: in the parent
// Role returns false and the helper returns at once; in a child it returns true
// and the helper does the child's work and exits.
//
// Every child is bounded by a deadline and killed in t.Cleanup, so a hung child
// fails the test instead of hanging CI. Children are always reaped.
package proctest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RoleEnv is the environment variable that carries a child's role.
const RoleEnv = "SHMKIT_TEST_ROLE"

// DefaultTimeout bounds a child that the caller did not bound itself.
const DefaultTimeout = 60 * time.Second

// Role reports the role this process was started with, and whether it is a
// child at all.
func Role() (string, bool) {
	r := os.Getenv(RoleEnv)
	return r, r != ""
}

// Child is a running child process.
type Child struct {
	Cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	mu     sync.Mutex
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

// Start re-executes the test binary running only helperTest (a test name, for
// example "TestHelperProcess") with the given role and extra environment
// entries ("KEY=value"). The child is killed and reaped when the test ends.
func Start(t testing.TB, helperTest, role string, env ...string) *Child {
	t.Helper()
	return StartTimeout(t, DefaultTimeout, helperTest, role, env...)
}

// StartTimeout is Start with an explicit deadline for the child.
func StartTimeout(t testing.TB, timeout time.Duration, helperTest, role string, env ...string) *Child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+helperTest+"$", "-test.count=1", "-test.timeout="+timeout.String())
	return startCmd(t, cancel, cmd, role, env...)
}

// startCmd starts cmd, a run of the test binary (maybe under a wrapper),
// as a Child in role.
func startCmd(t testing.TB, cancel context.CancelFunc, cmd *exec.Cmd, role string, env ...string) *Child {
	t.Helper()
	// Under -race a child that exits normally sleeps 1 s in the race
	// runtime's atexit hook; children are many, so skip it.
	cmd.Env = append(filteredEnv(), RoleEnv+"="+role, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	c := &Child{Cmd: cmd, done: make(chan struct{}), cancel: cancel}
	cmd.Stdout = &lockedWriter{mu: &c.mu, w: &c.stdout}
	cmd.Stderr = &lockedWriter{mu: &c.mu, w: &c.stderr}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("proctest: start child %q: %v", role, err)
	}
	go func() {
		c.err = cmd.Wait()
		if c.err != nil {
			_, errOut := c.Output()
			recordKilled(errOut)
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Kill()
		<-c.done
		cancel()
	})
	return c
}

// filteredEnv drops any role inherited from a parent that is itself a child.
func filteredEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, RoleEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// PID returns the child's process id.
func (c *Child) PID() int { return c.Cmd.Process.Pid }

// Kill sends SIGKILL; it is a no-op once the child has exited.
func (c *Child) Kill() {
	select {
	case <-c.done:
	default:
		_ = c.Cmd.Process.Kill()
	}
}

// Wait waits for the child to exit and returns cmd.Wait's error.
func (c *Child) Wait() error {
	<-c.done
	return c.err
}

// Done is closed when the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Output returns what the child has written to stdout and stderr so far.
func (c *Child) Output() (stdout, stderr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String(), c.stderr.String()
}

// MustSucceed waits for the child and fails the test, with the child's
// output, unless it exited 0.
func (c *Child) MustSucceed(t testing.TB) {
	t.Helper()
	if err := c.Wait(); err != nil {
		out, errOut := c.Output()
		t.Fatalf("child %v failed: %v\nstdout:\n%s\nstderr:\n%s", c.Cmd.Args, err, out, errOut)
	}
}

// WaitLine waits until the child has printed a line starting with prefix
// and returns that line. The test fails if the child exits first, or after
// 30 seconds.
func (c *Child) WaitLine(t testing.TB, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := c.Output()
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		select {
		case <-c.Done():
			// It may have printed the line just before exiting: look
			// once more at everything it wrote.
			out, errOut := c.Output()
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, prefix) {
					return line
				}
			}
			t.Fatalf("child exited before printing %q: %v\n%s\n%s", prefix, c.Wait(), out, errOut)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("child never printed %q", prefix)
	return ""
}

// WaitKilled waits for the child and fails the test unless it died at the
// crash point it was armed with: killed, and its stderr has the line
// CrashPointMark+point it writes just before it kills itself there. A
// SIGKILL from anywhere else (a timeout, another point) fails.
func (c *Child) WaitKilled(t testing.TB, point string) {
	t.Helper()
	if !c.DiedAt(point) {
		out, errOut := c.Output()
		t.Fatalf("child %v did not die at crash point %s (exit: %v)\nstdout:\n%s\nstderr:\n%s", c.Cmd.Args, point, c.Wait(), out, errOut)
	}
}

// Stop sends SIGTERM and fails the test unless the child then exits 0.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	_ = c.Cmd.Process.Signal(syscall.SIGTERM)
	c.MustSucceed(t)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
