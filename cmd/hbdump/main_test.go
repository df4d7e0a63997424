package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The command is built once, by the first test that runs it, into a
// directory TestMain removes. Child processes and fuzz workers, which run
// no such test, never build it.
var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// hbdumpBin returns the built command.
func hbdumpBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "hbdump-test-"); buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "hbdump")
		if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building hbdump: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// runHbdump runs the built command in dir (so fixtures are named ./NAME)
// with TZ=UTC and a deadline.
func runHbdump(t testing.TB, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hbdumpBin(t), args...)
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
