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

// Rings (layout.KindRing, transport.Ring): every verb.
var ringKind = &kind{
	kind:    layout.KindRing,
	open:    viewOf(transport.OpenRingReadOnly, func(r *transport.Ring, _ *cli.Context) view { return ringView{r} }),
	apply:   repairWatched(transport.OpenRingForRepair, ringRepairRows),
	members: func(v view, hb *heartbeat.Table) []findingJSON { return watchedPlan(hb, v.(ringView).Ring) },
	queue: func(c *cli.Context, path string) (*drainSource, error) {
		r, err := openAttached(c, path)
		if err != nil {
			return nil, err
		}
		return newDrainSource(path, r, ringLayout, func() uint64 { return r.Counters().Head }, nil)
	},
	push: openAttached,
	create: slottedCreate("a ring", transport.CreateRing, ringLayout, func(g layout.Geometry) error {
		_, err := layout.NewRingLayout(g)
		return err
	}),
	createFlags: slottedFlags,
	peek:        func(v view, max int) ([]transport.Peeked, error) { return v.(ringView).Peek(max) },
	slot: func(path string, h layout.Header, i int) (int64, int64, error) {
		return slotBytes(path, h, i, ringLayout)
	},
	checked: "header, head and tail, %d slots, %d participant entries, the repairer entry and the repair lock",
}

// ringView is a ring mapped read-only.
type ringView struct{ *transport.Ring }

type countersJSON struct {
	Pushed    uint64 `json:"pushed"`
	Popped    uint64 `json:"popped"`
	Claimed   uint64 `json:"claimed"`
	Acked     uint64 `json:"acked"`
	Requeued  uint64 `json:"requeued"`
	Poisoned  uint64 `json:"poisoned"`
	Abandoned uint64 `json:"abandoned"`
	Burned    uint64 `json:"burned"`
	FullHits  uint64 `json:"full_hits"`
	EmptyHits uint64 `json:"empty_hits"`
	Repairs   uint64 `json:"repairs"`
	Deferred  uint64 `json:"deferred"`
	NextID    uint64 `json:"next_id"`
}

// slotCounts is the number of slots in each class (inspect's "states").
type slotCounts struct {
	Free     uint64 `json:"free"`
	Ready    uint64 `json:"ready"`
	Writing  uint64 `json:"writing"`
	Reading  uint64 `json:"reading"`
	Leased   uint64 `json:"leased"`
	Orphaned uint64 `json:"orphaned"`
	Poisoned uint64 `json:"poisoned"`
	Corrupt  uint64 `json:"corrupt"`
}

// inspectReport is inspect's JSON output for a ring: field names are a
// stable interface (docs/cli.md).
type inspectReport struct {
	slottedFile
	Head     uint64       `json:"head"`
	Tail     uint64       `json:"tail"`
	Depth    uint64       `json:"depth"`
	Counters countersJSON `json:"counters"`
	States   slotCounts   `json:"states"`
	checkJSON
	Participants []participantJSON `json:"participants"`
	Slots        *[]slotJSON       `json:"slots,omitempty"`
}

func newSlotCounts(n map[string]uint64) slotCounts {
	return slotCounts{Free: n[classFree], Ready: n[classReady], Writing: n[classWriting], Reading: n[classReading],
		Leased: n[classLeased], Orphaned: n[classOrphaned], Poisoned: n[classPoisoned], Corrupt: n[classCorrupt]}
}

// inspect reads everything inspect shows of a ring. It reads the mapping:
// run it under guard.
func (r ringView) inspect(path string, withSlots bool, cr check.Report) (report, error) {
	h := r.Header()
	l, err := ringLayout(path, h)
	if err != nil {
		return nil, err
	}
	scan := r.Scan()
	if scan.Fault != nil {
		return nil, cliutil.FileError(path, scan.Fault)
	}
	cs := scan.Counters
	rep := &inspectReport{
		slottedFile: fileInfo(path, h, r.ID(), slottedGeometry(&l)),
		Head:        cs.Head, Tail: cs.Tail, Depth: cs.Depth(),
		Counters: countersJSON{Pushed: cs.Pushed, Popped: cs.Popped, Claimed: cs.Claimed, Acked: cs.Acked,
			Requeued: cs.Requeued, Poisoned: cs.Poisoned, Abandoned: cs.Abandoned, Burned: cs.Burned,
			FullHits: cs.FullHits, EmptyHits: cs.EmptyHits, Repairs: cs.Repairs, Deferred: cs.Deferred, NextID: cs.NextID},
		States:       newSlotCounts(countSlots(scan.Slots, l.Capacity)),
		checkJSON:    newCheckJSON(cr),
		Participants: participantsJSON(scan.Peers),
	}
	if withSlots {
		slots, err := slotsJSON(&l, scan.Slots, cs.Head, scan.Peers, r.PeekSlotID)
		if err != nil {
			return nil, cliutil.FileError(path, err)
		}
		rep.Slots = &slots
	}
	return rep, nil
}

