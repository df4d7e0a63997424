package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 15, item 5: a file the user may not open (another user's, mode
// 0600) gave "permission denied" with exit 1; cli.md says 3, "the file
// cannot be used". Run as root: the binary runs as nobody (uid 65534) on
// root's files, and root runs it on a file chowned to nobody.

// asNobody copies bin into a directory everyone may enter, and returns a
// runner of it as uid and gid 65534 there.
func asNobody(t *testing.T, bin string) (dir string, runAs func(args ...string) result) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the binary as another user (uid 65534)")
	}
	dir, err := os.MkdirTemp("", "shmkit-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(copyBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, copyBin, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v as uid 65534: %v", args, err)
		}
		return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	}
}

func TestPermissionDeniedIsUnusable(t *testing.T) {
	dir, runAs := asNobody(t, ringctl(t))
	ring := filepath.Join(dir, "ring")
	if r := run(t, "", "create", ring, "--capacity", "4"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	for _, args := range [][]string{
		{"inspect", ring}, {"verify", ring}, {"hexdump", ring}, {"watch", ring, "--count", "1"},
		{"repair", ring}, {"repair", ring, "--apply"}, {"push", ring, "--seq", "1:2"}, {"drain", ring},
	} {
		r := runAs(args...)
		if r.code != 3 || !strings.HasPrefix(r.stderr, "ringctl: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "permission denied") {
			t.Errorf("%v as another user: exit %d, stderr %q; want exit 3 and one line saying permission denied", args, r.code, r.stderr)
		}
	}
	// Root on nobody's file: refused as another user's (shm.Open's rule), exit 3.
	if err := os.Chown(ring, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	expectLine(t, run(t, "", "inspect", ring), 3, "owned by another user")
}
