package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Processes that are not ours to wait for: the helper inside a new pid
// namespace (Helper.StartInPidNamespace: the unshare process's child) and
// grandchildren. A pidfd pins them and shows their exit.

// InnerOf returns a pidfd of the helper a Child started in a new pid
// namespace runs (pid 1 there, the only child of the unshare process c
// here). The helper must be running (it has printed a line).
func InnerOf(t testing.TB, c *Child) PidFD {
	t.Helper()
	parent := strconv.Itoa(c.PID())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == parent {
			return OpenPidFD(t, pid)
		}
	}
	t.Fatalf("no child of unshare (pid %s) found", parent)
	return PidFD{}
}

// PidFD pins a process: its exit is seen by polling it, whoever its
// parent is.
type PidFD struct {
	fd  int
	pid int
}

// OpenPidFD opens a pidfd of pid, SIGKILLed and closed when the test ends.
func OpenPidFD(t testing.TB, pid int) PidFD {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		unix.Close(fd)
	})
	return PidFD{fd: fd, pid: pid}
}

// Kill SIGKILLs the process.
func (p PidFD) Kill(t testing.TB) {
	t.Helper()
	if err := unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		t.Fatalf("kill pid %d: %v", p.pid, err)
	}
}

// WaitExited waits until the process has exited (its descriptors, and the
// locks of their open file descriptions, are closed by then), failing the
// test after 30 s.
func (p PidFD) WaitExited(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 100)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd of %d: %v", p.pid, err)
		}
		if n > 0 && fds[0].Revents&unix.POLLIN != 0 {
			return
		}
	}
	t.Fatalf("pid %d did not exit", p.pid)
}
