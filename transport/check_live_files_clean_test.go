package transport

import (
	"sync/atomic"
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// A healthy file that live processes use must check clean: Check reads
// the participant table, the slot words and the positions at different
// moments, and a reading can meet a slot taken meanwhile or a participant
// that attached after the table was read. Check confirms every finding by
// a second reading (confirmed) and drops what changed. Found by an
// adversarial review: "owner entry is free" and bad_lap on healthy rings
// and deques under attach/lease/ack/detach churn, so ringctl verify
// exited 1 on them. Bounded by a count of checks, not by time.
const liveChecks = 3000

func TestCheckIsCleanOnAHealthyRingUnderChurn(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, Participants: 2})
	ro, err := OpenRingReadOnly(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	churn(t, func() {
		c, err := OpenRing(r.Path())
		if err != nil {
			return
		}
		if err := c.TryPush(encodeMsg(1)); err == nil {
			if l, err := c.TryClaim(); err == nil {
				c.Ack(l)
			}
		}
		c.Close()
	}, func() []string { return findingNames(ro.Check().Findings) })
}

func TestCheckIsCleanOnAHealthyDequeUnderChurn(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 2})
	ro, err := OpenDequeReadOnly(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	churn(t, func() {
		d.TryPush(encodeMsg(1))
		c, err := OpenDeque(d.Path())
		if err != nil {
			return
		}
		if l, err := c.TryClaim(); err == nil {
			c.Ack(l)
		}
		c.Close()
	}, func() []string { return findingNames(ro.Check().Findings) })
}

// churn runs work in a loop beside liveChecks calls of check, failing on
// any finding.
func churn(t *testing.T, work func(), check func() []string) {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			work()
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for i := 0; i < liveChecks; i++ {
		if found := check(); len(found) > 0 {
			t.Fatalf("check %d of a healthy file under churn found %v", i, found)
		}
	}
}

func findingNames(fs []check.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Location+" "+string(f.Problem)+": "+f.Detail)
	}
	return out
}
