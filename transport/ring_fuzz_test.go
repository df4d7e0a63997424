package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/memfuzz"
)

// FuzzRingMemory treats the ring file as hostile input, as the package
// promises to: a real ring with messages in mixed states has the fuzz input
// written over its bytes, and then every operation must return (within a
// deadline, so livelocks are found rather than hung on), must not panic,
// and may fail only with one of the documented errors.
//
// Input format:
//
//	[0:2]  little-endian offset of the patch, modulo the target's size
//	[2]    mode bits (fuzzHeader, fuzzRelease, fuzzShortBuf, fuzzBlocking,
//	       fuzzLoan, fuzzIDs)
//	[3:]   bytes written at that offset (cut at the target's end)
//
// The target is the ring's area (control words, participant table, slots),
// or with fuzzHeader the 256-byte common header, in which case OpenRing must
// fail whenever the header no longer decodes.
func FuzzRingMemory(f *testing.F) {
	for _, s := range fuzzRingSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		fuzzRingOnce(t, data)
	})
}

const (
	fuzzHeader   = 0x80 // patch the common header instead of the ring's area
	fuzzRelease  = 0x01 // return leases with Release rather than Ack
	fuzzShortBuf = 0x02 // pop into a short buffer first
	fuzzBlocking = 0x04 // also call the blocking Push, Pop, Claim and Loan with a short deadline
	fuzzLoan     = 0x08 // the creator holds a loan (slot 4) across the patch, then publishes it (aborts it with fuzzRelease)
	fuzzIDs      = 0x10 // the file has message ids (RingConfig.MessageIDs): the patch may hit id words

	fuzzDeadline = 2 * time.Second // longest any single call may take
)

var fuzzRingConfig = RingConfig{Capacity: 8, SlotSize: 64, Participants: 4, DeliveryLimit: 3}

// fuzzConfig is fuzzRingConfig with message ids when mode asks for them.
func fuzzConfig(mode byte) RingConfig {
	c := fuzzRingConfig
	c.MessageIDs = mode&fuzzIDs != 0
	return c
}

// fuzzIDSeeds are seeds for a file with message ids: its id words (the
// last 8 bytes of each slot) and its option word patched.
func fuzzIDSeeds(slot func(uint64) int, slotSize int) [][]byte {
	id := func(i uint64) int { return slot(i) + slotSize - 8 }
	return [][]byte{
		fuzzSeed(id(2), fuzzIDs, fuzzLE64(0)),                     // a published message with id 0
		fuzzSeed(id(0), fuzzIDs|fuzzRelease, fuzzRepeat(0xff, 8)), // the creator's lease with id 2^64-1
		fuzzSeed(id(3)-4, fuzzIDs|fuzzShortBuf, fuzzRepeat(0xa5, 16)),
		fuzzSeed(layout.OffParam2, fuzzHeader|fuzzIDs, []byte{0}),       // the option cleared (checksum now wrong)
		fuzzSeed(layout.OffParam2, fuzzHeader, []byte{1}),               // the option set on a file without ids
		fuzzSeed(layout.OffParam2, fuzzHeader|fuzzIDs, []byte{3, 0, 0}), // an unknown option bit
	}
}

// fuzzRingLayout is the layout of fuzzRingConfig, for building seeds.
func fuzzRingLayout() layout.RingLayout {
	l, err := layout.NewRingLayout(fuzzRingConfig.geometry())
	if err != nil {
		panic(err)
	}
	return l
}

func fuzzSeed(off int, mode byte, patch ...[]byte) []byte {
	b := []byte{byte(off), byte(off >> 8), mode}
	for _, p := range patch {
		b = append(b, p...)
	}
	return b
}

// fuzzUndecided is a participant entry of an active process that runs
// (this one) but does not hold the entry's lock: a judge can prove it
// neither alive (no lock) nor dead (the pid witness says it runs).
func fuzzUndecided() []byte {
	self := shm.Self()
	var b []byte
	for _, v := range []uint64{layout.PeerCtl{State: layout.PeerActive, Gen: 2, PID: uint32(self.PID)}.Pack(), self.Start, shm.BootTag(), 1, shm.PidNamespace()} {
		b = append(b, fuzzLE64(v)...) // ctl, start, boot, attached, pid_ns
	}
	return append(b, make([]byte, layout.PeerEntrySize-len(b))...)
}

