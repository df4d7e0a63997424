package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

// planDequeRepair scans a deque read-only and says what its Repair would
// do (transport.Deque.Repair): dead consumers' messages are returned, a
// dead owner's half-done push or pop at the bottom undone and its role
// freed, the pending hint raised, dead entries freed.
func planDequeRepair(c *cli.Context, path string) (repairReport, error) {
	rep := repairReport{Path: path, Plan: []repairAction{}, deque: true}
	d, reg, err := openDequeViewBytes(c, path)
	if err != nil {
		return rep, err
	}
	defer d.Close()
	defer reg.Close()
	l, err := dequeLayout(path, d.Header())
	if err != nil {
		return rep, err
	}
	base := uint64(d.Header().HeaderSize)
	err = guard(path, func() error {
		mem := reg.Bytes()
		scan := d.Scan()
		owner := decodeRole(load64(mem, base+layout.DequeOffOwner), l.Participants)
		ownerGone := owner.corrupt || owner.holderGone(l.ParticipantOff, base, mem, scan.Peers)
		planDequeSlots(&rep, &l, scan, owner, ownerGone)
		if ownerGone {
			a := repairAction{Target: "deque.owner", Kind: "dead_owner", Action: actFreeOwner}
			if owner.corrupt {
				a.Kind = "bad_owner"
				a.Detail = fmt.Sprintf("the owner word %#016x names no participant entry", owner.raw)
			} else {
				p := scan.Peers[owner.index]
				a.PID = p.ID.PID
				a.Detail = fmt.Sprintf("the owner, participant %d (pid %d, start %d; dead: %s), is proven dead", owner.index, p.ID.PID, p.ID.Start, p.Reason)
				if !p.Dead {
					a.Detail = fmt.Sprintf("the owner word names participant %d at generation %d, an entry freed since", owner.index, owner.gen)
				}
			}
			a.Detail += ": its half-done push or pop at the bottom is undone and bottom set right, then the owner role is freed. " +
				"ringctl does not adopt: the deque stays without an owner (thieves can still take its messages) until a process calls Adopt"
			rep.Plan = append(rep.Plan, a)
		}
		returned := uint64(0)
		for _, s := range scan.Slots {
			if s.Problem != transport.SlotCorrupt && s.Word.State == layout.SlotReturned {
				returned++
			}
		}
		if p := scan.Counters.Pending; p < returned {
			rep.Plan = append(rep.Plan, repairAction{Target: "deque.pending", Kind: "pending_hint", Action: actFixHint,
				Detail: fmt.Sprintf("hint %d is below the %d returned slots (returns count before they mark, so the word was damaged): raised to %d so that consumers look for them, if no other participant is alive (with others at work a count taken during the scan can be off)", p, returned, returned)})
		}
		lock := decodeRole(load64(mem, base+layout.DequeOffRepairLock), l.Participants)
		holder := -1
		if !lock.none && !lock.corrupt && lock.index < len(scan.Peers) {
			holder = lock.index
		}
		planPeers(&rep, transport.ScanReport{Slots: scan.Slots, Peers: scan.Peers}, holder)
		return nil
	})
	if err != nil {
		return rep, err
	}
	for _, a := range rep.Plan {
		if a.Action != actNone {
			rep.ToRepair++
		}
	}
	return rep, nil
}

