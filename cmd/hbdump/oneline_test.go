package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue 15, item 5: two messages ran together on one line when stdout
// and stderr went to one pipe ("...nothing changed (use --apply)ringctl:
// ./x: 2 problems found"). For hbdump: over every fixture table, every
// verb that prints a report and a summary, the report ends its last line
// and each stderr line stands on a line of its own in the merged stream.
func TestMessagesOnLinesOfTheirOwn(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, ringFixture)
	copyFixture(t, dir, dequeFixture)
	var tables []string
	for _, f := range fixtures {
		copyFixture(t, dir, f.name)
		tables = append(tables, "./"+f.name)
	}
	verbs := [][]string{
		{}, {"--json"}, {"check"}, {"check", "--format", "json"}, {"check", "--format", "prometheus"},
		{"reap"}, {"reap", "--json"}, {"reap", "--ring", "./" + ringFixture, "--ring", "./" + dequeFixture},
	}
	for _, table := range tables {
		for _, verb := range verbs {
			args := append(append([]string{}, verb...), table)
			if len(verb) > 0 && strings.HasPrefix(verb[0], "-") {
				args = append([]string{table}, verb...)
			}
			sep := runHbdump(t, dir, args...)
			exe := hbdumpBin(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, exe, args...)
			cmd.Dir = dir
			var both bytes.Buffer
			cmd.Stdout, cmd.Stderr = &both, &both
			cmd.Run()
			cancel()
			out := both.String()
			if out != "" && !strings.HasSuffix(out, "\n") {
				t.Errorf("hbdump %s: the output does not end its last line:\n%s", strings.Join(args, " "), out)
			}
			for _, line := range strings.Split(strings.TrimSuffix(sep.stderr, "\n"), "\n") {
				if line != "" && !strings.HasPrefix(out, line+"\n") && !strings.Contains(out, "\n"+line+"\n") {
					t.Errorf("hbdump %s: stderr line %q runs into another:\n%s", strings.Join(args, " "), line, out)
				}
			}
		}
	}
}
