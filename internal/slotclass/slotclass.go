// Package slotclass puts the slots of a ring's or deque's Scan in the
// classes that ringctl inspect and watch count and that the exporter's
// shmkit_slots gauge reports, so that the three say one thing: how many
// messages wait (ready; a deque's returned), are being written or read,
// are leased (taken, not yet acknowledged), are held by the dead
// (orphaned), were set aside (poisoned), or are corrupt.
//
// It renders the library's verdicts (transport.SlotReport's state and
// problem) and decodes no word itself. It is not a check: what is wrong
// and what a repair does is transport's Check.
package slotclass

import "github.com/shmkit/shmkit/transport"

// The classes. Each slot is in exactly one; Orphaned takes writing,
// reading and leased slots whose owner is proven dead out of their
// state's class (Scan's verdict).
const (
	Free     = "free"
	Ready    = "ready"
	Writing  = "writing"
	Reading  = "reading"
	Leased   = "leased"
	Returned = "returned" // deques only: a message handed back, taken again after the newer ones
	Orphaned = "orphaned"
	Poisoned = "poisoned"
	Corrupt  = "corrupt"
)

// Ring and Deque are the classes of each kind, in the order inspect
// lists them.
var (
	Ring  = []string{Free, Ready, Writing, Reading, Leased, Orphaned, Poisoned, Corrupt}
	Deque = []string{Free, Ready, Writing, Reading, Leased, Returned, Orphaned, Poisoned, Corrupt}
)

// Of puts a slot from Scan in its class.
func Of(s transport.SlotReport) string {
	switch s.Problem {
	case transport.SlotCorrupt:
		return Corrupt
	case transport.SlotOrphanedWrite, transport.SlotOrphanedRead, transport.SlotOrphanedLease:
		return Orphaned
	}
	return s.Word.State.String()
}

// Count counts the slots of a scan in each class; every slot Scan does
// not list is free.
func Count(slots []transport.SlotReport, capacity uint64) map[string]uint64 {
	n := map[string]uint64{Free: capacity - uint64(len(slots))}
	for _, s := range slots {
		n[Of(s)]++
	}
	return n
}