func planDequeSlots(rep *repairReport, l *layout.RingLayout, scan transport.DequeScanReport, owner roleWord, ownerGone bool) {
	top := scan.Counters.Top
	for _, s := range scan.Slots {
		if s.Problem == transport.SlotOK {
			continue
		}
		pos := position(l, s.Index, s.Word.Lap, top)
		a := repairAction{Target: fmt.Sprintf("slot[%d]", s.Index), Kind: problemName(s.Problem), Position: &pos}
		by := ""
		if s.Owner >= 0 && uint64(s.Owner) < l.Participants {
			a.PID = s.OwnerID.PID
			by = fmt.Sprintf("participant %d (pid %d, start %d; dead: %s)", s.Owner, s.OwnerID.PID, s.OwnerID.Start, scan.Peers[s.Owner].Reason)
		}
		byOwner := taker(s, owner) == "owner"
		switch {
		case s.Problem == transport.SlotOrphanedWrite && byOwner && ownerGone:
			a.Action = actRelease
			a.Detail = fmt.Sprintf("slot being written at the bottom by the dead owner, %s: the push never returned, so nobody was promised the message; the slot is freed and bottom stays before it", by)
		case s.Problem == transport.SlotOrphanedWrite:
			a.Action = actNone
			a.Detail = fmt.Sprintf("slot being written by %s, which is not the deque's owner: no deque operation does that; left alone (counted corrupt)", by)
		case s.Problem == transport.SlotOrphanedRead && byOwner && ownerGone:
			a.Action = actRollBack
			a.Detail = fmt.Sprintf("%d-byte message being popped at the bottom by the dead owner, %s, and the pop never returned: it is put back in place, ready (delivery count %d kept), and bottom moved past it", s.Word.Length, by, s.Word.Deliveries)
		case s.Problem == transport.SlotOrphanedRead:
			a.Action = actReturn
			a.Detail = fmt.Sprintf("%d-byte message being stolen by %s, and the steal never returned: handed back (returned, delivery count %d kept) and taken again before newer messages", s.Word.Length, by, s.Word.Deliveries)
		case s.Problem == transport.SlotOrphanedLease:
			a.Action = actReturn
			a.Detail = fmt.Sprintf("%d-byte message leased by %s and never acked: handed back (returned, delivery count %d kept) and taken again before newer messages", s.Word.Length, by, s.Word.Deliveries)
		case s.Problem == transport.SlotPoison:
			a.Action = actNone
			a.Detail = fmt.Sprintf("message delivered %d times, set aside as poison: left alone; take it with ringctl drain --poisoned", s.Word.Deliveries)
		default:
			a.Action = actNone
			a.Detail = fmt.Sprintf("word %#016x, which no deque operation writes (%s): left alone; see ringctl verify and hexdump --slot %d", s.Raw, strip(s.Err), s.Index)
		}
		rep.Plan = append(rep.Plan, a)
	}
}

// applyDequeRepair backs the file up, attaches to the deque (as a thief:
// ringctl never takes the owner role) and runs its Repair.
func applyDequeRepair(c *cli.Context, path string, rep *repairReport) error {
	if err := backupFirst(c, path, rep); err != nil {
		return err
	}
	d, err := openDequeAttached(c, path)
	if err != nil {
		return err
	}
	res := &repairResult{DeadParticipants: []deadJSON{}, Reclaimed: []deadJSON{}, Problems: []string{}}
	rep.Result = res
	rr, err := d.Repair()
	if err != nil {
		if !errors.Is(err, transport.ErrRepairBusy) {
			d.Close()
			return fileErr(path, err)
		}
		res.Problems = append(res.Problems, cause(path, fileErr(path, err)))
	}
	for _, p := range rr.DeadPeers {
		res.DeadParticipants = append(res.DeadParticipants, deadJSON{Index: p.Index, PID: p.ID.PID, Start: p.ID.Start, Reason: p.Reason})
	}
	res.Abandoned, res.Requeued, res.RequeuedInPlace, res.Deferred, res.Corrupt = rr.Abandoned, rr.Requeued, rr.RequeuedInPlace, rr.Deferred, rr.Corrupt
	res.Published, res.OwnerDied = &rr.Published, &rr.OwnerDied
	return fileErr(path, d.Close())
}

// writeDequeResult prints what a deque's Repair did.
func writeDequeResult(w io.Writer, res *repairResult) error {
	published, ownerDied := 0, false
	if res.Published != nil {
		published = *res.Published
	}
	if res.OwnerDied != nil {
		ownerDied = *res.OwnerDied
	}
	rows := [][]string{
		{"dead participants freed", strconv.Itoa(len(res.DeadParticipants))},
		{"half-written slots released", strconv.Itoa(res.Abandoned)},
		{"messages returned, to be taken again", strconv.Itoa(res.Requeued)},
		{"pops of the dead owner rolled back", strconv.Itoa(res.RequeuedInPlace)},
		{"messages of the dead owner counted in", strconv.Itoa(published)},
		{"owner role freed", yesNo(ownerDied)},
		{"corrupt slots left alone", strconv.Itoa(res.Corrupt)},
	}
	if err := cliutil.Table(w, []string{"repaired", "count"}, rows); err != nil {
		return err
	}
	if ownerDied {
		fmt.Fprintln(w, "the deque has no owner now: nothing is pushed until a process calls Adopt (ringctl does not adopt; thieves and ringctl drain can still take its messages)")
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "not done: %s\n", p)
	}
	return nil
}
