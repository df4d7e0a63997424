package cliutil

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// A table whose detail cells would make it wider than PipeWidth (the
// output is not a terminal here) moves the details below it, wrapped, so
// that no line is wider than PipeWidth; one that fits is Table's.
func TestDetailTableKeepsToTheWidth(t *testing.T) {
	long := strings.Repeat("a dead consumer's message goes back to the queue ", 5)
	tests := []struct {
		name    string
		rows    [][]string
		refs    bool // the details move below the table
		details []string
	}{
		{"fits", [][]string{{"slot[0].word", "short detail"}}, false, nil},
		{"too wide", [][]string{{"slot[0].word", long}, {"slot[1].word", "-"}, {"slot[2].word", "short"}}, true, []string{long, "short"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"location", "detail"}
			var got, plain bytes.Buffer
			if err := DetailTable(&got, headers, tc.rows); err != nil {
				t.Fatal(err)
			}
			if err := Table(&plain, headers, tc.rows); err != nil {
				t.Fatal(err)
			}
			if !tc.refs {
				if got.String() != plain.String() {
					t.Fatalf("a table that fits changed:\n%s\nwant\n%s", got.String(), plain.String())
				}
				return
			}
			out := got.String()
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if n := utf8.RuneCountInString(line); n > PipeWidth {
					t.Errorf("line of %d columns, want at most %d: %q", n, PipeWidth, line)
				}
			}
			if !strings.Contains(out, "│ [1]") || !strings.Contains(out, "│ [2]") || strings.Contains(out, "[3]") {
				t.Errorf("want references [1] and [2] in the table (the \"-\" cell has none):\n%s", out)
			}
			// Each detail is below, whole: its words in order after its reference.
			below := out[strings.LastIndex(out, "┘")+len("┘"):]
			for i, d := range tc.details {
				ref := "[" + string(rune('1'+i)) + "] "
				at := strings.Index(below, ref)
				if at < 0 {
					t.Fatalf("no %q below the table:\n%s", ref, below)
				}
				para := below[at+len(ref):]
				if next := strings.Index(para, "\n["); next >= 0 {
					para = para[:next]
				}
				if strings.Join(strings.Fields(para), " ") != strings.Join(strings.Fields(d), " ") {
					t.Errorf("detail %s is %q, want %q", ref, para, d)
				}
			}
		})
	}
}
