package cliutil

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

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

// PipeWidth is the width DetailTable keeps to when the output is not a
// terminal: a table piped to a file or a pager stays readable there.
const PipeWidth = 100

// DetailTable is Table for rows whose last column is long prose (a
// finding's detail). When the table fits the terminal, or PipeWidth when
// the output is not one, it is Table. Otherwise the last column holds a
// reference ("[1]") and the texts follow the table, one per reference,
// wrapped to that width: no row is wider than the screen, and each detail
// is a paragraph of its own.
func DetailTable(w io.Writer, headers []string, rows [][]string) error {
	width := Width(w)
	if width <= 0 {
		width = PipeWidth
	}
	if len(headers) == 0 || tableWidth(headers, rows) <= width {
		return Table(w, headers, rows)
	}
	last := len(headers) - 1
	short := make([][]string, len(rows))
	var details []string
	for i, r := range rows {
		short[i] = append([]string{}, r...)
		if last < len(r) && r[last] != "" && r[last] != "-" {
			details = append(details, r[last])
			short[i][last] = fmt.Sprintf("[%d]", len(details))
		}
	}
	if err := Table(w, headers, short); err != nil {
		return err
	}
	for i, d := range details {
		ref := fmt.Sprintf("[%d] ", i+1)
		for j, line := range wrap(d, width-len(ref)) {
			if j > 0 {
				ref = strings.Repeat(" ", len(ref))
			}
			if _, err := fmt.Fprintf(w, "%s%s\n", ref, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableWidth is the width Table draws rows at: every column as wide as its
// widest cell, one space each side, and a border between and around.
func tableWidth(headers []string, rows [][]string) int {
	cols := make([]int, len(headers))
	for i, h := range headers {
		cols[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(cols) {
				cols[i] = max(cols[i], utf8.RuneCountInString(c))
			}
		}
	}
	total := 1
	for _, c := range cols {
		total += c + 3
	}
	return total
}

// wrap breaks s into lines of at most width runes at spaces (a word longer
// than width gets a line of its own).
func wrap(s string, width int) []string {
	width = max(width, 20)
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
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