func fuzzLE64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func fuzzRepeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func fuzzRingSeeds() [][]byte {
	l := fuzzRingLayout()
	slot := func(i uint64) int { return int(l.SlotOff(i)) }
	entry := func(i uint64) int { return int(l.ParticipantOff(i)) }
	// A participant entry of an active process that cannot exist (pid
	// beyond any pid_max): Repair proves it dead.
	var deadPeer []byte
	for _, v := range []uint64{layout.PeerCtl{State: layout.PeerActive, Gen: 3, PID: 0x7ffffff0}.Pack(), 1, 0, 1} {
		deadPeer = append(deadPeer, fuzzLE64(v)...) // ctl, start, boot, attached
	}
	word := func(w layout.SlotWord) []byte { return fuzzLE64(w.Pack()) }
	seeds := [][]byte{
		fuzzSeed(0, 0, make([]byte, 64)),                                                   // zero the producers' line
		fuzzRepeat(0xff, 64),                                                               // header mode, all ones
		fuzzSeed(0, 0, fuzzRepeat(0xff, 64)),                                               // tail, pushed... all ones
		fuzzSeed(0, 0, make([]byte, int(l.BodySize))),                                      // the whole area zeroed
		fuzzSeed(0, fuzzRelease, fuzzRepeat(0xff, 1100)),                                   // the whole area all ones
		fuzzSeed(slot(2), 0, fuzzLE64(0x7)),                                                // slot word with invalid state 7
		fuzzSeed(slot(2), 0, word(layout.SlotWord{State: layout.SlotReady, Length: 1000})), // length past the payload
		fuzzSeed(slot(2), 0, word(layout.SlotWord{State: layout.SlotPoisoned, Deliveries: 3, Length: 2})),
		fuzzSeed(slot(3), fuzzShortBuf, word(layout.SlotWord{State: layout.SlotReady, Deliveries: 15, Length: 56})),
		// A dead participant owning the lease in slot 0; a dead participant
		// owning nothing; a write by a participant entry that is free.
		// (The lease's word was once padded to land 32 bytes short of
		// slot 0, in the repairer entry: pad from the end of deadPeer.)
		fuzzSeed(entry(1), 0, deadPeer, make([]byte, slot(0)-entry(1)-len(deadPeer)),
			word(layout.SlotWord{State: layout.SlotLeased, Owner: 2, Deliveries: 1, Length: 2})),
		// A dead batch producer's claims at the tail (4) and ahead of it;
		// a dead pop batch's takes at the head (2) and ahead of it; a
		// live one's (the creator's) claims at and ahead of the tail.
		fuzzSeed(entry(1), 0, deadPeer, make([]byte, slot(4)-entry(1)-len(deadPeer)),
			word(layout.SlotWord{State: layout.SlotWriting, Owner: 2}), make([]byte, l.PayloadMax()),
			word(layout.SlotWord{State: layout.SlotWriting, Owner: 2})),
		fuzzSeed(entry(1), fuzzBlocking, deadPeer, make([]byte, slot(2)-entry(1)-len(deadPeer)),
			word(layout.SlotWord{State: layout.SlotReading, Owner: 2, Deliveries: 1, Length: 2}), make([]byte, l.PayloadMax()),
			word(layout.SlotWord{State: layout.SlotReading, Owner: 2, Deliveries: 1, Length: 2})),
		fuzzSeed(slot(4), fuzzShortBuf, word(layout.SlotWord{State: layout.SlotWriting, Owner: 1}), make([]byte, l.PayloadMax()),
			word(layout.SlotWord{State: layout.SlotWriting, Owner: 1})),
		fuzzSeed(entry(1), fuzzRelease, deadPeer),
		// The creator's entry reads free (its lock still held) and the
		// others hold a state no attach takes: attaching waits for a
		// claim or detach that never finishes, for its bounded time.
		fuzzSeed(entry(0), 0, fuzzLE64(layout.PeerCtl{State: layout.PeerFree, Gen: 9}.Pack()), make([]byte, layout.PeerEntrySize-8),
			fuzzRepeat(0xff, 3*layout.PeerEntrySize)),
		// Every other entry active for a process that lives but holds no
		// lock (this one, another start time): undecided, not dead.
		fuzzSeed(entry(1), 0, fuzzUndecided(), fuzzUndecided(), fuzzUndecided()),
		fuzzSeed(slot(4), 0, word(layout.SlotWord{State: layout.SlotWriting, Owner: 4, Length: 0})),
		fuzzSeed(layout.RingOffHead, 0, fuzzLE64(100)),                  // head far past the tail
		fuzzSeed(layout.RingOffTail, 0, fuzzLE64(1<<62)),                // tail far past the head
		fuzzSeed(layout.RingOffRepairLock, 0, fuzzLE64(0x3ff)),          // repair lock held by nobody
		fuzzSeed(layout.RingOffRepairLock, 0, fuzzLE64(2)),              // repair lock held by the next attacher
		fuzzSeed(layout.RingOffNotEmptyWait, fuzzBlocking, fuzzLE64(1)), // a sleeper announced
		fuzzSeed(layout.OffCreated, fuzzHeader, []byte{0x55}),           // checksummed byte changed
		fuzzSeed(layout.OffReady, fuzzHeader, make([]byte, 4)),          // not ready
		fuzzSeed(layout.OffGeneration, fuzzHeader, fuzzLE64(7)),         // mutable word: still opens
		// The creator's loan in slot 4 ended by someone else, taken over
		// by another owner, or given a length past the payload.
		fuzzSeed(slot(4), fuzzLoan, word(layout.SlotWord{State: layout.SlotReady, Length: 3})),
		fuzzSeed(slot(4), fuzzLoan|fuzzRelease, word(layout.SlotWord{State: layout.SlotWriting, Owner: 2})),
		fuzzSeed(slot(4), fuzzLoan|fuzzBlocking, word(layout.SlotWord{State: layout.SlotWriting, Owner: 1, Length: 1000})),
		fuzzSeed(layout.RingOffTail, fuzzLoan, fuzzLE64(4)), // the tail back at the loan
		fuzzSeed(slot(4), fuzzLoan|fuzzIDs, word(layout.SlotWord{State: layout.SlotReady, Length: 48})),
		fuzzSeed(slot(2), fuzzIDs, word(layout.SlotWord{State: layout.SlotReady, Length: 56})), // fits without ids, not with
	}
	return append(seeds, fuzzIDSeeds(slot, int(l.SlotSize))...)
}

