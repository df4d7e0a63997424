package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "check every invariant of a ring, deque or hash map file and list each problem with its location (read-only)",
		Description: "A header that does not validate (magic, version, flags, checksum, kind, geometry, size\n" +
			"against the file, ready word) makes the file unusable: one line on stderr, exit 3. Otherwise\n" +
			"every check below runs, and each problem is listed with its location and file offset:\n" +
			"reserved header bytes, head and tail (a deque's top and bottom, owner word and pending hint),\n" +
			"every slot word (state, length, owner, deliveries, lap), owners proven dead, poisoned\n" +
			"messages, participant entries and the repair lock.\n" +
			"Exit 0 when clean, 1 when problems were found.",
		ArgsUsage: "PATH [--json]",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON (schema in docs/cli.md)"}, cliutil.AllowModeFlag()},
		Action:    cliutil.WithPath(runVerify),
	}
}

// verifyReport is verify's JSON output.
type verifyReport struct {
	Path     string          `json:"path"`
	Clean    bool            `json:"clean"`
	Checked  verifyChecked   `json:"checked"`
	Problems []verifyProblem `json:"problems"`
	deque    bool            // for the text: what was checked
	hashmap  bool
}

type verifyChecked struct {
	Slots        uint64 `json:"slots"`
	Participants uint64 `json:"participants"`
}

// verifyProblem is one broken invariant. Kind is one of the names listed
// in docs/cli.md; Location names the field as hexdump labels it.
type verifyProblem struct {
	Kind     string `json:"kind"`
	Location string `json:"location"`
	Offset   uint64 `json:"offset"`
	Detail   string `json:"detail"`
}

func runVerify(c *cli.Context, path string) error {
	kind, err := fileKind(c, path)
	if err != nil {
		return err
	}
	var rep verifyReport
	if kind == layout.KindHashMap {
		m, reg, err := openMapViewBytes(c, path)
		if err != nil {
			return err
		}
		defer m.Close()
		defer reg.Close()
		if err := guard(path, func() error {
			rep, err = verifyMap(path, m, reg.Bytes())
			return err
		}); err != nil {
			return err
		}
	} else if kind == layout.KindDeque {
		d, reg, err := openDequeViewBytes(c, path)
		if err != nil {
			return err
		}
		defer d.Close()
		defer reg.Close()
		if err := guard(path, func() error {
			rep, err = verifyDeque(path, d, reg.Bytes())
			return err
		}); err != nil {
			return err
		}
	} else {
		r, reg, err := openViewBytes(c, path)
		if err != nil {
			return err
		}
		defer r.Close()
		defer reg.Close()
		if err := guard(path, func() error {
			rep, err = verifyRing(path, r, reg.Bytes())
			return err
		}); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		if err := cliutil.WriteJSON(c.App.Writer, rep); err != nil {
			return err
		}
	} else if err := writeVerify(c.App.Writer, rep); err != nil {
		return err
	}
	if !rep.Clean {
		return cliutil.Problems(fmt.Sprintf("%s: %s found", path, plural(len(rep.Problems), "problem", "problems")))
	}
	return nil
}

// verifyRing runs every check. It reads the mapping mem: run it under guard.
func verifyRing(path string, r *transport.Ring, mem []byte) (verifyReport, error) {
	h := r.Header()
	l, err := ringLayout(path, h)
	if err != nil {
		return verifyReport{}, err
	}
	base := uint64(h.HeaderSize)
	rep := verifyReport{Path: path, Checked: verifyChecked{Slots: l.Capacity, Participants: l.Participants}, Problems: []verifyProblem{}}
	add := rep.adder()
	checkReserved(h, mem, add)

	scan := r.Scan()
	head, tail := scan.Counters.Head, scan.Counters.Tail
	capacity := l.Capacity
	switch {
	case head > tail+capacity:
		add("head_tail", "ring.head", base+layout.RingOffHead, "head %d is more than a lap ahead of tail %d", head, tail)
	case tail > head+3*capacity:
		add("head_tail", "ring.tail", base+layout.RingOffTail, "tail %d is more than 3 laps ahead of head %d", tail, head)
	}
	checkSlots(add, &l, base, mem, scan.Slots, head, tail, nil)
	checkPeers(add, l.Participants, l.ParticipantOff, base, mem, scan.Peers, "ring.repair_lock", base+layout.RingOffRepairLock,
		"marked dead by a repair that could not finish (messages deferred for room)")
	rep.Clean = len(rep.Problems) == 0
	return rep, nil
}

