package main

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Leased consumption (`run --lease`, and `run --chaos`, which implies it):
// a consumer takes each message with Claim, shows the lease in its
// heartbeat slot, verifies the message, marks it in a bitmap shared by
// every consumer, and only then Acks it and clears the record. A consumer
// killed anywhere in there loses nothing: its lease stays in the ring
// until the parent's watchdog requeues it, and another consumer receives
// the message again (a duplicate if the first one had marked it). What a
// consumer counts lives in shared memory (the bitmap, its control line),
// so it survives the consumer.

// leaseDeliveryLimit is the ring's delivery limit in a leased run: the
// most the ring allows, so that a message is set aside as poison only
// after 15 deliveries, each of which needs a consumer killed holding it.
const leaseDeliveryLimit = 15

// watchEvery is how often the parent's watchdog scans in a leased run.
const watchEvery = 20 * time.Millisecond

// beatEvery is how often a leased consumer beats in the heartbeat table.
const beatEvery = 50 * time.Millisecond

// maxLeasedSeq bounds a producer's sequence numbers in a timed leased run,
// where the shared bitmap must be sized up front: 2^24 messages per
// producer (2 MiB of bitmap each), and 2^28 in all. Producers stop there:
// the run gives them this count as well as the deadline.
const (
	maxLeasedSeq      = 1 << 24
	maxLeasedSeqTotal = 1 << 28
)

// leasedSeqLimit is each producer's limit in a timed leased run.
func leasedSeqLimit(producers int) int64 {
	return int64(min(maxLeasedSeq, maxLeasedSeqTotal/producers))
}

// sharedSeen is the bitmap of received (producer, seq) pairs that every
// leased consumer maps: one bit per message, set with an atomic OR, whose
// old value says whether the message had been received before.
type sharedSeen struct {
	reg     *shm.Region
	path    string
	removed bool
	words   []atomic.Uint64
	base    []uint64 // first word of each producer
	limit   []uint64 // sequence numbers below this
}

// seenLimits is each producer's sequence limit in a leased run.
func seenLimits(per []int64) []uint64 {
	lim := make([]uint64, len(per))
	for p, n := range per {
		lim[p] = uint64(n)
	}
	return lim
}

func seenGeometry(limits []uint64) (base []uint64, words uint64) {
	base = make([]uint64, len(limits))
	for p, l := range limits {
		base[p] = words
		words += (l + 63) / 64
	}
	return base, max((words+7)&^7, 8) // a region is a whole number of cache lines
}

// newSharedSeen creates the bitmap for producers with these limits.
func newSharedSeen(limits []uint64) (*sharedSeen, error) {
	name, err := shmName("seen")
	if err != nil {
		return nil, err
	}
	_, words := seenGeometry(limits)
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 8 * words}})
	if err != nil {
		return nil, err
	}
	return viewSharedSeen(r, limits)
}

// openSharedSeen maps it in a consumer.
func openSharedSeen(path string, limits []uint64) (*sharedSeen, error) {
	r, err := shm.Open(path, layout.KindRegion)
	if err != nil {
		return nil, err
	}
	s, err := viewSharedSeen(r, limits)
	if err != nil {
		return nil, err
	}
	s.removed = true // not ours to remove
	return s, nil
}

func viewSharedSeen(r *shm.Region, limits []uint64) (*sharedSeen, error) {
	base, words := seenGeometry(limits)
	body := r.Body()
	if uint64(len(body)) < 8*words || uintptr(unsafe.Pointer(&body[0]))%8 != 0 {
		r.Close()
		return nil, fmt.Errorf("bitmap %s: %d bytes, want %d", r.Path(), len(body), 8*words)
	}
	return &sharedSeen{
		reg: r, path: r.Path(), base: base, limit: limits,
		words: unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&body[0])), words),
	}, nil
}

