package main

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// verifyDeque runs every check of a deque. It reads the mapping mem: run
// it under guard.
func verifyDeque(path string, d *transport.Deque, mem []byte) (verifyReport, error) {
	h := d.Header()
	l, err := dequeLayout(path, h)
	if err != nil {
		return verifyReport{}, err
	}
	base := uint64(h.HeaderSize)
	rep := verifyReport{Path: path, Checked: verifyChecked{Slots: l.Capacity, Participants: l.Participants}, Problems: []verifyProblem{}, deque: true}
	add := rep.adder()
	checkReserved(h, mem, add)

	scan := d.Scan()
	top, bottom := scan.Counters.Top, scan.Counters.Bottom
	switch {
	case bottom > top+l.Capacity:
		add("top_bottom", "deque.bottom", base+layout.DequeOffBottom, "bottom %d is more than a deque (%d slots) above top %d", bottom, l.Capacity, top)
	case top > bottom+1:
		// A pop announces bottom-1 and a thief may take that very
		// position meanwhile: top is at most one above bottom.
		add("top_bottom", "deque.top", base+layout.DequeOffTop, "top %d is more than one above bottom %d", top, bottom)
	}
	owner := decodeRole(load64(mem, base+layout.DequeOffOwner), l.Participants)
	checkSlots(add, &l, base, mem, scan.Slots, top, bottom, func(s transport.SlotReport) string {
		switch {
		case taker(s, owner) != "owner":
			return "ringctl repair returns it, to be taken again"
		case s.Problem == transport.SlotOrphanedWrite:
			return "the owner's push at the bottom; ringctl repair releases it"
		case s.Problem == transport.SlotOrphanedRead:
			return "the owner's pop at the bottom; ringctl repair rolls it back"
		}
		return "ringctl repair returns it, to be taken again"
	})

	ownerOff := base + layout.DequeOffOwner
	switch {
	case owner.corrupt:
		add("bad_owner", "deque.owner", ownerOff, "word %#016x names no entry of the table of %d participants: ringctl repair frees the role, then a process must call Adopt", owner.raw, l.Participants)
	case owner.holderGone(l.ParticipantOff, base, mem, scan.Peers) && scan.Peers[owner.index].Dead:
		p := scan.Peers[owner.index]
		add("dead_owner", "deque.owner", ownerOff, "the owner, participant %d, %s, is proven dead (%s): ringctl repair undoes its half-done push or pop at the bottom and frees the role; a process must then call Adopt", owner.index, p.ID, p.Reason)
	case owner.holderGone(l.ParticipantOff, base, mem, scan.Peers):
		add("dead_owner", "deque.owner", ownerOff, "the owner word names participant %d at generation %d, an entry freed since: ringctl repair frees the role; a process must then call Adopt", owner.index, owner.gen)
	}
	returned := uint64(0)
	for _, s := range scan.Slots {
		switch {
		case s.Problem == transport.SlotCorrupt:
		case s.Word.State == layout.SlotReturned:
			returned++
		case s.Word.State == layout.SlotWriting && (owner.none || owner.corrupt || s.Owner != owner.index):
			add("foreign_write", fmt.Sprintf("slot[%d].word", s.Index), base+l.SlotOff(s.Index),
				"writing slot stamped with participant %d, which is not the owner: only the owner writes (repair leaves it alone)", s.Owner)
		}
	}
	if p := scan.Counters.Pending; p < returned {
		add("pending_hint", "deque.pending", base+layout.DequeOffPending,
			"hint %d is below the %d returned slots: consumers may not look for them; ringctl repair raises it", p, returned)
	}
	checkPeers(add, l.Participants, l.ParticipantOff, base, mem, scan.Peers, "deque.repair_lock", base+layout.DequeOffRepairLock,
		"marked dead, what it held not yet recovered")
	rep.Clean = len(rep.Problems) == 0
	return rep, nil
}
