package cliutil

import (
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// Width returns the terminal width of w, or 0 when w is not a terminal.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !IsTerminal(w) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// Table renders rows under headers: the one table style of every command,
// sized to the terminal when there is one.
func Table(w io.Writer, headers []string, rows [][]string) error {
	opts := []tablewriter.Option{tablewriter.WithHeaderAutoFormat(tw.Off)}
	if width := Width(w); width > 0 {
		opts = append(opts, tablewriter.WithMaxWidth(width))
	}
	t := tablewriter.NewTable(w, opts...)
	t.Header(anys(headers)...)
	for _, r := range rows {
		if err := t.Append(anys(r)...); err != nil {
			return err
		}
	}
	return t.Render()
}

// KeyValues renders two-column "name  value" lines, for headers of reports.
func KeyValues(w io.Writer, pairs [][2]string) {
	width := 0
	for _, p := range pairs {
		width = max(width, len(p[0]))
	}
	for _, p := range pairs {
		fmt.Fprintf(w, "%-*s  %s\n", width, p[0], p[1])
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Colours for states on a terminal.
const (
	Red    = "\x1b[31m"
	Yellow = "\x1b[33m"
	Green  = "\x1b[32m"
	Reset  = "\x1b[0m"
)

// Colour wraps s in a colour when on is true.
func Colour(on bool, colour, s string) string {
	if !on {
		return s
	}
	return colour + s + Reset
}
