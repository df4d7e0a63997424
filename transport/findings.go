package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// findings accumulates a Check's findings.
type findings struct{ list []check.Finding }

// add records a finding.
func (fs *findings) add(f check.Finding) { fs.list = append(fs.list, f) }

// addAll records findings made elsewhere (the participant table's).
func (fs *findings) addAll(list []check.Finding) { fs.list = append(fs.list, list...) }

// addf records a finding about the field loc at offset off, with no owner
// and a formatted detail.
func (fs *findings) addf(p check.Problem, loc string, off uint64, act check.Action, format string, args ...any) {
	fs.add(check.Finding{Problem: p, Location: loc, Offset: off, Owner: -1, Action: act, Detail: fmt.Sprintf(format, args...)})
}

// checkReserved records the header bytes a format x.0 leaves reserved
// that are not zero (check.ReservedHeader). hdr is the file's first
// layout.HeaderSize bytes.
func checkReserved(fs *findings, h layout.Header, hdr []byte) {
	fs.addAll(check.ReservedHeader(h, hdr))
}

// confirmed runs a kind's check twice and keeps only what the second
// reading confirms: the findings of the first whose word (location,
// problem and raw value) the second finds again. A file nobody changes
// reads the same twice, so nothing is lost there; on a live file a
// reading can meet a slot taken meanwhile, or a participant that attached
// after the table was read and then stamped a slot, and judge moving state
// as a problem. Such a word has changed by the second reading, so the
// finding is dropped; one that stays is reported as first read (its
// action is the first reading's plan). A clean first reading is not read
// again.
func confirmed(run func() check.Report) check.Report {
	first := run()
	if first.Clean() {
		return first
	}
	type key struct {
		loc string
		p   check.Problem
		raw uint64
	}
	again := map[key]bool{}
	for _, f := range run().Findings {
		again[key{f.Location, f.Problem, f.Raw}] = true
	}
	kept := first.Findings[:0:0]
	for _, f := range first.Findings {
		if again[key{f.Location, f.Problem, f.Raw}] {
			kept = append(kept, f)
		}
	}
	first.Findings = kept
	return first
}