func (rep *inspectReport) write(w io.Writer) error {
	c, s := rep.Counters, rep.States
	tr := textReport{
		pairs: append(headerPairs(rep.slottedFile),
			[2]string{"head", strconv.FormatUint(rep.Head, 10)},
			[2]string{"tail", strconv.FormatUint(rep.Tail, 10)},
			[2]string{"depth", strconv.FormatUint(rep.Depth, 10)}),
		counters: []counter{{"pushed", c.Pushed}, {"popped", c.Popped}, {"claimed", c.Claimed}, {"acked", c.Acked},
			{"requeued", c.Requeued}, {"poisoned", c.Poisoned}, {"abandoned", c.Abandoned}, {"burned", c.Burned},
			{"full_hits", c.FullHits}, {"empty_hits", c.EmptyHits}, {"repairs", c.Repairs}, {"deferred", c.Deferred},
			{"next_id", c.NextID}},
		unit: "slots",
		states: []counter{{classFree, s.Free}, {classReady, s.Ready}, {classWriting, s.Writing}, {classReading, s.Reading},
			{classLeased, s.Leased}, {classOrphaned, s.Orphaned}, {classPoisoned, s.Poisoned}, {classCorrupt, s.Corrupt}},
		participants: rep.Participants, check: rep.checkJSON, empty: "every slot is free",
	}
	if rep.Slots != nil {
		tr.list = &table{headers: slotHeadersFor(rep.Geometry.MessageIDs)}
		for _, s := range *rep.Slots {
			tr.list.rows = append(tr.list.rows, s.row())
		}
	}
	return tr.write(w)
}

// watchSample is what one frame shows.
type watchSample struct {
	At       time.Time
	Counters transport.Counters
	Leased   uint64 // leases held by live participants
	Orphaned uint64
	Peers    peerCounts
}

func (r ringView) watch(path string, interval time.Duration) func(tty bool) (string, error) {
	return frames(path, r.Ring, func() (watchSample, error) { return sample(r.Ring) }, func(prev *watchSample, cur watchSample, tty bool) string {
		return renderWatch(path, r.Capacity(), interval, prev, cur, tty)
	})
}

// sample reads one frame's numbers. It reads the mapping: run it under guard.
func sample(r *transport.Ring) (watchSample, error) {
	scan := r.Scan()
	if scan.Fault != nil {
		return watchSample{}, scan.Fault
	}
	n := countSlots(scan.Slots, r.Capacity())
	return watchSample{At: time.Now(), Counters: scan.Counters, Leased: n[classLeased], Orphaned: n[classOrphaned], Peers: countPeers(scan.Peers)}, nil
}

// renderWatch draws one frame: a table on a terminal, one line otherwise.
// Rates compare with the previous frame (none in the first).
func renderWatch(path string, capacity uint64, interval time.Duration, prev *watchSample, cur watchSample, tty bool) string {
	c := cur.Counters
	push, pop := "-", "-"
	if prev != nil {
		dt, p := cur.At.Sub(prev.At), prev.Counters
		push, pop = rate(dt, c.Pushed-p.Pushed), rate(dt, c.Popped+c.Acked-p.Popped-p.Acked)
	}
	return renderFrame(path, interval, cur.At, tty, append([]watchCol{
		{"depth", fmt.Sprintf("%d/%d", c.Depth(), capacity)}, {"push/s", push}, {"pop/s", pop},
		num("leased", cur.Leased), num("orphaned", cur.Orphaned), num("full_hits", c.FullHits), num("empty_hits", c.EmptyHits)},
		cur.Peers.cols()...))
}

// ringRepairRows is what a ring's Repair reported, as repair prints it.
func ringRepairRows(rr check.RepairReport) repairDone {
	return repairRows(rr, "corrupt slots left alone", []labelled{
		{check.ActionRelease, "half-written slots released"},
		{check.ActionRequeue, "messages requeued at the tail"},
		{check.ActionRequeueInPlace, "messages requeued in place"},
		{check.ActionDefer, "messages deferred (no room yet)"},
	})
}
