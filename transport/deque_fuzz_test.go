package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/memfuzz"
)

// FuzzDequeMemory treats a deque file as hostile input, as FuzzRingMemory
// does a ring's (same input format and modes): a live deque with messages
// in mixed states has the input written over its area or header, then a
// thief and the owner run every operation. Nothing may panic, hang or fail
// with an undocumented error.
func FuzzDequeMemory(f *testing.F) {
	for _, s := range fuzzDequeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		fuzzDequeOnce(t, data)
	})
}

func fuzzDequeSeeds() [][]byte {
	l, err := layout.NewDequeLayout(fuzzRingConfig.geometry())
	if err != nil {
		panic(err)
	}
	slot := func(i uint64) int { return int(l.SlotOff(i)) }
	word := func(w layout.SlotWord) []byte { return fuzzLE64(w.Pack()) }
	var deadPeer []byte
	for _, v := range []uint64{layout.PeerCtl{State: layout.PeerActive, Gen: 3, PID: 0x7ffffff0}.Pack(), 1, 0, 1} {
		deadPeer = append(deadPeer, fuzzLE64(v)...)
	}
	seeds := [][]byte{
		fuzzSeed(0, 0, make([]byte, 64)),                    // bottom and the owner's counters zeroed
		fuzzSeed(layout.DequeOffTop, 0, fuzzLE64(1<<40)),    // top far past bottom
		fuzzSeed(layout.DequeOffBottom, 0, fuzzLE64(1<<40)), // bottom far past top
		fuzzSeed(layout.DequeOffBottom, 0, fuzzLE64(1)),     // bottom below top
		fuzzSeed(layout.DequeOffOwner, 0, fuzzLE64(0)),      // no owner
		fuzzSeed(layout.DequeOffOwner, 0, fuzzLE64(2)),      // owner: the thief's entry, wrong generation
		fuzzSeed(layout.DequeOffPending, 0, fuzzLE64(1<<63)),
		fuzzSeed(layout.DequeOffRepairLock, 0, fuzzLE64(0x3ff)),
		fuzzSeed(0, 0, make([]byte, int(l.BodySize))),
		fuzzSeed(0, fuzzRelease, fuzzRepeat(0xff, 1100)),
		fuzzSeed(slot(2), 0, word(layout.SlotWord{State: layout.SlotReturned, Deliveries: 2, Length: 9})),
		fuzzSeed(slot(2), 0, word(layout.SlotWord{State: layout.SlotReading, Owner: 1, Length: 2})), // "owner popping" in the middle
		fuzzSeed(slot(3), fuzzShortBuf, word(layout.SlotWord{State: layout.SlotReady, Deliveries: 15, Length: 56})),
		fuzzSeed(slot(4), 0, word(layout.SlotWord{State: layout.SlotWriting, Owner: 3, Length: 0})),
		// What a push batch leaves above bottom (bottom is 5 when the
		// patch lands): its claims, its published messages, top past
		// bottom after thieves took them.
		fuzzSeed(slot(5), 0, word(layout.SlotWord{State: layout.SlotWriting, Owner: 1})),
		fuzzSeed(slot(6), 0, word(layout.SlotWord{State: layout.SlotWriting, Owner: 1})),
		fuzzSeed(slot(5), 0, word(layout.SlotWord{State: layout.SlotReady, Length: 2})),
		fuzzSeed(layout.DequeOffTop, 0, fuzzLE64(7)),
		// What an owner's pop batch leaves: bottom announced below the
		// run, the newest taken.
		fuzzSeed(layout.DequeOffBottom, 0, fuzzLE64(2)),
		fuzzSeed(int(l.ParticipantOff(2)), 0, deadPeer),
		// No entry an attach can take: the creator's read free under its
		// held lock and the others corrupt, or the others undecided.
		fuzzSeed(int(l.ParticipantOff(0)), 0, fuzzLE64(layout.PeerCtl{State: layout.PeerFree, Gen: 9}.Pack()), make([]byte, layout.PeerEntrySize-8),
			fuzzRepeat(0xff, 3*layout.PeerEntrySize)),
		fuzzSeed(int(l.ParticipantOff(1)), 0, fuzzUndecided(), fuzzUndecided(), fuzzUndecided()),
		fuzzSeed(layout.DequeOffNotEmptyW, fuzzBlocking, fuzzLE64(1)),
		fuzzSeed(layout.OffKind, fuzzHeader, []byte{2}), // a ring's kind: does not open as a deque
		fuzzSeed(layout.OffReady, fuzzHeader, make([]byte, 4)),
		fuzzSeed(layout.DequeOffNextID, fuzzIDs, fuzzRepeat(0xff, 8)), // the id counter about to wrap
		fuzzSeed(slot(3), fuzzIDs|fuzzShortBuf, word(layout.SlotWord{State: layout.SlotReady, Length: 56})),
	}
	return append(seeds, fuzzIDSeeds(slot, int(l.SlotSize))...)
}

