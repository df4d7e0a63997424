package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/proctest"
)

// runRefused runs the command line in-process with a context that has
// ended already, and returns stdout, stderr and the error main would
// print: a check that lets a mistake through fails the first measurement
// at once (exit 1, context canceled) instead of measuring for minutes.
func runRefused(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	app := newApp(&out, &errOut)
	cliutil.Prepare(app) // the grammar cliutil.Run gives every tool
	ordered, _ := cliutil.Reorder(app, append([]string{"passbench"}, args...))
	err = app.RunContext(ctx, ordered)
	return out.String(), errOut.String(), err
}

// A mistake on the command line is found before the first measurement:
// exit 2, a message that says what is wrong, and nothing on stdout or
// stderr before it (stdout is not a terminal here, so a measurement that
// had started would have announced its stage on stderr).
func TestFlagsAreRefusedBeforeAnythingIsMeasured(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "taken.svg"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--plot", "/nonexistent/dir/x.png"}, "--plot /nonexistent/dir/x.png: directory /nonexistent/dir does not exist"},
		{[]string{"compare", "--plot", filepath.Join(file, "x.png")}, "is not a directory"},
		{[]string{"compare", "--plot", filepath.Join(dir, "taken.svg")}, "exists and is not a regular file"},
		{[]string{"compare", "--plot", filepath.Join(dir, "x.pdf")}, "--plot wants a .svg or .png file name"},
		{[]string{"compare", "--messages", "0"}, "--messages must be at least 1, got 0 (leave it out for the default)"},
		{[]string{"compare", "--messages", "-5"}, "--messages must be at least 1, got -5"},
		{[]string{"compare", "--duration", "0s"}, "--duration must be positive, got 0s (leave it out for the default)"},
		{[]string{"compare", "--duration", "-1s"}, "--duration must be positive, got -1s"},
		{[]string{"compare", "--rounds", "0"}, "--rounds must be at least 1, got 0"},
		{[]string{"compare", "--warmup", "-1"}, "--warmup must not be negative, got -1"},
		// Checked by the line-up's own specs, before the first row, not
		// when the first row that needs it comes up.
		{[]string{"compare", "--payload", "8"}, "--payload must be in"},
		{[]string{"compare", "--timeout", "0s"}, "timeout must be positive"},
		{[]string{"compare", "--rounds", "2000000000"}, "rounds plus warm-up must stay below"},
		{[]string{"compare", "--repeat", "0"}, "--repeat must be in [1, 1000], got 0"},
		{[]string{"run", "--messages", "0"}, "--messages must be at least 1, got 0"},
		{[]string{"run", "--duration", "0s"}, "--duration must be positive, got 0s"},
		{[]string{"run", "--duration", "-2s"}, "--duration must be positive, got -2s"},
		{[]string{"run", "--plot", "/nonexistent/x.svg"}, "directory /nonexistent does not exist"},
		{[]string{"run", "--batch", "1025"}, "--batch must be in [0, 1024], got 1025"},
		{[]string{"run", "--transport", "deque", "--batch", "-1"}, "--batch must be in [0, 1024], got -1"},
		{[]string{"run", "--transport", "pipe", "--batch", "8"}, "--batch needs the ring or the deque: transport pipe has no batch calls"},
		{[]string{"run", "--transport", "deque", "--loan"}, "--loan needs the ring: the deque has no loans (it has batch calls: --batch)"},
		{[]string{"run", "--transport", "uds", "--loan"}, "--loan needs the ring: transport uds has no loans"},
		{[]string{"run", "--batch", "8", "--loan"}, "--batch and --loan do not go together"},
		{[]string{"run", "--transport", "deque", "--batch", "8", "--lease"}, "--batch and --loan do not go with --lease or --chaos"},
		{[]string{"run", "--batch", "8", "--chaos", "1", "--consumers", "2"}, "--batch and --loan do not go with --lease or --chaos"},
		{[]string{"rtt", "--rounds", "0"}, "--rounds must be at least 1, got 0"},
		{[]string{"rtt", "--plot", "/nonexistent/x.svg"}, "directory /nonexistent does not exist"},
		{[]string{"pass", "--passes", "0"}, "--passes must be at least 1, got 0"},
		{[]string{"pass", "--duration", "0s"}, "--duration must be positive, got 0s"},
		{[]string{"pass", "--plot", "/nonexistent/x.png"}, "directory /nonexistent does not exist"},
	} {
		out, errOut, err := runRefused(t, tc.args...)
		if code := cliutil.Code(err); code != cliutil.ExitUsage {
			t.Errorf("%v: exit %d (%v), want 2", tc.args, code, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %q, want it to say %q", tc.args, err, tc.want)
		}
		if out != "" || errOut != "" {
			t.Errorf("%v: printed %q on stdout and %q on stderr before refusing", tc.args, out, errOut)
		}
	}
}

// Root may write into a directory without write permission, so this one
// needs another user.
func TestPlotIntoAClosedDirectoryIsRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write into any directory")
	}
	closed := filepath.Join(t.TempDir(), "closed")
	if err := os.Mkdir(closed, 0o500); err != nil {
		t.Fatal(err)
	}
	_, _, err := runRefused(t, "rtt", "--plot", filepath.Join(closed, "x.svg"))
	if cliutil.Code(err) != cliutil.ExitUsage || !strings.Contains(err.Error(), "cannot create files in "+closed) {
		t.Errorf("got %v", err)
	}
}

// The built command, as a user runs it: the comparison (a minute
// and a half when it measures) with a --plot that cannot be written ends
// at once with exit 2 and one line, and no stage line before it.
func TestBadPlotEndsTheBuiltCommandBeforeMeasuring(t *testing.T) {
	bin := proctest.BuildCommand(t, "passbench")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--plot", "/nonexistent/dir/x.png"}, "passbench: compare: --plot /nonexistent/dir/x.png: directory /nonexistent/dir does not exist\n"},
		{[]string{"compare", "--messages", "0"}, "passbench: compare: --messages must be at least 1, got 0 (leave it out for the default)\n"},
		{[]string{"compare", "--duration", "0s", "--json"}, "passbench: compare: --duration must be positive, got 0s (leave it out for the default)\n"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != cliutil.ExitUsage {
			t.Errorf("%v: %v, want exit status 2", tc.args, err)
		}
		if stdout.Len() != 0 || stderr.String() != tc.want {
			t.Errorf("%v: stdout %q, stderr %q; want only %q", tc.args, stdout.String(), stderr.String(), tc.want)
		}
	}
}