// mark records (p, seq): ok is false, recording nothing, if the pair is
// out of range; again is true if it had been recorded before.
func (s *sharedSeen) mark(p uint32, seq uint64) (ok, again bool) {
	if int(p) >= len(s.limit) || seq >= s.limit[p] {
		return false, false
	}
	bit := uint64(1) << (seq % 64)
	old := s.words[s.base[p]+seq/64].Or(bit)
	return true, old&bit != 0
}

// distinct counts the sent messages marked received; extra counts marks
// beyond what a producer sent (a timed run's limit is above it).
func (s *sharedSeen) distinct(sent []int64) (distinct, extra int64) {
	for p, n := range sent {
		if p >= len(s.limit) {
			break
		}
		nw := (s.limit[p] + 63) / 64
		for i := uint64(0); i < nw; i++ {
			w := s.words[s.base[p]+i].Load()
			lo := i * 64
			in := w
			switch {
			case lo >= uint64(n):
				in = 0
			case uint64(n)-lo < 64:
				in &= 1<<(uint64(n)-lo) - 1
			}
			distinct += int64(bits.OnesCount64(in))
			extra += int64(bits.OnesCount64(w &^ in))
		}
	}
	return distinct, extra
}

func (s *sharedSeen) detach() error {
	if s.removed {
		return nil
	}
	s.removed = true
	return shm.Remove(s.path)
}

func (s *sharedSeen) close() error {
	return errors.Join(s.detach(), s.reg.Close())
}

// linkedFile is a file someone else maps and closes (the heartbeat table,
// the Pass scheduler's rings): the fleet only unlinks it, and closes it
// with closeFn if that is set.
type linkedFile struct {
	path      string
	removed   bool
	closeFn   func() error
	missingOK bool // the file may never have been created
}

func (l *linkedFile) detach() error {
	if l.removed {
		return nil
	}
	l.removed = true
	err := shm.Remove(l.path)
	if l.missingOK && errors.Is(err, shm.ErrNotExist) {
		return nil
	}
	return err
}

func (l *linkedFile) close() error {
	err := l.detach()
	if l.closeFn != nil {
		err = errors.Join(err, l.closeFn())
	}
	return err
}

// leaseKit is what a leased consumer process holds besides its ring or
// deque end. A deque's consumer has no heartbeat table (hb and member are
// nil): the deque stamps every lease with its holder's participant entry,
// which proves the holder dead, and its Repair returns the lease.
type leaseKit struct {
	hb     *heartbeat.Table
	member *heartbeat.Member
	seen   *sharedSeen
	lat    *sharedLatency
	rec    *latWriter // this consumer's slot of lat

	stopBeat chan struct{}
	beating  sync.WaitGroup
}

// openLeaseKit maps the shared bitmap and latency histograms, registers
// the consumer in the heartbeat table, and starts beating; with no table
// (deque), it only maps the shared files.
func openLeaseKit(j *job) (*leaseKit, error) {
	seen, err := openSharedSeen(j.Seen, seenLimits(j.PerProducer))
	if err != nil {
		return nil, err
	}
	lat, err := openSharedLatency(j.Latency, j.LatSlots)
	if err != nil {
		seen.close()
		return nil, err
	}
	rec, err := lat.writer(j.LatSlot)
	if err != nil {
		lat.close()
		seen.close()
		return nil, err
	}
	if j.Heartbeat == "" {
		return &leaseKit{seen: seen, lat: lat, rec: rec}, nil
	}
	hb, err := heartbeat.Open(j.Heartbeat)
	if err != nil {
		lat.close()
		seen.close()
		return nil, err
	}
	m, err := hb.Register(fmt.Sprintf("consumer-%d", j.ID))
	if err != nil {
		hb.Close()
		lat.close()
		seen.close()
		return nil, err
	}
	k := &leaseKit{hb: hb, member: m, seen: seen, lat: lat, rec: rec, stopBeat: make(chan struct{})}
	k.beating.Add(1)
	go func() {
		defer k.beating.Done()
		t := time.NewTicker(beatEvery)
		defer t.Stop()
		for {
			select {
			case <-k.stopBeat:
				return
			case <-t.C:
				m.Beat()
			}
		}
	}()
	return k, nil
}

