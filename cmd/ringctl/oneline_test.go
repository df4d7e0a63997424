package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 15, item 5: "...nothing changed (use --apply)ringctl: ./x: 2
// problems found". TestSummaryOnItsOwnLine covers the text reports of
// inspect, verify and repair; this covers the other forms (JSON, --apply)
// over every fixture: stdout and stderr into one pipe, the output ends
// its last line and each stderr line stands on a line of its own.
func TestEveryFormOnLinesOfItsOwn(t *testing.T) {
	names, _ := openedFixtures(t)
	files := fixtureFiles(t)
	dir := t.TempDir()
	verbs := [][]string{
		{"inspect", "--json"}, {"verify", "--json"}, {"repair", "--json"},
		{"repair", "--apply", "--no-backup"}, {"repair", "--apply", "--no-backup", "--json"},
	}
	for _, name := range names {
		for _, verb := range verbs {
			// A fresh copy for each of the two runs: --apply changes it.
			path := filepath.Join(dir, name)
			args := func() []string {
				if err := os.WriteFile(path, files[name], 0o600); err != nil {
					t.Fatal(err)
				}
				return append([]string{verb[0], path}, verb[1:]...)
			}
			sep := run(t, "", args()...)
			exe := ringctl(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, exe, args()...)
			var both bytes.Buffer
			cmd.Stdout, cmd.Stderr = &both, &both
			cmd.Run()
			cancel()
			out := both.String()
			what := strings.Join(verb, " ") + " " + name
			if out != "" && !strings.HasSuffix(out, "\n") {
				t.Errorf("%s: the output does not end its last line:\n%s", what, out)
			}
			for _, line := range strings.Split(strings.TrimSuffix(sep.stderr, "\n"), "\n") {
				if line != "" && !strings.HasPrefix(out, line+"\n") && !strings.Contains(out, "\n"+line+"\n") {
					t.Errorf("%s: stderr line %q runs into another:\n%s", what, line, out)
				}
			}
		}
	}
}
