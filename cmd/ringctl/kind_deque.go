package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Deques (layout.KindDeque, transport.Deque) share the ring's slot words,
// participant table and geometry; what differs is top and bottom instead
// of head and tail, the owner, the returned state and the pending hint.
// ringctl attaches as a thief, never as the owner (it does not Adopt);
// nobody but the owner pushes.
var dequeKind = &kind{
	kind:    layout.KindDeque,
	open:    viewOf(transport.OpenDequeReadOnly, func(d *transport.Deque, _ *cli.Context) view { return dequeView{d} }),
	apply:   repairWatched(transport.OpenDequeForRepair, dequeRepairRows),
	members: func(v view, hb *heartbeat.Table) []findingJSON { return watchedPlan(hb, v.(dequeView).Deque) },
	queue: func(c *cli.Context, path string) (*drainSource, error) {
		d, err := openWith(c, path, transport.OpenDeque)
		if err != nil {
			return nil, err
		}
		return newDrainSource(path, d, dequeLayout, func() uint64 { return d.Counters().Top }, d.TakeReturned)
	},
	create: slottedCreate("a deque", transport.CreateDeque, dequeLayout, func(g layout.Geometry) error {
		_, err := layout.NewDequeLayout(g)
		return err
	}),
	createFlags: slottedFlags,
	createNote:  "the deque has no owner now: the program that pushes calls Adopt (ringctl never owns a deque)",
	peek:        func(v view, max int) ([]transport.Peeked, error) { return v.(dequeView).Peek(max) },
	slot: func(path string, h layout.Header, i int) (int64, int64, error) {
		return slotBytes(path, h, i, dequeLayout)
	},
	checked: "header, top and bottom, the owner, the pending hint, %d slots, %d participant entries, the repairer entry and the repair lock",
}

// dequeView is a deque mapped read-only.
type dequeView struct{ *transport.Deque }

// dequeLayout derives the deque's offsets from its (validated) header.
func dequeLayout(path string, h layout.Header) (layout.SlotGeometry, error) {
	l, err := layout.NewDequeLayout(h.Geometry)
	if err != nil {
		return l.SlotGeometry, cliutil.FileError(path, fmt.Errorf("%w: %v", layout.ErrGeometry, err))
	}
	return l.SlotGeometry, nil
}

// dequeInspectReport is inspect's JSON output for a deque: field names are
// a stable interface (docs/cli.md).
type dequeInspectReport struct {
	slottedFile
	Top      uint64            `json:"top"`
	Bottom   uint64            `json:"bottom"`
	Len      uint64            `json:"len"`
	Owner    *dequeOwnerJSON   `json:"owner"`
	Counters dequeCountersJSON `json:"counters"`
	States   dequeSlotCounts   `json:"states"`
	checkJSON
	Participants []participantJSON `json:"participants"`
	Slots        *[]dequeSlotJSON  `json:"slots,omitempty"`
}

// dequeOwnerJSON is the deque's owner; null when it has none.
type dequeOwnerJSON struct {
	Participant int    `json:"participant"` // -1 when the word names no entry
	PID         int32  `json:"pid"`
	StartTicks  uint64 `json:"start_ticks"`
	Alive       bool   `json:"alive"`
	Unknown     bool   `json:"unknown"` // liveness undecided: left alone
	Reason      string `json:"reason"`
	Word        string `json:"word,omitempty"` // the owner word, when Check has a finding about it
	where       string // check.Peer.Where of the owner's entry, for the text
}

