package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/internal/bridge/journal"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// OutOptions tune the out direction.
type OutOptions struct {
	Subject      string
	Batch        int           // leases per claim (default 256)
	InFlight     int           // batches published and awaiting their PubAcks (default 4)
	DupWindow    time.Duration // the stream's duplicate window (StreamInfo), for late-duplicate accounting
	StallWait    time.Duration // how long one publish waits for a PubAck slot before retrying (default 200 ms, the client's)
	DrainTimeout time.Duration // on stop, how long to finish what is in flight (default 30 s)
	Log          io.Writer     // one line per notable event (late duplicates, errors after a success)
}

// defaultStallWait is the client's own (nats.go's jetstream package).
const defaultStallWait = 200 * time.Millisecond

// MsgID is the Nats-Msg-Id of message id of the ring whose file id is
// fileID: the same for every delivery of the message (repairs keep the
// id), unique across the ring's re-creations (a new file has a new id).
func MsgID(fileID, id uint64) string { return fmt.Sprintf("%016x-%d", fileID, id) }

// Out carries a ring's messages to a JetStream subject.
type Out struct {
	src   Source
	conn  *Conn
	js    jetstream.JetStream
	j     *journal.Journal
	o     OutOptions
	stats *Stats
	errs  errorLog
	// streams are the handles duplicates are verified through, by the
	// PubAck's stream name (only the acker goroutine uses them).
	streams map[string]jetstream.Stream
	// pubOpts are the publish options: none for the client's default
	// stall wait (an option costs the client a pass over them and the
	// headers at every publish).
	pubOpts []jetstream.PublishOpt
}

// NewOut prepares the out direction: src repaired and checked for
// message ids (OpenSource), j the ring's journal (journal.Open).
func NewOut(src Source, conn *Conn, js jetstream.JetStream, j *journal.Journal, o OutOptions, stats *Stats) *Out {
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.InFlight <= 0 {
		o.InFlight = 4
	}
	if o.StallWait <= 0 {
		o.StallWait = defaultStallWait
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	out := &Out{src: src, conn: conn, js: js, j: j, o: o, stats: stats, errs: errorLog{w: o.Log}, streams: map[string]jetstream.Stream{}}
	if o.StallWait != defaultStallWait {
		out.pubOpts = []jetstream.PublishOpt{jetstream.WithStallWait(o.StallWait)}
	}
	return out
}

// outBatch is one claim's leases and their publishes.
type outBatch struct {
	leases  []transport.Lease
	n       int
	items   []outItem
	entries []journal.Entry
	seq     uint64 // the journal's
}

type outItem struct {
	msg   *nats.Msg
	fut   jetstream.PubAckFuture
	first time.Time // the message's first publish, by any life of the bridge
	prior bool      // a copy may be in the stream already (journaled by a dead bridge, or an attempt that failed)
}

// Run carries messages until ctx ends, then finishes what it holds:
// publishes the claimed batch, awaits its PubAcks, acks its leases, and
// returns nil; or ErrDrainTimeout if that takes longer than the drain
// timeout (the leases left are requeued when the ring is closed, and the
// next bridge republishes them under the same ids).
func (o *Out) Run(ctx context.Context) error {
	dctx, stopDrain := drainContext(ctx, o.o.DrainTimeout)
	defer stopDrain()
	free := make(chan *outBatch, o.o.InFlight)
	for range o.o.InFlight {
		free <- &outBatch{leases: make([]transport.Lease, o.o.Batch), items: make([]outItem, o.o.Batch), entries: make([]journal.Entry, o.o.Batch)}
	}
	pending := make(chan *outBatch, o.o.InFlight)
	ackerDone := make(chan error, 1)
	// cctx ends the claiming: a stop, or the acker failing (then the
	// leases it could not finish stay held until Close hands them back).
	cctx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	go func() {
		var err error
		for b := range pending {
			if err == nil {
				if err = o.finish(dctx, b); err != nil {
					stopClaiming()
				}
			}
			free <- b
		}
		ackerDone <- err
	}()
	var err error
claiming:
	for {
		var b *outBatch
		select {
		case b = <-free:
		case <-cctx.Done():
			break claiming
		}
		// A stop may race the free batch in the select: claim nothing
		// after it (no loss either way, but a stop stops claiming).
		if cctx.Err() != nil {
			break
		}
		n, cerr := o.src.ClaimBatch(cctx, b.leases)
		if cerr != nil {
			if cctx.Err() == nil {
				err = fmt.Errorf("%s: claim: %w", o.src.Path(), cerr)
			}
			break
		}
		shm.CrashPoint(crashOutAfterClaim)
		o.stats.Lag.Store(o.src.Pending())
		o.stats.Claimed.Add(uint64(n))
		o.stats.InFlight.Add(int64(n))
		b.n = n
		if err = o.stage(b); err != nil {
			break
		}
		shm.CrashPoint(crashOutAfterJournal)
		for i := range b.n {
			if err = o.publish(dctx, b, i); err != nil {
				break claiming
			}
		}
		shm.CrashPoint(crashOutAfterPublish)
		pending <- b
	}
	close(pending)
	if aerr := <-ackerDone; err == nil {
		err = aerr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if dctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ErrDrainTimeout, o.o.DrainTimeout)
		}
	}
	return err
}

