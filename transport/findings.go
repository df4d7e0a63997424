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