type dequeCountersJSON struct {
	Pushed      uint64 `json:"pushed"`
	OwnerPopped uint64 `json:"owner_popped"`
	Stolen      uint64 `json:"stolen"`
	Claimed     uint64 `json:"claimed"`
	Acked       uint64 `json:"acked"`
	Returned    uint64 `json:"returned"`
	Poisoned    uint64 `json:"poisoned"`
	Abandoned   uint64 `json:"abandoned"`
	RolledBack  uint64 `json:"rolled_back"`
	FullHits    uint64 `json:"full_hits"`
	EmptyHits   uint64 `json:"empty_hits"`
	Repairs     uint64 `json:"repairs"`
	Adopted     uint64 `json:"adopted"`
	Pending     uint64 `json:"pending"`
	Burned      uint64 `json:"burned"`
	NextID      uint64 `json:"next_id"`
	// NextMessageID is the message id counter (next_id in the file's
	// layout: the last id a push took), in a deque with message ids only.
	NextMessageID *uint64 `json:"next_message_id,omitempty"`
}

// dequeSlotCounts is the number of slots in each class (a deque's
// inspect "states"): the ring's classes and returned.
type dequeSlotCounts struct {
	Free     uint64 `json:"free"`
	Ready    uint64 `json:"ready"`
	Writing  uint64 `json:"writing"`
	Reading  uint64 `json:"reading"`
	Leased   uint64 `json:"leased"`
	Returned uint64 `json:"returned"`
	Orphaned uint64 `json:"orphaned"`
	Poisoned uint64 `json:"poisoned"`
	Corrupt  uint64 `json:"corrupt"`
}

// dequeSlotJSON is a ring slot plus who holds it.
type dequeSlotJSON struct {
	slotJSON
	Taker string `json:"taker,omitempty"` // "owner" or "thief" for a slot with an owner stamp
}

// inspect reads everything inspect shows of a deque. It reads the
// mapping: run it under guard.
func (d dequeView) inspect(path string, withSlots bool, cr check.Report) (report, error) {
	h := d.Header()
	l, err := dequeLayout(path, h)
	if err != nil {
		return nil, err
	}
	scan := d.Scan()
	if scan.Fault != nil {
		return nil, cliutil.FileError(path, scan.Fault)
	}
	cs := scan.Counters
	n := countSlots(scan.Slots, l.Capacity)
	rep := &dequeInspectReport{
		slottedFile: fileInfo(path, h, d.ID(), slottedGeometry(&l)),
		Top:         cs.Top, Bottom: cs.Bottom, Len: uint64(d.Len()),
		Owner: ownerJSON(scan, cr),
		Counters: dequeCountersJSON{Pushed: cs.Pushed, OwnerPopped: cs.OwnerPopped, Stolen: cs.Stolen,
			Claimed: cs.Claimed, Acked: cs.Acked, Returned: cs.Returned, Poisoned: cs.Poisoned,
			Abandoned: cs.Abandoned, RolledBack: cs.RolledBack, FullHits: cs.FullHits, EmptyHits: cs.EmptyHits,
			Repairs: cs.Repairs, Adopted: cs.Adopted, Pending: cs.Pending, Burned: cs.Burned, NextID: cs.Correlation,
			NextMessageID: nextMessageID(l.MessageIDs, cs.NextMessageID)},
		States: dequeSlotCounts{Free: n[classFree], Ready: n[classReady], Writing: n[classWriting], Reading: n[classReading],
			Leased: n[classLeased], Returned: n[classReturned], Orphaned: n[classOrphaned], Poisoned: n[classPoisoned], Corrupt: n[classCorrupt]},
		checkJSON:    newCheckJSON(cr),
		Participants: participantsJSON(scan.Peers),
	}
	if withSlots {
		slots := []dequeSlotJSON{}
		all, err := slotsJSON(&l, scan.Slots, cs.Top, scan.Peers, d.PeekSlotID)
		if err != nil {
			return nil, cliutil.FileError(path, err)
		}
		for i, s := range all {
			slots = append(slots, dequeSlotJSON{slotJSON: s, Taker: taker(scan.Slots[i], cs.Owner)})
		}
		rep.Slots = &slots
	}
	return rep, nil
}