func fuzzDequeOnce(t *testing.T, data []byte) {
	path := ringPath(t)
	d, err := CreateDeque(path, fuzzConfig(data[2]))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	// Mixed states: a lease held by the owner's handle at the top, a
	// stolen and freed slot, a returned message, ready messages.
	for _, m := range []string{"m0", "m1", "m2", "m3", "m4"} {
		if err := d.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := d.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	l2, err := d.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(l2); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TrySteal(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}

	mode, mustFail := memfuzz.Overlay(t, path, d.Header(), layout.KindDeque, data, fuzzHeader)
	// A short attach wait: a table the patch left with no entry to take
	// (one read free but locked by the creator, undecided ones) fails
	// after it rather than after the default 10 s; a wait without a
	// bound would still outlast fuzzDeadline.
	openOpts := []shm.Option{shm.WithReadyTimeout(10 * time.Millisecond), shm.WithAttachTimeout(50 * time.Millisecond)}

	memfuzz.Run(t, fuzzDeadline, func(step func(string)) (problems []string) {
		bad := func(what string, err error, also ...error) {
			if !fuzzErrOK(err, append(also, ErrNotOwner, ErrOwnerAlive)...) {
				problems = append(problems, fmt.Sprintf("%s: unexpected error %v", what, err))
			}
		}
		expect := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		buf := make([]byte, 4096)
		checkScan := func(rep DequeScanReport, q *Deque) {
			total := rep.Corrupt
			for s, n := range rep.States {
				expect(s.Valid(), "Scan counted invalid state %d", s)
				total += n
			}
			expect(uint64(total) == q.Capacity(), "Scan accounted for %d of %d slots", total, q.Capacity())
			for _, s := range rep.Slots {
				expect(s.Index < q.Capacity(), "Scan reported slot %d", s.Index)
			}
		}

		step("OpenDequeReadOnly")
		ro, err := OpenDequeReadOnly(path, openOpts...)
		expect(mustFail == (err != nil), "OpenDequeReadOnly: %v, header should fail: %v", err, mustFail)
		bad("OpenDequeReadOnly", err)
		if err == nil {
			step("read-only Scan")
			checkScan(ro.Scan(), ro)
			fuzzCheckReport(t, "read-only", ro.Check())
			fuzzCheckPeek(ro.Peek(1<<20))(expect, ro.Capacity(), ro.MaxPayload())
			ro.Len()
			expect(ro.TryPush([]byte("x")) == ErrNotAttached, "read-only TryPush did not fail with ErrNotAttached")
			bad("read-only Close", ro.Close())
		}

		step("OpenDeque")
		o, err := OpenDeque(path, openOpts...)
		expect(!mustFail || err != nil, "OpenDeque accepted a header that does not decode")
		bad("OpenDeque", err)
		if err == nil {
			maxN := o.MaxPayload()
			for k := 0; k < 5; k++ {
				step("Scan")
				checkScan(o.Scan(), o)
				fuzzCheckReport(t, "attached", o.Check())
				step("TryPop (steal)")
				pb := buf
				if mode&fuzzShortBuf != 0 && k == 0 {
					pb = buf[:1]
				}
				n, id, err := o.TryPopID(pb)
				bad("TryPop", err)
				expect(n >= 0 && n <= maxN && n <= len(pb), "TryPop returned %d bytes", n)
				expect(id == 0 || o.MessageIDs(), "TryPopID: id %d from a deque without ids", id)
				step("TryClaim")
				l, err := o.TryClaim()
				bad("TryClaim", err)
				if err == nil {
					expect(len(l.Data()) <= maxN && l.Slot() < o.Capacity(), "lease of %d bytes in slot %d", len(l.Data()), l.Slot())
					expect(l.ID() == 0 || o.MessageIDs(), "lease id %d from a deque without ids", l.ID())
					if (k+int(mode))%2 == 0 {
						bad("Ack", o.Ack(l))
					} else {
						bad("Release", o.Release(l))
					}
				}
				fuzzDequeBatchOps(o, mode, k, step, bad, expect)
				step("TakePoisoned")
				_, _, err = o.TakePoisoned(buf)
				bad("TakePoisoned", err)
				step("TakeReturned")
				_, err = o.TakeReturned(buf)
				bad("TakeReturned", err)
				step("Repair")
				_, err = o.Repair()
				bad("Repair", err)
			}
			if mode&fuzzBlocking != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				step("Steal")
				_, err := o.Steal(ctx, buf)
				bad("Steal", err, context.DeadlineExceeded)
				step("Claim")
				if l, err := o.Claim(ctx); err == nil {
					bad("Ack", o.Ack(l))
				} else {
					bad("Claim", err, context.DeadlineExceeded)
				}
				bufs, lens := [][]byte{make([]byte, 64), make([]byte, 64)}, make([]int, 2)
				step("PopBatch")
				n, err := o.PopBatch(ctx, bufs, lens)
				bad("PopBatch", err, context.DeadlineExceeded)
				fuzzCheckPopBatch(n, bufs, lens, o.MaxPayload(), "PopBatch", expect)
				step("StealBatch")
				n, err = o.StealBatch(ctx, bufs, lens)
				bad("StealBatch", err, context.DeadlineExceeded)
				fuzzCheckPopBatch(n, bufs, lens, o.MaxPayload(), "StealBatch", expect)
				step("ClaimBatch")
				leases := make([]Lease, 2)
				n, err = o.ClaimBatch(ctx, leases)
				bad("ClaimBatch", err, context.DeadlineExceeded)
				fuzzCheckDequeLeases(o, leases, n, "ClaimBatch", expect)
				step("AckBatch")
				bad("AckBatch", o.AckBatch(leases[:max(n, 0)]))
				cancel()
			}
		}

		// The owner on the patched deque.
		step("owner Release")
		bad("owner Release", d.Release(lease))
		for k := 0; k < 4; k++ {
			step("owner TryPush")
			bad("owner TryPush", d.TryPush([]byte{byte(k)}))
			step("owner TryPushID")
			if err := d.TryPushID([]byte{byte(k), 'i'}, uint64(k)+1); d.MessageIDs() {
				bad("owner TryPushID", err)
			} else {
				expect(errors.Is(err, ErrNoMessageIDs), "TryPushID on a deque without ids: %v", err)
			}
			step("owner TryPop")
			n, err := d.TryPop(buf)
			bad("owner TryPop", err)
			expect(n <= d.MaxPayload(), "owner TryPop returned %d bytes", n)
			step("owner TryPushBatch")
			msgs := [][]byte{{byte(k), 'b', '1'}, {byte(k), 'b', '2'}, {byte(k), 'b', '3'}}
			pn, err := d.TryPushBatch(msgs)
			bad("owner TryPushBatch", err)
			expect(pn >= 0 && pn <= len(msgs) && (err != ErrFull || pn == 0), "owner TryPushBatch pushed %d of %d (%v)", pn, len(msgs), err)
			if d.MessageIDs() {
				step("owner TryPushBatchID")
				pn, err = d.TryPushBatchID(msgs[:2], []uint64{uint64(k) + 1, 1 << 63})
				bad("owner TryPushBatchID", err)
				expect(pn >= 0 && pn <= 2, "owner TryPushBatchID pushed %d of 2", pn)
			}
			step("owner TryPopBatch")
			bufs, lens := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64), make([]byte, 64)}, make([]int, 4)
			if mode&fuzzShortBuf != 0 && k == 0 {
				bufs[1] = bufs[1][:1]
			}
			n, err = d.TryPopBatch(bufs, lens)
			bad("owner TryPopBatch", err)
			expect(err != ErrEmpty || n == 0, "owner TryPopBatch: %d with ErrEmpty", n)
			fuzzCheckPopBatch(n, bufs, lens, d.MaxPayload(), "owner TryPopBatch", expect)
		}
		if mode&fuzzBlocking != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			step("owner Push")
			bad("owner Push", d.Push(ctx, []byte("blocking")), context.DeadlineExceeded)
			step("owner PushBatch")
			pn, err := d.PushBatch(ctx, [][]byte{[]byte("b1"), []byte("b2")})
			bad("owner PushBatch", err, context.DeadlineExceeded)
			expect(pn >= 0 && pn <= 2, "owner PushBatch pushed %d of 2", pn)
			cancel()
		}
		if o != nil {
			step("Close")
			bad("Close", o.Close())
			step("Adopt after the owner closes")
		}
		step("owner Close")
		closed = true
		bad("owner Close", d.Close())
		if o != nil {
			o2, err := OpenDeque(path, openOpts...)
			bad("reopen", err)
			if err == nil {
				step("Adopt")
				_, err = o2.Adopt()
				bad("Adopt", err)
				step("adopter TryPush/TryPop")
				bad("adopter TryPush", o2.TryPush([]byte("z")))
				_, err = o2.TryPop(buf)
				bad("adopter TryPop", err)
				bad("adopter Close", o2.Close())
			}
		}
		return problems
	})
}

