package cliutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("x"), ExitProblems},
		{fmt.Errorf("open /x: %w", shm.ErrNotExist), ExitUnusable},
		{fmt.Errorf("%w", layout.ErrBadMagic), ExitUnusable},
		{fmt.Errorf("%w", layout.ErrVersionMismatch), ExitUnusable},
		{Usage("bad"), ExitUsage},
		{Problems("found 2"), ExitProblems},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func app(action cli.ActionFunc) *cli.App {
	return &cli.App{Name: "tool", Action: action, Flags: []cli.Flag{&cli.IntFlag{Name: "n"}},
		Commands: []*cli.Command{{Name: "sub", Flags: []cli.Flag{&cli.StringFlag{Name: "req", Required: true}}, Action: action}}}
}

func TestRunOneLineErrorsAndCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		action cli.ActionFunc
		code   int
		stderr string
	}{
		{"ok", []string{"x"}, func(*cli.Context) error { return nil }, 0, ""},
		{"unusable", []string{"x"}, func(*cli.Context) error {
			return fmt.Errorf("/dev/shm/x: %w", layout.ErrBadMagic)
		}, 3, "tool: /dev/shm/x: layout: not a shmkit file (bad magic)\n"},
		{"panic", []string{"x"}, func(*cli.Context) error { panic("boom") }, 1, "tool: internal error: boom\n"},
		{"bad flag", []string{"--nope"}, func(*cli.Context) error { return nil }, 2, ""},
		{"bad flag value", []string{"--n", "x"}, func(*cli.Context) error { return nil }, 2, ""},
		{"missing required", []string{"sub"}, func(*cli.Context) error { return nil }, 2, ""},
		{"multi-line error", []string{"x"}, func(*cli.Context) error { return errors.New("a\nb") }, 1, "tool: a b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			a := app(tc.action)
			a.Writer = &bytes.Buffer{}
			code := Run(a, append([]string{"tool"}, tc.args...), &stderr)
			if code != tc.code {
				t.Fatalf("code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if tc.stderr != "" && stderr.String() != tc.stderr {
				t.Fatalf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
			if strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
				t.Fatalf("more than one line on stderr: %q", stderr.String())
			}
		})
	}
}

func TestWatchPlainFramesAndCancel(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	err := Watch(ctx, &out, time.Millisecond, func(frame int) (string, error) {
		if frame == 2 {
			cancel()
		}
		return fmt.Sprintf("frame %d", frame), nil
	})
	if err != nil || out.String() != "frame 0\nframe 1\nframe 2\n" {
		t.Fatalf("%v %q", err, out.String())
	}
}

func TestTable(t *testing.T) {
	var out bytes.Buffer
	if err := Table(&out, []string{"a", "b"}, [][]string{{"1", "two"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "two") || !strings.Contains(out.String(), "a") {
		t.Fatalf("%q", out.String())
	}
}