// fuzzErrs are the errors ring operations may return on corrupt memory.
var fuzzErrs = []error{
	ErrCorrupt, ErrEmpty, ErrFull, ErrShortBuffer, ErrLeaseLost, ErrRepairBusy, ErrTooManyPeers,
	layout.ErrInvalid, layout.ErrTooShort, layout.ErrBadMagic, layout.ErrVersionMismatch,
	layout.ErrChecksum, layout.ErrUnknownKind, layout.ErrWrongKind, layout.ErrGeometry, layout.ErrSlotCorrupt,
	shm.ErrNotRegular, shm.ErrTruncated, shm.ErrSizeMismatch, shm.ErrNotReady, shm.ErrBadOffset,
}

func fuzzErrOK(err error, also ...error) bool {
	if err == nil {
		return true
	}
	for _, s := range append(also, fuzzErrs...) {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func fuzzRingOnce(t *testing.T, data []byte) {
	path := ringPath(t)
	r, err := CreateRing(path, fuzzConfig(data[2]))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			r.Close()
		}
	}()
	// Mixed states: slot 0 leased by r, slot 1 free one lap on, slots 2
	// and 3 ready, the rest free; head 2, tail 4.
	for _, m := range []string{"m0", "m1", "m2"} {
		if err := r.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.TryPop(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if err := r.TryPush([]byte("m3")); err != nil {
		t.Fatal(err)
	}
	r.NextID()
	// With fuzzLoan, slot 4 is also the creator's loan, half written.
	var loan Loan
	if data[2]&fuzzLoan != 0 {
		if loan, err = r.TryLoan(8); err != nil {
			t.Fatal(err)
		}
		copy(loan.Data(), "m4")
	}

	mode, mustFail := memfuzz.Overlay(t, path, r.Header(), layout.KindRing, data, fuzzHeader)
	// A short attach wait: a table the patch left with no entry to take
	// (one read free but locked by the creator, undecided ones) fails
	// after it rather than after the default 10 s; a wait without a
	// bound would still outlast fuzzDeadline.
	openOpts := []shm.Option{shm.WithReadyTimeout(10 * time.Millisecond), shm.WithAttachTimeout(50 * time.Millisecond)}

	memfuzz.Run(t, fuzzDeadline, func(step func(string)) (problems []string) {
		bad := func(what string, err error, also ...error) {
			if !fuzzErrOK(err, also...) {
				problems = append(problems, fmt.Sprintf("%s: unexpected error %v", what, err))
			}
		}
		expect := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		buf := make([]byte, 4096)

		step("OpenRingReadOnly")
		ro, err := OpenRingReadOnly(path, openOpts...)
		// Read-only open looks at the header only.
		expect(mustFail == (err != nil), "OpenRingReadOnly: %v, header should fail: %v", err, mustFail)
		bad("OpenRingReadOnly", err)
		if err == nil {
			step("read-only Scan")
			fuzzCheckScan(ro.Scan(), ro, expect)
			step("read-only Check")
			fuzzCheckReport(t, "read-only", ro.Check())
			step("read-only Peek")
			fuzzCheckPeek(ro.Peek(1<<20))(expect, ro.Capacity(), ro.MaxPayload())
			step("read-only TryPush")
			expect(ro.TryPush([]byte("x")) == ErrNotAttached, "read-only TryPush did not fail with ErrNotAttached")
			step("read-only Repair")
			_, rerr := ro.Repair()
			expect(rerr == ErrNotAttached, "read-only Repair: %v", rerr)
			step("read-only Close")
			bad("read-only Close", ro.Close())
		}

		step("OpenRing")
		o, err := OpenRing(path, openOpts...)
		expect(!mustFail || err != nil, "OpenRing accepted a header that does not decode")
		bad("OpenRing", err)
		if err == nil {
			maxN := o.MaxPayload()
			for k := 0; k < 6; k++ {
				step("Scan")
				fuzzCheckScan(o.Scan(), o, expect)
				fuzzCheckReport(t, "attached", o.Check())

				step("TryPush")
				bad("TryPush", o.TryPush([]byte{byte(k), 'x'}))
				step("TryPushID")
				if err := o.TryPushID([]byte{byte(k), 'i'}, uint64(k)<<32|7); o.MessageIDs() {
					bad("TryPushID", err)
				} else {
					expect(errors.Is(err, ErrNoMessageIDs), "TryPushID on a ring without ids: %v", err)
				}

				step("TryPop")
				pb := buf
				if mode&fuzzShortBuf != 0 && k == 0 {
					pb = buf[:1]
				}
				n, id, err := o.TryPopID(pb)
				bad("TryPop", err)
				expect(n >= 0 && n <= maxN && n <= len(pb), "TryPop returned %d bytes (max payload %d)", n, maxN)
				expect(id == 0 || o.MessageIDs(), "TryPopID: id %d from a ring without ids", id)

				step("TryClaim")
				l, err := o.TryClaim()
				bad("TryClaim", err)
				if err == nil {
					expect(len(l.Data()) <= maxN, "lease of %d bytes (max payload %d)", len(l.Data()), maxN)
					expect(l.Deliveries >= 1 && l.Deliveries <= layout.RingMaxDeliveryLimit, "lease delivered %d times", l.Deliveries)
					expect(l.Slot() < o.Capacity(), "lease slot %d", l.Slot())
					expect(l.ID() == 0 || o.MessageIDs(), "lease id %d from a ring without ids", l.ID())
					if (k+int(mode))%2 == 0 {
						step("Ack")
						bad("Ack", o.Ack(l))
					} else {
						step("Release")
						bad("Release", o.Release(l))
					}
				}

				step("TryLoan")
				ln := (k * 11) % (maxN + 1)
				lo, err := o.TryLoan(ln)
				bad("TryLoan", err)
				if err == nil {
					fuzzEndLoan(o, lo, ln, k+int(mode), step, bad, expect)
				}
				fuzzBatchOps(o, mode, k, step, bad, expect)

				step("TakePoisoned")
				n, d, err := o.TakePoisoned(buf)
				bad("TakePoisoned", err)
				expect(n <= maxN && d <= layout.RingMaxDeliveryLimit, "TakePoisoned: %d bytes, %d deliveries", n, d)

				step("Repair")
				rep, err := o.Repair()
				bad("Repair", err)
				expect(rep.Count(check.ActionRelease)+rep.Count(check.ActionRequeue)+rep.Count(check.ActionRequeueInPlace) <= int(o.Capacity()) && len(rep.DeadPeers) <= 4,
					"Repair report %+v", rep)

				step("NextID")
				o.NextID()
			}
			if mode&fuzzBlocking != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				step("Push")
				bad("Push", o.Push(ctx, []byte("blocking")), context.DeadlineExceeded)
				step("Pop")
				n, err := o.Pop(ctx, buf)
				bad("Pop", err, context.DeadlineExceeded)
				expect(n <= maxN, "Pop returned %d bytes (max payload %d)", n, maxN)
				step("Claim")
				l, err := o.Claim(ctx)
				bad("Claim", err, context.DeadlineExceeded)
				if err == nil {
					expect(len(l.Data()) <= maxN, "Claim: lease of %d bytes", len(l.Data()))
					step("Ack")
					bad("Ack", o.Ack(l))
				}
				step("Loan")
				lo, err := o.Loan(ctx, 1)
				bad("Loan", err, context.DeadlineExceeded)
				if err == nil {
					fuzzEndLoan(o, lo, 1, 0, step, bad, expect)
				}
				step("PushBatch")
				pn, err := o.PushBatch(ctx, [][]byte{[]byte("b1"), []byte("b2")})
				bad("PushBatch", err, context.DeadlineExceeded)
				expect(pn >= 0 && pn <= 2, "PushBatch pushed %d of 2", pn)
				step("PopBatch")
				bufs, lens := [][]byte{buf[:64], buf[64:128]}, make([]int, 2)
				n, err = o.PopBatch(ctx, bufs, lens)
				bad("PopBatch", err, context.DeadlineExceeded)
				fuzzCheckPopBatch(n, bufs, lens, maxN, "PopBatch", expect)
				step("ClaimBatch")
				leases := make([]Lease, 2)
				n, err = o.ClaimBatch(ctx, leases)
				bad("ClaimBatch", err, context.DeadlineExceeded)
				fuzzCheckLeases(o, leases, n, "ClaimBatch", expect)
				step("AckBatch")
				bad("AckBatch", o.AckBatch(leases[:max(n, 0)]))
				cancel()
			}
		}

		// The creator ends its loan on the patched ring: ErrLeaseLost or
		// ErrCorrupt if the patch took its slot, never a panic.
		if mode&fuzzLoan != 0 {
			if mode&fuzzRelease != 0 {
				step("creator Abort")
				bad("creator Abort", r.Abort(loan))
			} else {
				step("creator Publish")
				bad("creator Publish", r.Publish(loan))
			}
		}
		// The creator's handle gives its lease back on the patched ring.
		if mode&fuzzRelease != 0 {
			step("creator Release")
			bad("creator Release", r.Release(lease))
		} else {
			step("creator Ack")
			bad("creator Ack", r.Ack(lease))
		}
		step("creator Repair")
		_, err = r.Repair()
		bad("creator Repair", err)
		step("creator TryPop")
		n, err := r.TryPop(buf)
		bad("creator TryPop", err)
		expect(n <= r.MaxPayload(), "creator TryPop returned %d bytes", n)

		if o != nil {
			step("Close")
			bad("Close", o.Close())
		}
		step("creator Close")
		closed = true
		bad("creator Close", r.Close())
		return problems
	})
}

// fuzzEndLoan checks a loan of n bytes that o just took on the patched
// ring and ends it (how, by how: Publish, PublishN of half, Abort); a
// second end must then fail.
func fuzzEndLoan(o *Ring, l Loan, n, how int, step func(string), bad func(string, error, ...error), expect func(bool, string, ...any)) {
	d := l.Data()
	expect(len(d) == n && cap(d) == n, "TryLoan(%d): Data of len %d cap %d", n, len(d), cap(d))
	expect(l.Slot() < o.Capacity(), "loan slot %d", l.Slot())
	for i := range d {
		d[i] = byte(i)
	}
	var err error
	switch how % 3 {
	case 0:
		step("Publish")
		err = o.Publish(l)
		bad("Publish", err)
	case 1:
		step("PublishN")
		err = o.PublishN(l, n/2)
		bad("PublishN", err)
	default:
		step("Abort")
		err = o.Abort(l)
		bad("Abort", err)
	}
	if err == nil {
		step("second end of a loan")
		again := o.Publish(l)
		expect(again != nil, "a loan ended twice: the second Publish succeeded")
		bad("second Publish", again)
	}
}

// fuzzCheckScan checks that a scan accounts for every slot exactly once.
func fuzzCheckScan(rep ScanReport, r *Ring, expect func(bool, string, ...any)) {
	total := rep.Corrupt
	for s, n := range rep.States {
		expect(s.Valid(), "Scan counted invalid state %d", s)
		total += n
	}
	expect(uint64(total) == r.Capacity(), "Scan accounted for %d of %d slots", total, r.Capacity())
	expect(uint64(len(rep.Slots)) <= r.Capacity() && rep.Problems <= len(rep.Slots), "Scan: %d slots, %d problems", len(rep.Slots), rep.Problems)
	for _, s := range rep.Slots {
		expect(s.Index < r.Capacity(), "Scan reported slot %d", s.Index)
		if s.Problem != SlotCorrupt {
			expect(uint64(s.Word.Length) <= uint64(r.MaxPayload()), "Scan passed slot %d with length %d", s.Index, s.Word.Length)
		}
	}
}

// fuzzBatchOps runs a round of the batch calls: a push batch, a pop batch
// (with a short buffer first in fuzzShortBuf mode), a claim batch and its
// acks (or releases).
func fuzzBatchOps(o *Ring, mode byte, k int, step func(string), bad func(string, error, ...error), expect func(bool, string, ...any)) {
	maxN := o.MaxPayload()
	step("TryPushBatch")
	msgs := [][]byte{{byte(k), 'b', '1'}, {byte(k), 'b', '2'}, {byte(k), 'b', '3'}}
	pn, err := o.TryPushBatch(msgs)
	bad("TryPushBatch", err)
	expect(pn >= 0 && pn <= len(msgs) && (err != ErrFull || pn == 0), "TryPushBatch pushed %d of %d (%v)", pn, len(msgs), err)
	if o.MessageIDs() {
		step("TryPushBatchID")
		pn, err = o.TryPushBatchID(msgs[:2], []uint64{uint64(k) + 1, 1 << 63})
		bad("TryPushBatchID", err)
		expect(pn >= 0 && pn <= 2, "TryPushBatchID pushed %d of 2", pn)
	}

	step("TryPopBatch")
	bufs, lens := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}, make([]int, 3)
	if mode&fuzzShortBuf != 0 && k == 0 {
		bufs[1] = bufs[1][:1]
	}
	n, err := o.TryPopBatch(bufs, lens)
	bad("TryPopBatch", err)
	expect(err != ErrEmpty || n == 0, "TryPopBatch: %d with ErrEmpty", n)
	fuzzCheckPopBatch(n, bufs, lens, maxN, "TryPopBatch", expect)

	step("TryClaimBatch")
	leases := make([]Lease, 3)
	n, err = o.TryClaimBatch(leases)
	bad("TryClaimBatch", err)
	fuzzCheckLeases(o, leases, n, "TryClaimBatch", expect)
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

func fuzzCheckPopBatch(n int, bufs [][]byte, lens []int, maxN int, what string, expect func(bool, string, ...any)) {
	expect(n >= 0 && n <= len(bufs), "%s popped %d into %d buffers", what, n, len(bufs))
	for j := 0; j < n && j < len(bufs); j++ {
		expect(lens[j] >= 0 && lens[j] <= maxN && lens[j] <= len(bufs[j]), "%s: message %d of %d bytes (buffer %d, max payload %d)", what, j, lens[j], len(bufs[j]), maxN)
	}
}

func fuzzCheckLeases(o *Ring, leases []Lease, n int, what string, expect func(bool, string, ...any)) {
	expect(n >= 0 && n <= len(leases), "%s leased %d into %d", what, n, len(leases))
	for j := 0; j < n && j < len(leases); j++ {
		l := leases[j]
		expect(len(l.Data()) <= o.MaxPayload(), "%s: lease of %d bytes", what, len(l.Data()))
		expect(l.Deliveries >= 1 && l.Deliveries <= layout.RingMaxDeliveryLimit, "%s: lease delivered %d times", what, l.Deliveries)
		expect(l.Slot() < o.Capacity(), "%s: lease slot %d", what, l.Slot())
	}
}

// fuzzCheckPeek checks what Peek returned over a fuzzed file: no more
// messages than slots, each in a slot of the file, no payload longer than
// a slot holds, a writing slot without one. It returns a closure so that
// the call site reads as the others.
func fuzzCheckPeek(ps []Peeked, err error) func(expect func(bool, string, ...any), capacity uint64, maxPayload int) {
	return func(expect func(bool, string, ...any), capacity uint64, maxPayload int) {
		if err != nil {
			expect(errors.Is(err, shm.ErrFault), "Peek: %v", err)
			return
		}
		expect(uint64(len(ps)) <= 2*capacity, "Peek returned %d messages of a %d-slot file", len(ps), capacity)
		for _, p := range ps {
			expect(p.Slot < capacity, "Peek: slot %d of %d", p.Slot, capacity)
			expect(len(p.Data) <= maxPayload, "Peek: a %d-byte payload, limit %d", len(p.Data), maxPayload)
			expect(p.State != layout.SlotWriting || p.Data == nil, "Peek: a writing slot with a payload")
		}
	}
}
