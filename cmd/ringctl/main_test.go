package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/proctest"
)

var update = flag.Bool("update", false, "rewrite the fixtures and golden files under testdata/")

func TestMain(m *testing.M) {
	flag.Parse()
	cliutil.ReadyWait = 0 // in-process runs: a file that is not ready is refused at once
	code := m.Run()
	proctest.RemoveBuilds()
	os.Exit(code)
}

// ringctl returns the path of the real binary, built once per test run.
func ringctl(t testing.TB) string { return proctest.BuildCommand(t, "ringctl") }

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the binary with args and stdin, bounded by a minute.
func run(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	exe := ringctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ringctl %v: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// fixtureFiles reads every fixture under testdata/ (the .shm files), by name.
func fixtureFiles(t testing.TB) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	fx := map[string][]byte{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".shm") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fx[e.Name()] = b
	}
	return fx
}

// fixtureDir copies every fixture into a fresh directory with mode 0600
// (shmkit refuses files more open than that, and git checks out 0644).
func fixtureDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range fixtureFiles(t) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// expectLine checks a failed run: the exit code, and one line on stderr
// starting "ringctl: " and containing want.
func expectLine(t testing.TB, r result, code int, want string) {
	t.Helper()
	if r.code != code || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "ringctl: ") || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want exit %d and one line with %q (stdout %q)", r.code, r.stderr, code, want, r.stdout)
	}
}