// stage makes the batch's messages and journals them, before any goes
// out: a copy in the stream always has a journal entry behind it.
func (o *Out) stage(b *outBatch) error {
	now := time.Now()
	fileID := o.src.FileID()
	for i := range b.n {
		l := &b.leases[i]
		id := l.ID()
		it := outItem{first: now}
		if l.Deliveries > 1 {
			o.stats.Redelivered.Add(1)
			if t, ok := o.j.FirstPublished(id); ok {
				it.first, it.prior = t, true
			}
		}
		m := nats.NewMsg(o.o.Subject)
		m.Header.Set(jetstream.MsgIDHeader, MsgID(fileID, id))
		m.Data = l.Data() // valid until the lease is acked, after the PubAck
		it.msg = m
		b.items[i] = it
		b.entries[i] = journal.Entry{ID: id, First: it.first.UnixNano()}
	}
	seq, err := o.j.Published(b.entries[:b.n])
	b.seq = seq
	return err
}

// publish sends item i, retrying until the client takes it: a stall
// (too many PubAcks outstanding) waits and retries, never drops; an
// error waits for the connection.
func (o *Out) publish(ctx context.Context, b *outBatch, i int) error {
	it := &b.items[i]
	for attempt := 0; ; attempt++ {
		fut, err := o.js.PublishMsgAsync(it.msg, o.pubOpts...)
		if err == nil {
			it.fut = fut
			return nil
		}
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			o.stats.Stalls.Add(1)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		o.stats.PublishErrors.Add(1)
		o.errs.note("publish to %s: %v (retrying)", o.o.Subject, err)
		if err := o.conn.retryWait(ctx, attempt); err != nil {
			return err
		}
	}
}

// finish awaits the batch's PubAcks (republishing what failed, under the
// same ids), then acks its leases.
func (o *Out) finish(ctx context.Context, b *outBatch) error {
	for i := range b.n {
		it := &b.items[i]
		for attempt := 0; ; attempt++ {
			var ack *jetstream.PubAck
			var err error
			select {
			case ack = <-it.fut.Ok():
			case err = <-it.fut.Err():
			case <-ctx.Done():
				return ctx.Err()
			}
			if err == nil {
				if err := o.acked(ctx, it, ack); err != nil {
					return err
				}
				break
			}
			// Lost or refused: it may have been stored, so a copy
			// may be there; the same id lets the window drop it.
			o.stats.PublishErrors.Add(1)
			o.errs.note("PubAck on %s: %v (republishing %s, attempt %d, with a growing backoff)", o.o.Subject, err, it.msg.Header.Get(jetstream.MsgIDHeader), attempt+1)
			it.prior = true
			// Capped exponential backoff (10 ms .. 1.28 s) per message:
			// a refusal that does not pass (a stream that rejects it)
			// must not republish the whole in-flight window every 10 ms.
			if err := o.conn.retryWait(ctx, attempt); err != nil {
				return err
			}
			o.stats.Republished.Add(1)
			if err := o.publish(ctx, b, i); err != nil {
				return err
			}
		}
	}
	o.errs.ok()
	shm.CrashPoint(crashOutAfterPubAck)
	if err := o.src.AckBatch(b.leases[:b.n]); err != nil {
		return fmt.Errorf("%s: ack: %w", o.src.Path(), err)
	}
	o.stats.LeasesAcked.Add(uint64(b.n))
	o.stats.InFlight.Add(-int64(b.n))
	shm.CrashPoint(crashOutAfterLeaseAck)
	for i := range b.items[:b.n] {
		b.items[i] = outItem{} // drop the views of the acked slots
	}
	return o.j.Acked(b.seq)
}

