package cliutil

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// grammarApp is a tool shaped like the shmkit ones: an action of its own
// with flags (hbdump's table), and commands taking PATH.
func grammarApp(got *[]string) *cli.App {
	record := func(c *cli.Context) error {
		*got = append([]string{c.Command.Name}, c.Args().Slice()...)
		for _, n := range []string{"json", "n", "stale", "format"} {
			if c.IsSet(n) {
				*got = append(*got, fmt.Sprintf("%s=%v", n, c.Value(n)))
			}
		}
		if c.IsSet("ring") {
			*got = append(*got, fmt.Sprintf("ring=%v", c.StringSlice("ring")))
		}
		return nil
	}
	return &cli.App{
		Name:   "tool",
		Flags:  append(FormatFlags("", FormatText, FormatJSON), &cli.DurationFlag{Name: "stale"}),
		Action: record,
		Commands: []*cli.Command{
			{Name: "sub", Action: record, Flags: append(FormatFlags("", FormatText, FormatJSON, FormatPrometheus),
				&cli.IntFlag{Name: "n"}, &cli.UintFlag{Name: "capacity"}, &cli.StringSliceFlag{Name: "ring"})},
			{Name: "bare", Action: record},
		},
	}
}

// TestFlagsGoAnywhereAfterTheCommand: the one grammar of every shmkit tool.
// Flags before or after the arguments mean the same; a flag typed before
// the command's name is the command's; "--" ends the flags; a value that
// looks like a flag is the flag's value; --generate-bash-completion stays
// last; --help anywhere is the command's help.
func TestFlagsGoAnywhereAfterTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // what the action saw: command, arguments, flags set
	}{
		{[]string{"sub", "P", "--json"}, "sub P json=true"},
		{[]string{"sub", "--json", "P"}, "sub P json=true"},
		{[]string{"--json", "sub", "P"}, "sub P json=true"},
		{[]string{"sub", "P", "--n", "-8"}, "sub P n=-8"},
		{[]string{"sub", "P", "--n=3", "--ring", "a", "--ring=b"}, "sub P n=3 ring=[a b]"},
		{[]string{"sub", "--", "-P"}, "sub -P"},
		{[]string{"sub", "P", "--", "--json"}, "sub P --json"},
		{[]string{"sub", "-", "--json"}, "sub - json=true"},
		{[]string{"P", "--stale", "1s"}, "tool P stale=1s"},
		{[]string{"--stale", "1s", "P", "--json"}, "tool P json=true stale=1s"},
		{[]string{"sub", "P", "--format", "prometheus"}, "sub P format=prometheus"},
	} {
		var got []string
		var stderr bytes.Buffer
		a := grammarApp(&got)
		a.Writer = &bytes.Buffer{}
		if code := Run(a, append([]string{"tool"}, tc.args...), &stderr); code != 0 {
			t.Errorf("%q: exit %d: %s", tc.args, code, stderr.String())
			continue
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("%q: action saw %q, want %q", tc.args, s, tc.want)
		}
	}

	var got []string
	a := grammarApp(&got)
	Prepare(a)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"tool", "sub", "P", "--n", "--generate-bash-completion"}, []string{"tool", "sub", "--n", "P", "--generate-bash-completion"}},
		{[]string{"tool", "sub", "P", "--json", "--generate-bash-completion"}, []string{"tool", "sub", "--json", "P", "--generate-bash-completion"}},
		{[]string{"tool", "sub", "P", "--help"}, []string{"tool", "sub", "--help"}},
		{[]string{"tool", "P", "-h"}, []string{"tool", "--help"}},
		{[]string{"tool", "sub", "P", "--n"}, []string{"tool", "sub", "--n"}}, // "--n needs a value", not n=P
	} {
		if out, _ := Reorder(a, tc.in); !slices.Equal(out, tc.want) {
			t.Errorf("Reorder(%q) = %q, want %q", tc.in, out, tc.want)
		}
	}
}

