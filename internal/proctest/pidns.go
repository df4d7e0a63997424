package proctest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Children in a pid namespace of their own, as a container's processes
// are: started under `unshare --pid --fork --mount-proc --kill-child`, the
// child is pid 1 (or 2) of a new pid namespace with its own /proc, and
// dies with the unshare process, so Kill (SIGKILL to unshare) takes the
// whole namespace down. It needs root (or a user namespace allowing it);
// where unshare is missing or refused, the test is skipped with the reason.

var (
	unshareOnce sync.Once
	unshareErr  string
)

// RequirePidNamespaces skips the test unless this machine lets tests
// start children in new pid namespaces.
func RequirePidNamespaces(t testing.TB) {
	t.Helper()
	unshareOnce.Do(func() {
		path, err := exec.LookPath("unshare")
		if err != nil {
			unshareErr = "unshare(1) not found: " + err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--pid", "--fork", "--mount-proc", "--kill-child", "true").CombinedOutput()
		if err != nil {
			unshareErr = "unshare --pid --fork --mount-proc refused (needs root): " + err.Error() + ": " + string(out)
		}
	})
	if unshareErr != "" {
		t.Skip("no new pid namespaces here: " + unshareErr)
	}
}

// StartInPidNamespace starts a child of h in role, as Start does, inside a
// new pid namespace (skipping the test where that is not permitted).
// Child.PID is the unshare process's pid on this side; the child itself
// sees its own pid as 1.
func (h Helper) StartInPidNamespace(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	RequirePidNamespaces(t)
	return startWrapped(t, DefaultTimeout, []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, h.Test, h.Prefix+role, env...)
}

// startWrapped starts the test binary's helperTest in role under the
// command prefix wrap (a program and its arguments, the binary's command
// line following them).
func startWrapped(t testing.TB, timeout time.Duration, wrap []string, helperTest, role string, env ...string) *Child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	args := append(append([]string(nil), wrap[1:]...), os.Args[0], "-test.run=^"+helperTest+"$", "-test.count=1", "-test.timeout="+timeout.String())
	cmd := exec.CommandContext(ctx, wrap[0], args...)
	return startCmd(t, cancel, cmd, role, env...)
}
