package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proctest.RemoveBuilds()
	os.Exit(code)
}

// hbdumpBin returns the built command.
func hbdumpBin(t testing.TB) string { return proctest.BuildCommand(t, "hbdump") }

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// runHbdump runs the built command in dir (so fixtures are named ./NAME)
// with TZ=UTC and a deadline.
func runHbdump(t testing.TB, dir string, args ...string) result {
	t.Helper()
	exe := hbdumpBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		res.code = ee.ExitCode()
	default:
		t.Fatalf("hbdump %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, res.stdout, res.stderr)
	}
	if strings.Contains(res.stderr, "goroutine ") || strings.Contains(res.stderr, "panic:") {
		t.Fatalf("hbdump %s crashed:\n%s", strings.Join(args, " "), res.stderr)
	}
	if n := strings.Count(strings.TrimSuffix(res.stderr, "\n"), "\n"); n > 0 {
		t.Errorf("hbdump %s: %d lines on stderr, want at most one:\n%s", strings.Join(args, " "), n+1, res.stderr)
	}
	return res
}