// addFunc records one problem.
type addFunc func(kind, loc string, off uint64, format string, args ...any)

func (rep *verifyReport) adder() addFunc {
	return func(kind, loc string, off uint64, format string, args ...any) {
		rep.Problems = append(rep.Problems, verifyProblem{Kind: kind, Location: loc, Offset: off, Detail: fmt.Sprintf(format, args...)})
	}
}

// checkReserved checks the header bytes format x.0 leaves reserved (a
// later minor version may use them).
func checkReserved(h layout.Header, mem []byte, add addFunc) {
	if h.Minor != 0 {
		return
	}
	for _, f := range layout.HeaderFields() {
		if len(f.Name) > 8 && f.Name[:8] == "reserved" && !isZero(mem[f.Offset:f.Offset+f.Size]) {
			add("reserved_nonzero", "header."+f.Name, f.Offset, "reserved bytes %d-%d are not zero", f.Offset, f.Offset+f.Size-1)
		}
	}
}

// checkSlots checks every slot word of a ring or deque: Scan's verdict
// (state, length, owner, proof of death), then what the state machine
// allows of deliveries and laps. lo and hi are the positions the live
// words cluster around (head and tail; top and bottom).
//
// remedy, when not nil, says what a repair does to an orphaned slot
// (default: "ringctl repair recovers it").
func checkSlots(add addFunc, l *layout.RingLayout, base uint64, mem []byte, slots []transport.SlotReport, lo, hi uint64, remedy func(transport.SlotReport) string) {
	reports := map[uint64]transport.SlotReport{}
	for _, s := range slots {
		reports[s.Index] = s
	}
	loLap, hiLap := l.LapOf(lo), l.LapOf(hi)
	for i := uint64(0); i < l.Capacity; i++ {
		off := base + l.SlotOff(i)
		loc := fmt.Sprintf("slot[%d].word", i)
		s, listed := reports[i]
		if !listed { // free when Scan read it; read it again for the lap check
			s = transport.SlotReport{Index: i, Raw: load64(mem, off), Owner: -1}
			s.Word = layout.UnpackSlot(s.Raw)
			if s.Word.State != layout.SlotFree {
				continue // changed since the scan: a live file
			}
		}
		w := s.Word
		switch s.Problem {
		case transport.SlotCorrupt:
			add("corrupt_slot", loc, off, "word %#016x: %s", s.Raw, strip(s.Err))
			continue
		case transport.SlotOrphanedWrite, transport.SlotOrphanedRead, transport.SlotOrphanedLease:
			fix := "ringctl repair recovers it"
			if remedy != nil {
				fix = remedy(s)
			}
			add(problemName(s.Problem), loc, off, "%s slot (position %d, %d bytes) owned by participant %d, %s, proven dead: %s",
				w.State, position(l, i, w.Lap, lo), w.Length, s.Owner, s.OwnerID, fix)
		case transport.SlotPoison:
			add("poisoned", loc, off, "message at position %d set aside after %d deliveries (limit %d): take it with ringctl drain --poisoned",
				position(l, i, w.Lap, lo), w.Deliveries, l.DeliveryLimit)
		}
		limit := uint8(l.DeliveryLimit)
		switch {
		case w.State == layout.SlotWriting && (w.Length != 0 || w.Deliveries != 0):
			add("bad_deliveries", loc, off, "writing slot with length %d and %d deliveries: a producer writes both as 0", w.Length, w.Deliveries)
		case w.State == layout.SlotReady && w.Deliveries > limit,
			(w.State == layout.SlotReading || w.State == layout.SlotLeased || w.State == layout.SlotReturned) && (w.Deliveries == 0 || w.Deliveries > limit):
			add("bad_deliveries", loc, off, "%s slot with %d deliveries (limit %d)", w.State, w.Deliveries, limit)
		case w.State == layout.SlotPoisoned && w.Deliveries < limit:
			add("bad_deliveries", loc, off, "poisoned slot with %d deliveries, under the limit of %d", w.Deliveries, limit)
		}
		if d1, d2 := layout.LapDiff(w.Lap, loLap), layout.LapDiff(w.Lap, hiLap); min(abs(d1), abs(d2)) > 2 {
			add("bad_lap", loc, off, "%s slot at lap %d, %d laps from the %s's lap %d (live words are at most 2 laps away)",
				w.State, w.Lap, d1, map[bool]string{false: "head", true: "top"}[l.Deque], loLap)
		}
	}
}