// acked counts a PubAck: stored, or dropped by the duplicate window; a
// message that may have a copy in the stream from longer ago than the
// window, stored anew, is a late duplicate (or its first publish never
// reached the stream: the count is an upper bound, never hides one).
//
// A duplicate is verified before its lease may be acked: the server
// only says that a message with this Nats-Msg-Id is in its window, and
// two different messages of one ring can share an id (a caller's PushID
// colliding with a position id, two in bridges into one ring). The stored
// copy is read back (its sequence is the PubAck's) and compared; a
// different subject or payload is an id collision: ErrIDCollision, the
// lease is never acked and the message stays in the ring.
func (o *Out) acked(ctx context.Context, it *outItem, ack *jetstream.PubAck) error {
	if ack.Duplicate {
		if err := o.verifyDuplicate(ctx, it, ack); err != nil {
			return err
		}
		o.stats.Duplicates.Add(1)
		return nil
	}
	o.stats.Published.Add(1)
	if it.prior && o.o.DupWindow > 0 && time.Since(it.first) >= o.o.DupWindow {
		// Rare (a prior message stored anew past the window): the
		// stream's window may have been changed since the start.
		o.refreshWindow(ctx, ack.Stream)
	}
	if it.prior && o.o.DupWindow > 0 && time.Since(it.first) >= o.o.DupWindow {
		o.stats.LateDuplicates.Add(1)
		fmt.Fprintf(o.o.Log, "late duplicate: %s first published %s ago, past the %v duplicate window: stored again as stream sequence %d\n",
			it.msg.Header.Get(jetstream.MsgIDHeader), time.Since(it.first).Round(time.Millisecond), o.o.DupWindow, ack.Sequence)
	}
	return nil
}

// refreshWindow re-reads the stream's duplicate window (keeping the one
// known when the server cannot be asked).
func (o *Out) refreshWindow(ctx context.Context, stream string) {
	s, ok := o.streams[stream]
	if !ok {
		var err error
		if s, err = o.js.Stream(ctx, stream); err != nil {
			return
		}
		o.streams[stream] = s
	}
	if info, err := s.Info(ctx); err == nil && info.Config.Duplicates > 0 {
		o.o.DupWindow = info.Config.Duplicates
	}
}

// verifyDuplicate reads back the stored copy a duplicate PubAck names
// and compares it with the message, retrying while the server cannot be
// asked (the lease stays held meanwhile).
func (o *Out) verifyDuplicate(ctx context.Context, it *outItem, ack *jetstream.PubAck) error {
	id := it.msg.Header.Get(jetstream.MsgIDHeader)
	for attempt := 0; ; attempt++ {
		stored, err := o.storedCopy(ctx, ack)
		switch {
		case err == nil:
			if stored.Subject != it.msg.Subject || !bytes.Equal(stored.Data, it.msg.Data) {
				return fmt.Errorf("%w: %s: message id %s is stream %s sequence %d's (%d bytes on %s), another message than the ring's (%d bytes on %s); its lease is not acked, it stays in the ring",
					ErrIDCollision, o.src.Path(), id, ack.Stream, ack.Sequence, len(stored.Data), stored.Subject, len(it.msg.Data), it.msg.Subject)
			}
			return nil
		case errors.Is(err, jetstream.ErrMsgNotFound):
			if it.prior {
				// Published by an earlier life or attempt, since
				// removed by the stream's limits: a duplicate of
				// what this bridge published.
				fmt.Fprintf(o.o.Log, "duplicate %s: stream %s sequence %d is gone (the stream's limits), its copy was this bridge's\n", id, ack.Stream, ack.Sequence)
				return nil
			}
			return fmt.Errorf("%w: %s: message id %s is a duplicate of stream %s sequence %d, which is gone: cannot tell it from a collision; its lease is not acked, it stays in the ring",
				ErrIDCollision, o.src.Path(), id, ack.Stream, ack.Sequence)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		o.stats.PublishErrors.Add(1)
		o.errs.note("verify duplicate %s (stream %s sequence %d): %v (retrying)", id, ack.Stream, ack.Sequence, err)
		if err := o.conn.retryWait(ctx, attempt); err != nil {
			return err
		}
	}
}

func (o *Out) storedCopy(ctx context.Context, ack *jetstream.PubAck) (*jetstream.RawStreamMsg, error) {
	s, ok := o.streams[ack.Stream]
	if !ok {
		var err error
		if s, err = o.js.Stream(ctx, ack.Stream); err != nil {
			return nil, err
		}
		o.streams[ack.Stream] = s
	}
	return s.GetMsg(ctx, ack.Sequence)
}

// headerRoom is what the bridge's headers add to a message's payload on
// the wire: "NATS/1.0\r\nNats-Msg-Id: " (file id, '-', a uint64) "\r\n\r\n".
const headerRoom = len("NATS/1.0\r\n") + len("Nats-Msg-Id: ") + 16 + 1 + 20 + len("\r\n\r\n")

// CheckMaxPayload refuses a ring whose largest message, with the
// bridge's header, exceeds the server's max_payload (serverMax, from the
// connection): ErrMaxPayload. Without it such a message stalls the bridge
// forever, refused at every publish.
func CheckMaxPayload(src Source, serverMax int64) error {
	if need := int64(src.MaxPayload() + headerRoom); serverMax > 0 && need > serverMax {
		return fmt.Errorf("%w: %s: messages up to %d bytes (%d with the Nats-Msg-Id header), the server takes %d (raise its max_payload or use a ring with smaller slots)",
			ErrMaxPayload, src.Path(), src.MaxPayload(), need, serverMax)
	}
	return nil
}
