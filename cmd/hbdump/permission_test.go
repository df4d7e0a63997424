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

// Issue 15, item 5: a table the user may not open (another user's, mode
// 0600) gave "permission denied" with exit 1; cli.md says 3. As root, the
// binary runs as nobody (uid 65534) on root's table and ring.
func TestPermissionDeniedIsUnusable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the binary as another user (uid 65534)")
	}
	dir, err := os.MkdirTemp("", "shmkit-denied-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(hbdumpBin(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hbdump")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runHbdump(t, dir, "create", "./hb", "--capacity", "4"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	for _, args := range [][]string{
		{"./hb"}, {"check", "./hb"}, {"watch", "./hb", "--count", "1"}, {"reap", "./hb"}, {"reap", "./hb", "--apply"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		code, msg := cmd.ProcessState.ExitCode(), stderr.String()
		if code != 3 || !strings.HasPrefix(msg, "hbdump: ") || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "permission denied") {
			t.Errorf("%v as another user: exit %d, stderr %q; want exit 3 and one line saying permission denied", args, code, msg)
		}
	}
}
