package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// dequeInspectReport is inspect's JSON output for a deque: field names are
// a stable interface (docs/cli.md).
type dequeInspectReport struct {
	fileJSON
	Top          uint64            `json:"top"`
	Bottom       uint64            `json:"bottom"`
	Len          uint64            `json:"len"`
	Owner        *dequeOwnerJSON   `json:"owner"`
	Counters     dequeCountersJSON `json:"counters"`
	States       dequeSlotCounts   `json:"states"`
	Problems     int               `json:"problems"`
	Participants []participantJSON `json:"participants"`
	Slots        *[]dequeSlotJSON  `json:"slots,omitempty"`
}

// dequeOwnerJSON is the deque's owner; null when it has none.
type dequeOwnerJSON struct {
	Participant int    `json:"participant"` // -1 when the word names no entry
	PID         int32  `json:"pid"`
	StartTicks  uint64 `json:"start_ticks"`
	Alive       bool   `json:"alive"`
	Reason      string `json:"reason"`
	Word        string `json:"word"`
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
}

// dequeSlotJSON is a ring slot plus who holds it.
type dequeSlotJSON struct {
	slotJSON
	Taker string `json:"taker,omitempty"` // "owner" or "thief" for a slot with an owner stamp
}

func runInspectDeque(c *cli.Context, path string) error {
	d, reg, err := openDequeViewBytes(c, path)
	if err != nil {
		return err
	}
	defer d.Close()
	defer reg.Close()
	return inspectOut(c, path, func() (dequeInspectReport, error) {
		return collectDequeInspect(path, d, reg.Bytes(), c.Bool("slots"))
	}, writeDequeInspect)
}

// collectDequeInspect reads everything inspect shows of a deque. It reads
// the mappings: run it under guard.
func collectDequeInspect(path string, d *transport.Deque, mem []byte, withSlots bool) (dequeInspectReport, error) {
	h := d.Header()
	l, err := dequeLayout(path, h)
	if err != nil {
		return dequeInspectReport{}, err
	}
	base := uint64(h.HeaderSize)
	scan := d.Scan()
	cs := scan.Counters
	owner := decodeRole(load64(mem, base+layout.DequeOffOwner), l.Participants)
	rep := dequeInspectReport{
		fileJSON: fileInfo(path, h, d.ID(), &l),
		Top:      cs.Top, Bottom: cs.Bottom, Len: dequeLen(cs, l.Capacity),
		Owner: ownerJSON(owner, scan, mem, base, &l),
		Counters: dequeCountersJSON{Pushed: cs.Pushed, OwnerPopped: cs.OwnerPopped, Stolen: cs.Stolen,
			Claimed: cs.Claimed, Acked: cs.Acked, Returned: cs.Returned, Poisoned: cs.Poisoned,
			Abandoned: cs.Abandoned, RolledBack: cs.RolledBack, FullHits: cs.FullHits, EmptyHits: cs.EmptyHits,
			Repairs: cs.Repairs, Adopted: cs.Adopted, Pending: cs.Pending, Burned: cs.Burned, NextID: cs.Correlation},
		States:       countDequeClasses(scan.Slots, l.Capacity),
		Problems:     scan.Problems,
		Participants: participantsJSON(scan.Peers),
	}
	if withSlots {
		slots := []dequeSlotJSON{}
		for i, s := range slotsJSON(&l, transport.ScanReport{Slots: scan.Slots, Counters: transport.Counters{Head: cs.Top}}) {
			slots = append(slots, dequeSlotJSON{slotJSON: s, Taker: taker(scan.Slots[i], owner)})
		}
		rep.Slots = &slots
	}
	return rep, nil
}

// ownerJSON describes the owner word: nil when the deque has no owner.
// Alive is Scan's verdict (the entry is the one the word names, same
// generation, and its process is not proven dead).
func ownerJSON(o roleWord, scan transport.DequeScanReport, mem []byte, base uint64, l *layout.RingLayout) *dequeOwnerJSON {
	if o.none {
		return nil
	}
	oj := &dequeOwnerJSON{Participant: o.index, Alive: scan.OwnerAlive, Word: fmt.Sprintf("%#016x", o.raw)}
	switch {
	case o.corrupt:
		oj.Reason = "the owner word names no participant entry"
	case o.index >= len(scan.Peers):
		oj.Reason = "participant table not read"
	default:
		p := scan.Peers[o.index]
		oj.PID, oj.StartTicks, oj.Reason = p.ID.PID, p.ID.Start, p.Reason
		if gen := layout.UnpackPeer(load64(mem, base+l.ParticipantOff(uint64(o.index)))).Gen; !p.Dead && !scan.OwnerAlive {
			oj.Reason = fmt.Sprintf("the entry was freed or taken by another process since (owner word generation %d, entry generation %d)", o.gen, gen)
		} else if p.State == "free" {
			oj.Reason = "the entry is free"
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
		return fmt.Sprintf("word %s: %s (corrupt); ringctl repair frees the role, then a process must call Adopt", o.Word, o.Reason)
	case o.Alive:
		return fmt.Sprintf("participant %d, pid %d (start %d), alive (%s)", o.Participant, o.PID, o.StartTicks, o.Reason)
	}
	return fmt.Sprintf("participant %d, pid %d (start %d), dead (%s): ringctl repair frees the role, then a process must call Adopt",
		o.Participant, o.PID, o.StartTicks, o.Reason)
}

func writeDequeInspect(w io.Writer, rep dequeInspectReport) error {
	problems := "none"
	if rep.Problems > 0 {
		problems = strconv.Itoa(rep.Problems) + " (ringctl verify lists them)"
	}
	cliutil.KeyValues(w, append(rep.headerPairs(),
		[2]string{"top", strconv.FormatUint(rep.Top, 10)},
		[2]string{"bottom", strconv.FormatUint(rep.Bottom, 10)},
		[2]string{"len", strconv.FormatUint(rep.Len, 10)},
		[2]string{"owner", ownerLine(rep.Owner)},
		[2]string{"problems", problems},
	))
	fmt.Fprintln(w)
	c := rep.Counters
	counters := [][]string{}
	for _, kv := range []struct {
		name string
		v    uint64
	}{
		{"pushed", c.Pushed}, {"owner_popped", c.OwnerPopped}, {"stolen", c.Stolen}, {"claimed", c.Claimed},
		{"acked", c.Acked}, {"returned", c.Returned}, {"poisoned", c.Poisoned}, {"abandoned", c.Abandoned},
		{"rolled_back", c.RolledBack}, {"full_hits", c.FullHits}, {"empty_hits", c.EmptyHits},
		{"repairs", c.Repairs}, {"adopted", c.Adopted}, {"pending", c.Pending}, {"burned", c.Burned}, {"next_id", c.NextID},
	} {
		counters = append(counters, []string{kv.name, strconv.FormatUint(kv.v, 10)})
	}
	if err := cliutil.Table(w, []string{"counter", "value"}, counters); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := cliutil.Table(w, []string{"state", "slots"}, rep.States.rows()); err != nil {
		return err
	}
	if err := writeParticipants(w, rep.Participants); err != nil {
		return err
	}
	if rep.Slots == nil {
		return nil
	}
	fmt.Fprintln(w)
	if len(*rep.Slots) == 0 {
		fmt.Fprintln(w, "every slot is free")
		return nil
	}
	rows := [][]string{}
	for _, s := range *rep.Slots {
		t := s.Taker
		if t == "" {
			t = "-"
		}
		rows = append(rows, append(s.row(), t))
	}
	return cliutil.Table(w, append(append([]string{}, slotHeaders...), "taker"), rows)
}
