package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport/check"
)

// findingJSON is one finding of a file's Check (check.Finding), or one
// thing a repair did, as inspect, verify and repair print it. Kind is a
// check.Problem name and Action a check.Action name (docs/cli.md
// lists both); Location names the field as hexdump labels it.
type findingJSON struct {
	Kind     string  `json:"kind"`
	Location string  `json:"location"`
	Offset   uint64  `json:"offset"`
	Word     string  `json:"word,omitempty"`     // the word as read, "0x..." (absent when 0 or not about one word)
	Position *uint64 `json:"position,omitempty"` // the queue position of a slot finding
	Owner    int     `json:"owner"`              // the participant entry the word names, -1 for none
	PID      int32   `json:"pid,omitempty"`      // the owner's pid
	Dead     *bool   `json:"dead,omitempty"`     // the owner is proven dead (absent without an owner)
	Verdict  string  `json:"verdict,omitempty"`  // why the owner is judged dead or alive
	Repairer bool    `json:"repairer,omitempty"` // the owner is the table's repairer entry (owner = participants)
	Action   string  `json:"action"`
	Detail   string  `json:"detail"`
}

// findingsJSON renders a library's findings, in its order. participants
// is the size of the file's participant table (check.Report.Participants):
// entry number participants is the repairer entry.
func findingsJSON(fs []check.Finding, participants uint64) []findingJSON {
	out := []findingJSON{}
	for _, f := range fs {
		fj := findingJSON{Kind: string(f.Problem), Location: f.Location, Offset: f.Offset, Owner: f.Owner,
			Verdict: f.Verdict, Repairer: f.Owner >= 0 && uint64(f.Owner) == participants && participants > 0,
			Action: string(f.Action), Detail: cliutil.StripPrefixes(f.Detail)}
		if f.Raw != 0 {
			fj.Word = fmt.Sprintf("%#016x", f.Raw)
		}
		if f.HasPosition {
			pos := f.Position
			fj.Position = &pos
		}
		if f.Owner >= 0 {
			dead := f.Dead
			fj.PID, fj.Dead = f.OwnerID.PID, &dead
		}
		out = append(out, fj)
	}
	return out
}

// actionable counts the findings a repair acts on (an action other than
// none): what CheckReport.Plan keeps.
func actionable(fs []findingJSON) int {
	n := 0
	for _, f := range fs {
		if f.Action != string(check.ActionNone) {
			n++
		}
	}
	return n
}

// writeFindings prints findings as the one table inspect, verify and
// repair share.
func writeFindings(w io.Writer, fs []findingJSON) error {
	rows := [][]string{}
	for _, f := range fs {
		off := "-" // a finding outside the file (a heartbeat member)
		if f.Offset != 0 {
			off = fmt.Sprintf("%#x", f.Offset)
		}
		loc := f.Location
		if f.Repairer && strings.HasPrefix(loc, fmt.Sprintf("participant[%d].", f.Owner)) {
			loc += " (repairer)" // the repairer entry's own word
		}
		rows = append(rows, []string{loc, off, f.Kind, f.Action, f.Detail})
	}
	return cliutil.DetailTable(w, []string{"location", "offset", "problem", "action", "detail"}, rows)
}

// checkJSON is the problem list inspect shows: Check's findings, and how
// many (the number verify reports).
type checkJSON struct {
	Problems int           `json:"problems"`
	Findings []findingJSON `json:"findings"`
}

func newCheckJSON(rep check.Report) checkJSON {
	fs := findingsJSON(rep.Findings, rep.Participants)
	return checkJSON{Problems: len(fs), Findings: fs}
}

// line is the problems line of inspect's text.
func (p checkJSON) line() string {
	if p.Problems == 0 {
		return "none"
	}
	return plural(p.Problems, "problem", "problems") + " (listed below; ringctl repair says what it would do)"
}

// write prints the list, if any, after a blank line.
func (p checkJSON) write(w io.Writer) error {
	if p.Problems == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return writeFindings(w, p.Findings)
}