// ownerJSON describes the owner: nil when the deque has none. Alive is
// Scan's verdict; a finding of Check about the owner word gives the word
// and, for an owner not proven dead itself (an entry freed since, a word
// naming no entry), the reason.
func ownerJSON(scan transport.DequeScanReport, cr check.Report) *dequeOwnerJSON {
	var f *check.Finding
	for i := range cr.Findings {
		if cr.Findings[i].Location == "deque.owner" {
			f = &cr.Findings[i]
		}
	}
	i := scan.Counters.Owner
	if i < 0 && f == nil {
		return nil
	}
	oj := &dequeOwnerJSON{Participant: i, Alive: scan.OwnerAlive}
	if i >= 0 && i < len(scan.Peers) {
		p := scan.Peers[i]
		oj.PID, oj.StartTicks, oj.Reason, oj.where, oj.Unknown = p.ID.PID, p.ID.Start, p.Reason, p.Where(), p.Unknown && !p.Dead
	}
	if f != nil {
		oj.Participant, oj.Word = f.Owner, fmt.Sprintf("%#016x", f.Raw)
		if !f.Dead {
			oj.Reason = cliutil.StripPrefixes(f.Detail)
		}
	}
	return oj
}

// ownerLine is the owner as inspect's text prints it.
func ownerLine(o *dequeOwnerJSON) string {
	switch {
	case o == nil:
		return "none: nobody pushes until a process calls Adopt (thieves can still take messages)"
	case o.Participant < 0:
		return fmt.Sprintf("word %s: %s (corrupt)", o.Word, o.Reason)
	}
	who := o.where
	if who == "" {
		who = fmt.Sprintf("pid %d (start %d)", o.PID, o.StartTicks)
	}
	switch {
	case o.Unknown:
		return fmt.Sprintf("participant %d, %s, liveness unknown (%s): left alone", o.Participant, who, o.Reason)
	case o.Alive:
		return fmt.Sprintf("participant %d, %s, alive (%s)", o.Participant, who, o.Reason)
	}
	return fmt.Sprintf("participant %d, %s, dead (%s)", o.Participant, who, o.Reason)
}

// taker says who holds a deque slot that has an owner stamp: "owner" when
// the stamp is the deque owner's participant (its pop at the bottom, or a
// lease it took at the top), "thief" otherwise; "" for a slot nobody holds.
func taker(s transport.SlotReport, owner int) string {
	switch {
	case s.Owner < 0 || s.Problem == transport.SlotCorrupt:
		return ""
	case owner >= 0 && s.Owner == owner:
		return "owner"
	}
	return "thief"
}

func (rep *dequeInspectReport) write(w io.Writer) error {
	c, s := rep.Counters, rep.States
	tr := textReport{
		pairs: append(headerPairs(rep.slottedFile),
			[2]string{"top", strconv.FormatUint(rep.Top, 10)},
			[2]string{"bottom", strconv.FormatUint(rep.Bottom, 10)},
			[2]string{"len", strconv.FormatUint(rep.Len, 10)},
			[2]string{"owner", ownerLine(rep.Owner)}),
		counters: []counter{{"pushed", c.Pushed}, {"owner_popped", c.OwnerPopped}, {"stolen", c.Stolen}, {"claimed", c.Claimed},
			{"acked", c.Acked}, {"returned", c.Returned}, {"poisoned", c.Poisoned}, {"abandoned", c.Abandoned},
			{"rolled_back", c.RolledBack}, {"full_hits", c.FullHits}, {"empty_hits", c.EmptyHits},
			{"repairs", c.Repairs}, {"adopted", c.Adopted}, {"pending", c.Pending}, {"burned", c.Burned}, {"next_id", c.NextID}},
		unit: "slots",
		states: []counter{{classFree, s.Free}, {classReady, s.Ready}, {classWriting, s.Writing}, {classReading, s.Reading},
			{classLeased, s.Leased}, {classReturned, s.Returned}, {classOrphaned, s.Orphaned}, {classPoisoned, s.Poisoned},
			{classCorrupt, s.Corrupt}},
		participants: rep.Participants, check: rep.checkJSON, empty: "every slot is free",
	}
	if c.NextMessageID != nil {
		tr.counters = append(tr.counters, counter{"next_message_id", *c.NextMessageID})
	}
	if rep.Slots != nil {
		tr.list = &table{headers: append(slotHeadersFor(rep.Geometry.MessageIDs), "taker")}
		for _, s := range *rep.Slots {
			t := s.Taker
			if t == "" {
				t = "-"
			}
			tr.list.rows = append(tr.list.rows, append(s.row(), t))
		}
	}
	return tr.write(w)
}