func (k *leaseKit) close() error {
	files := errors.Join(k.seen.close(), k.lat.close())
	if k.member == nil {
		return files
	}
	close(k.stopBeat)
	k.beating.Wait()
	return errors.Join(k.member.Unregister(), k.hb.Close(), files)
}

// claim leases the next message, polling or blocking as the end does.
func (e *ringEnd) claim() (transport.Lease, error) {
	if !e.poll {
		return e.r.Claim(e.ctx)
	}
	for fails := 1; ; fails++ {
		l, err := e.r.TryClaim()
		if !errors.Is(err, transport.ErrEmpty) {
			return l, err
		}
		if err := e.idle(fails); err != nil {
			return l, err
		}
	}
}

func (e *ringEnd) ack(l transport.Lease) error { return e.r.Ack(l) }
func (e *ringEnd) fileID() uint64              { return e.r.ID() }

// leaser is a consumer's end that leases: a ring's or a deque's.
type leaser interface {
	claim() (transport.Lease, error) // the next message, polling or blocking as the end does
	ack(transport.Lease) error
	fileID() uint64 // for the lease record in the heartbeat table
}

// consumeLeased is consume with leases: for each message Claim, record
// the lease in the heartbeat slot, verify, mark it in the shared bitmap,
// record its latency in the consumer's shared histogram (first receipts
// only), count it in the control line, then Ack and clear the record,
// until an end marker. A message is counted as received before it is
// acked: if the consumer dies in between, the message comes again and
// counts as a duplicate, never as lost. Everything counted is in shared
// memory, so the report carries no latencies: the parent reads them from
// the shared histograms, killed consumers' included.
func consumeLeased(j *job, e leaser, k *leaseKit, line ctlLineWords) (*report, error) {
	fileID := e.fileID()
	rec := k.rec
	rep := &report{Role: roleConsumer, ID: j.ID}
	var received, dup, corrupt uint64
	for {
		l, err := e.claim()
		now := shm.MonoNow()
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		var ref heartbeat.LeaseRef
		rerr := errNoTable
		if k.member != nil {
			ref, rerr = k.member.RecordLease(fileID, l.Slot(), l.Lap(), l.Deliveries)
		}
		h, err := parseMsg(l.Data(), j.Lane.Payload)
		end := err == nil && h.isEnd()
		again := false
		if err == nil && !end {
			var ok bool
			if ok, again = k.seen.mark(h.producer, h.seq); !ok {
				err = fmt.Errorf("producer %d sequence %d out of range", h.producer, h.seq)
			}
		}
		switch {
		case err != nil:
			if corrupt == 0 {
				rep.Why = err.Error()
			}
			corrupt++
			line.corrupt.Store(corrupt)
		case !end:
			received++
			if again {
				dup++
				line.dup.Store(dup)
			} else {
				rec.record(now - h.sent)
			}
			if rep.First == 0 {
				rep.First = now
			}
			rep.Last = now
			line.last.Store(uint64(now))
			line.progress.Store(received)
		}
		if err := e.ack(l); err != nil {
			return nil, fmt.Errorf("ack: %w", err)
		}
		if rerr == nil {
			k.member.ClearLease(ref)
		}
		if end {
			break
		}
	}
	rep.Received, rep.Corrupt = int64(received), int64(corrupt)
	return rep, nil
}

// errNoTable: a deque's consumer records its leases in no heartbeat table.
var errNoTable = errors.New("no heartbeat table")

// leaseWatch is the parent's watchdog in a leased run: every watchEvery it
// scans the heartbeat table (reclaiming dead consumers' slots once their
// leases are requeued) and repairs the ring (which requeues the leases of
// any participant proven dead, registered in the table or not).
//
// For a deque there is no table: the watchdog only repairs the deque,
// which returns the leases of any thief proven dead (they are taken again
// before anything newer) and frees its participant entry.
type leaseWatch struct {
	wd    *heartbeat.Watchdog
	ring  *transport.Ring
	deque *transport.Deque // instead of wd and ring

	mu        sync.Mutex
	scans     int
	reclaimed int

	stopCh chan struct{}
	done   chan struct{}
}