// TestUsageErrorsQuoteFlagsAsTyped: a refused command line is one line,
// exit 2, naming the command, quoting the flag as the user typed it, and
// for a bad value saying what is wrong.
func TestUsageErrorsQuoteFlagsAsTyped(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sub", "P", "--nope"}, "tool: sub: unknown flag --nope\n"},
		{[]string{"sub", "P", "-nope"}, "tool: sub: unknown flag -nope\n"},
		{[]string{"--nope", "sub", "P"}, "tool: sub: unknown flag --nope\n"},
		{[]string{"bare", "P", "--json"}, "tool: bare: unknown flag --json\n"},
		{[]string{"sub", "P", "--capacity", "-8"}, "tool: sub: --capacity -8: must not be negative\n"},
		{[]string{"sub", "P", "--capacity=x"}, "tool: sub: --capacity x: not a whole number\n"},
		{[]string{"sub", "P", "--n", "99999999999999999999"}, "tool: sub: --n 99999999999999999999: out of range\n"},
		{[]string{"P", "--stale", "5"}, "tool: --stale 5: not a duration (give a unit: 500ms, 10s, 2m)\n"},
		{[]string{"sub", "P", "--n"}, "tool: sub: --n needs a value\n"},
		{[]string{"sub", "P", "--json", "--format", "text"}, "tool: sub: --json is short for --format json: it excludes --format text\n"},
		{[]string{"sub", "P", "--format", "yaml"}, "tool: sub: --format yaml: want text, json or prometheus\n"},
		{[]string{"P", "--format", "prometheus"}, "tool: --format prometheus: want text or json\n"},
		{[]string{"help", "nope"}, "tool: help: no command \"nope\" (see tool help)\n"},
		{[]string{"--capacity", "3"}, "tool: unknown flag --capacity (a flag of tool sub: it goes after the command)\n"},
	} {
		var got []string
		var stderr bytes.Buffer
		a := grammarApp(&got)
		var stdout bytes.Buffer
		a.Writer = &stdout
		code := Run(a, append([]string{"tool"}, tc.args...), &stderr)
		if code != ExitUsage || stderr.String() != tc.want || stdout.Len() != 0 || got != nil {
			t.Errorf("%q: exit %d, stderr %q, stdout %q, ran %q; want exit 2, %q", tc.args, code, stderr.String(), stdout.String(), got, tc.want)
		}
	}
}

// TestEveryToolHasHelpVersionCompletionAndMan: with no arguments a tool
// prints its help, exit 0; `help` and --version work; the completion
// scripts and the manual page are generated from the command definitions
// (a command or flag added is in them without more work).
func TestEveryToolHasHelpVersionCompletionAndMan(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var got []string
		var stdout, stderr bytes.Buffer
		a := grammarApp(&got)
		a.Writer = &stdout
		code := Run(a, append([]string{"tool"}, args...), &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, args := range [][]string{nil, {"help"}, {"--help"}} {
		if code, out, _ := run(args...); code != 0 || !strings.Contains(out, "COMMANDS:") || !strings.Contains(out, "EXIT CODES:") || strings.Contains(out, "VERSION:") {
			t.Errorf("%q: exit %d\n%s", args, code, out)
		}
	}
	if code, out, _ := run("help", "sub"); code != 0 || !strings.Contains(out, "--capacity") || !strings.Contains(out, "EXIT CODES:") {
		t.Errorf("help sub: exit %d\n%s", code, out)
	}
	if code, out, _ := run("--version"); code != 0 || !strings.HasPrefix(out, "tool ") || strings.Contains(out, "(devel)") || !strings.Contains(out, "file format 3.0") {
		t.Errorf("--version: exit %d\n%s", code, out)
	}
	code, out, _ := run("man")
	if code != 0 || !strings.HasPrefix(out, ".nh") && !strings.Contains(out, ".TH") {
		t.Fatalf("man: exit %d\n%s", code, out)
	}
	for _, want := range []string{"sub", "bare", "completion", "capacity", "ring", "format"} {
		if !strings.Contains(out, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	for _, shell := range []string{"bash", "zsh"} {
		code, out, _ := run("completion", shell)
		if code != 0 || !strings.Contains(out, "_tool_complete") || !strings.Contains(out, "--generate-bash-completion") || strings.Contains(out, "TOOL") {
			t.Errorf("completion %s: exit %d\n%s", shell, code, out)
		}
	}
	if code, _, stderr := run("completion", "fish"); code != 2 || !strings.Contains(stderr, "fish") {
		t.Errorf("completion fish: exit %d, %q", code, stderr)
	}
}

// TestVersionIsNeverABareDevel: the module version when there is one, else
// the VCS revision, else a sentence; never "(devel)".
func TestVersionIsNeverABareDevel(t *testing.T) {
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}, "revision abc123"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, "revision abc123 (modified)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "unknown (built without VCS information"},
		{nil, "unknown (built without module information)"},
	} {
		got := version(tc.bi, tc.bi != nil)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "(devel)") {
			t.Errorf("version(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
		// Built in a checkout all the same (a git worktree, or GOFLAGS
		// holding -buildvcs=false): the sentence names both causes.
		if strings.Contains(got, "VCS") && (!strings.Contains(got, "git worktree") || !strings.Contains(got, "-buildvcs=false") || !strings.Contains(got, "go env GOFLAGS")) {
			t.Errorf("version(%+v) = %q: does not say why a checkout's build can lack the information", tc.bi, got)
		}
	}
}