// fuzzDequeBatchOps runs a round of the batch calls on a thief's handle:
// a pop batch (with a short buffer first in fuzzShortBuf mode), a steal
// batch, a claim batch and its acks (or releases).
func fuzzDequeBatchOps(o *Deque, mode byte, k int, step func(string), bad func(string, error, ...error), expect func(bool, string, ...any)) {
	maxN := o.MaxPayload()
	bufs, lens := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}, make([]int, 3)
	if mode&fuzzShortBuf != 0 && k == 0 {
		bufs[1] = bufs[1][:1]
	}
	step("TryPopBatch")
	n, err := o.TryPopBatch(bufs, lens)
	bad("TryPopBatch", err)
	expect(err != ErrEmpty || n == 0, "TryPopBatch: %d with ErrEmpty", n)
	fuzzCheckPopBatch(n, bufs, lens, maxN, "TryPopBatch", expect)
	step("TryStealBatch")
	n, err = o.TryStealBatch(bufs, lens)
	bad("TryStealBatch", err)
	expect(err != ErrEmpty || n == 0, "TryStealBatch: %d with ErrEmpty", n)
	fuzzCheckPopBatch(n, bufs, lens, maxN, "TryStealBatch", expect)
	step("TryPushBatch (thief)")
	_, err = o.TryPushBatch([][]byte{{1}})
	expect(errors.Is(err, ErrNotOwner), "a thief's TryPushBatch: %v, want ErrNotOwner", err)

	step("TryClaimBatch")
	leases := make([]Lease, 3)
	n, err = o.TryClaimBatch(leases)
	bad("TryClaimBatch", err)
	fuzzCheckDequeLeases(o, leases, n, "TryClaimBatch", expect)
	if n < 0 || n > len(leases) {
		return
	}
	if (k+int(mode))%2 == 0 {
		step("AckBatch")
		bad("AckBatch", o.AckBatch(leases[:n]))
	} else {
		for _, l := range leases[:n] {
			step("Release")
			bad("Release", o.Release(l))
		}
	}
}

func fuzzCheckDequeLeases(o *Deque, leases []Lease, n int, what string, expect func(bool, string, ...any)) {
	expect(n >= 0 && n <= len(leases), "%s leased %d into %d", what, n, len(leases))
	for j := 0; j < n && j < len(leases); j++ {
		l := leases[j]
		expect(len(l.Data()) <= o.MaxPayload(), "%s: lease of %d bytes", what, len(l.Data()))
		expect(l.Deliveries >= 1 && l.Deliveries <= layout.RingMaxDeliveryLimit, "%s: lease delivered %d times", what, l.Deliveries)
		expect(l.Slot() < o.Capacity(), "%s: lease slot %d", what, l.Slot())
	}
}