func newLeaseWatch(hb *heartbeat.Table, r *transport.Ring) *leaseWatch {
	return &leaseWatch{wd: heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{r}}), ring: r}
}

func newDequeWatch(d *transport.Deque) *leaseWatch { return &leaseWatch{deque: d} }

// start runs the periodic scans until stop.
func (w *leaseWatch) start() {
	w.stopCh, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stopCh:
				return
			case <-t.C:
				w.scan()
			}
		}
	}()
}

// stop ends the periodic scans; safe to call more than once, or without
// start.
func (w *leaseWatch) stop() {
	if w.stopCh == nil {
		return
	}
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
}

// scan runs one watchdog scan and one ring repair, and reports whether
// everything is clean: nobody dead in the table, nothing orphaned,
// poisoned or corrupt in the ring, no requeue deferred.
func (w *leaseWatch) scan() (clean bool, why string) {
	if w.deque != nil {
		return w.scanDeque()
	}
	rep := w.wd.Scan(true)
	rr, rerr := w.ring.Repair()
	w.mu.Lock()
	w.scans++
	w.reclaimed += len(rep.Reclaimed)
	w.mu.Unlock()
	sc := w.ring.Scan()
	problems := sc.Problems
	for _, sl := range sc.Slots {
		if sl.Problem == transport.SlotPoison {
			problems-- // there for good: counted as lost at the end
		}
	}
	switch {
	case rep.Dead > 0:
		return false, fmt.Sprintf("%d dead participants in the heartbeat table", rep.Dead)
	case rerr != nil:
		return false, rerr.Error()
	case rr.Count(check.ActionDefer) > 0 || sc.Counters.Deferred > 0:
		return false, "requeues deferred"
	case problems > 0:
		return false, fmt.Sprintf("%d ring slots orphaned or corrupt", problems)
	}
	for _, p := range sc.Peers {
		if p.Dead {
			return false, "dead ring participants"
		}
	}
	return true, ""
}

// scanDeque repairs the deque and reports whether everything is clean:
// no dead participant, nothing orphaned or corrupt (poison aside), and no
// returned message left: the live thieves must have taken every message
// a repair returned before the end markers go in, for a thief takes
// returned messages only when it gets round to them (first, or once the
// deque is otherwise empty, depending on the deque's version), and the
// markers would otherwise end the run first. reclaimed counts the dead
// thieves' entries the repairs freed.
func (w *leaseWatch) scanDeque() (clean bool, why string) {
	rr, rerr := w.deque.Repair()
	w.mu.Lock()
	w.scans++
	w.reclaimed += len(rr.DeadPeers)
	w.mu.Unlock()
	sc := w.deque.Scan()
	problems := sc.Problems
	for _, sl := range sc.Slots {
		if sl.Problem == transport.SlotPoison {
			problems-- // there for good: counted as lost at the end
		}
	}
	switch {
	case rerr != nil:
		return false, rerr.Error()
	case problems > 0:
		return false, fmt.Sprintf("%d deque slots orphaned or corrupt, or a dead owner", problems)
	case sc.States[layout.SlotReturned] > 0:
		return false, fmt.Sprintf("%d returned messages not yet taken again", sc.States[layout.SlotReturned])
	}
	for _, p := range sc.Peers {
		if p.Dead {
			return false, "dead deque participants"
		}
	}
	return true, ""
}

// settle scans until clean: every lease of a killed consumer is back in
// the ring, ahead of the end markers that come next.
func (w *leaseWatch) settle(ctx context.Context) error {
	for {
		clean, why := w.scan()
		if clean {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never settled (%s): %w", w.what(), why, context.Cause(ctx))
		case <-time.After(time.Millisecond):
		}
	}
}

func (w *leaseWatch) counts() (scans, reclaimed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scans, w.reclaimed
}

func (w *leaseWatch) what() string {
	if w.deque != nil {
		return "deque"
	}
	return "ring"
}