// dequeSample is what one frame of a deque shows.
type dequeSample struct {
	At       time.Time
	Counters transport.DequeCounters
	Len      int
	Leased   uint64 // leases held by live participants
	Returned uint64
	Orphaned uint64
	Owner    string // alive, dead, none
	Peers    peerCounts
}

func (d dequeView) watch(path string, interval time.Duration) func(tty bool) (string, error) {
	return frames(path, d.Deque, func() (dequeSample, error) { return sampleDeque(d.Deque) }, func(prev *dequeSample, cur dequeSample, tty bool) string {
		return renderDequeWatch(path, d.Capacity(), interval, prev, cur, tty)
	})
}

// sampleDeque reads one frame's numbers. It reads the mapping: run it
// under guard.
func sampleDeque(d *transport.Deque) (dequeSample, error) {
	scan := d.Scan()
	if scan.Fault != nil {
		return dequeSample{}, scan.Fault
	}
	n := countSlots(scan.Slots, d.Capacity())
	s := dequeSample{At: time.Now(), Counters: scan.Counters, Len: d.Len(), Leased: n[classLeased], Returned: n[classReturned],
		Orphaned: n[classOrphaned], Owner: "none", Peers: countPeers(scan.Peers)}
	switch {
	case scan.Counters.Owner >= 0 && scan.OwnerAlive:
		s.Owner = "alive"
	case scan.Counters.Owner >= 0:
		s.Owner = "dead"
	}
	return s, nil
}

// renderDequeWatch draws one frame of a deque, as renderWatch does a ring's.
func renderDequeWatch(path string, capacity uint64, interval time.Duration, prev *dequeSample, cur dequeSample, tty bool) string {
	c := cur.Counters
	push, take := "-", "-"
	if prev != nil {
		dt, p := cur.At.Sub(prev.At), prev.Counters
		push, take = rate(dt, c.Pushed-p.Pushed), rate(dt, c.OwnerPopped+c.Stolen+c.Acked-p.OwnerPopped-p.Stolen-p.Acked)
	}
	return renderFrame(path, interval, cur.At, tty, append([]watchCol{
		{"len", fmt.Sprintf("%d/%d", cur.Len, capacity)}, num("top", c.Top), num("bottom", c.Bottom), {"push/s", push}, {"take/s", take},
		num("leased", cur.Leased), num("returned", cur.Returned), num("orphaned", cur.Orphaned), {"owner", cur.Owner},
		num("full_hits", c.FullHits), num("empty_hits", c.EmptyHits)},
		cur.Peers.cols()...))
}

// dequeRepairRows is what a deque's Repair reported, as repair prints it.
func dequeRepairRows(rr check.RepairReport) repairDone {
	d := repairRows(rr, "corrupt slots left alone", []labelled{
		{check.ActionRelease, "half-written slots released"},
		{check.ActionReturn, "messages returned, to be taken again"},
		{check.ActionRollBack, "pops of the dead owner rolled back"},
		{check.ActionCountIn, "messages of the dead owner counted in"},
		{check.ActionFreeOwner, "owner role freed"},
	})
	if rr.Count(check.ActionFreeOwner) > 0 {
		d.note = "the deque has no owner now: nothing is pushed until a process calls Adopt (ringctl does not adopt; thieves and ringctl drain can still take its messages)"
	}
	return d
}

// nextMessageID is the message id counter as inspect shows it: only for a
// deque with message ids.
func nextMessageID(ids bool, v uint64) *uint64 {
	if !ids {
		return nil
	}
	return &v
}