// checkPeers checks the participant entries and the repair lock (at
// lockOff, named lockLoc). markedDead says why an entry can be left
// marked dead by a repair.
func checkPeers(add addFunc, participants uint64, peerOff func(uint64) uint64, base uint64, mem []byte, peers []transport.PeerStatus, lockLoc string, lockOff uint64, markedDead string) {
	for _, p := range peers {
		off := base + peerOff(uint64(p.Index))
		loc := fmt.Sprintf("participant[%d].ctl", p.Index)
		ctl := layout.UnpackPeer(load64(mem, off))
		switch {
		case ctl.State > layout.PeerDead:
			add("bad_participant", loc, off, "entry state %d does not exist", ctl.State)
		case ctl.State == layout.PeerFree && ctl.PID != 0:
			add("bad_participant", loc, off, "free entry with pid %d", ctl.PID)
		case ctl.State == layout.PeerDead:
			add("dead_participant", loc, off, "pid %d %s: ringctl repair finishes it", ctl.PID, markedDead)
		case p.Dead:
			add("dead_participant", loc, off, "%s entry of %s, proven dead (%s): ringctl repair frees it", p.State, p.ID, p.Reason)
		}
	}
	lock := decodeRole(load64(mem, lockOff), participants)
	switch {
	case lock.corrupt:
		add("repair_lock", lockLoc, lockOff, "word %#016x names no entry of the table of %d participants", lock.raw, participants)
	case lock.holderGone(peerOff, base, mem, peers) && peers[lock.index].Dead:
		add("repair_lock", lockLoc, lockOff, "held by participant %d, %s, proven dead: the next repair takes it over", lock.index, peers[lock.index].ID)
	case lock.holderGone(peerOff, base, mem, peers):
		add("repair_lock", lockLoc, lockOff, "held by participant %d at generation %d, an entry freed since: the next repair takes it over", lock.index, lock.gen)
	}
}

func abs(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

func writeVerify(w io.Writer, rep verifyReport) error {
	if rep.Clean && rep.hashmap {
		_, err := fmt.Fprintf(w, "%s: clean (header, %d buckets and their home locks, %d participant entries and the repair lock checked)\n",
			rep.Path, rep.Checked.Slots, rep.Checked.Participants)
		return err
	}
	if rep.Clean && rep.deque {
		_, err := fmt.Fprintf(w, "%s: clean (header, top and bottom, the owner, the pending hint, %d slots, %d participant entries and the repair lock checked)\n",
			rep.Path, rep.Checked.Slots, rep.Checked.Participants)
		return err
	}
	if rep.Clean {
		_, err := fmt.Fprintf(w, "%s: clean (header, head and tail, %d slots, %d participant entries and the repair lock checked)\n",
			rep.Path, rep.Checked.Slots, rep.Checked.Participants)
		return err
	}
	rows := [][]string{}
	for _, p := range rep.Problems {
		rows = append(rows, []string{p.Location, fmt.Sprintf("%#x", p.Offset), p.Kind, p.Detail})
	}
	return cliutil.Table(w, []string{"location", "offset", "problem", "detail"}, rows)
}
