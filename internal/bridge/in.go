package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/shm"
)

// InOptions tune the in direction.
type InOptions struct {
	Batch         int           // messages per fetch, at most (default 256; fewer when the ring has less room)
	FetchWait     time.Duration // how long one fetch waits for messages (default 1 s); also bounds how long a stop waits for a fetch
	AckWait       time.Duration // the consumer's ack wait (ConsumerInfo): a message waiting for room is kept with in-progress acks well within it
	DeadLetter    string        // subject for messages larger than the ring's slot ("": terminate them only)
	Stream        string        // the stream's name and creation time (StreamInfo): with the sequence,
	StreamCreated time.Time     // they name a dead letter uniquely (DeadLetterID)
	DrainTimeout  time.Duration // on stop, how long to push and ack what was fetched (default 30 s)
	Log           io.Writer
}

// SeqHeader is the header a dead-lettered message carries: its sequence
// in the stream it came from.
const SeqHeader = "Shmbridge-Stream-Seq"

// CallerIDBit marks a message id a caller chose (PushID) rather than one
// the ring stamped: a plain push stamps its position+1, always below
// 2^63, so ids with this bit set never collide with those. The in bridge
// stamps CallerIDBit | stream sequence (InID); other callers of PushID
// should keep to the same space, and ids must be unique per file (the out
// bridge refuses a collision it detects, ErrIDCollision).
const CallerIDBit = 1 << 63

// InID is the message id the in bridge gives stream sequence seq.
func InID(seq uint64) uint64 { return CallerIDBit | seq }

// DeadLetterID is the Nats-Msg-Id of the dead letter of stream
// sequence seq: the stream's name and creation time with it, so that two
// streams' (or two creations of one stream's) sequence 1 never share one.
func DeadLetterID(stream string, created time.Time, seq uint64) string {
	return "shmbridge-dead-" + stream + "-" + strconv.FormatInt(created.UnixNano(), 10) + "-" + strconv.FormatUint(seq, 10)
}

// In carries a durable pull consumer's messages into a ring.
type In struct {
	sink  Sink
	conn  *Conn
	js    jetstream.JetStream
	cons  jetstream.Consumer
	o     InOptions
	stats *Stats
	errs  errorLog
}

// NewIn prepares the in direction: sink repaired and checked (OpenSink),
// cons the durable consumer (EnsureConsumer).
func NewIn(sink Sink, conn *Conn, js jetstream.JetStream, cons jetstream.Consumer, o InOptions, stats *Stats) *In {
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.FetchWait <= 0 {
		o.FetchWait = time.Second
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return &In{sink: sink, conn: conn, js: js, cons: cons, o: o, stats: stats, errs: errorLog{w: o.Log}}
}

// Run fetches, pushes and acks until ctx ends, then pushes and acks what
// it fetched and returns nil (ErrDrainTimeout if that takes longer than
// the drain timeout: what is left unacked is redelivered by JetStream).
// At most one fetch's messages are held: the next fetch asks only for the
// room the ring has, and none while it is full.
func (in *In) Run(ctx context.Context) error {
	dctx, stopDrain := drainContext(ctx, in.o.DrainTimeout)
	defer stopDrain()
	for attempt := 0; ctx.Err() == nil; {
		n := min(in.o.Batch, in.sink.Room())
		if n == 0 {
			// Full: fetch one, which waits in the push for room (no
			// buffering beyond it, and the wait is a futex, not a poll).
			n = 1
		}
		batch, err := in.cons.Fetch(n, jetstream.FetchMaxWait(in.o.FetchWait))
		if err == nil {
			err = in.drain(dctx, batch)
		}
		if err != nil {
			if dctx.Err() != nil {
				return fmt.Errorf("%w (%v)", ErrDrainTimeout, in.o.DrainTimeout)
			}
			var fatal *inFatal
			if errors.As(err, &fatal) {
				return fatal.err
			}
			in.stats.FetchErrors.Add(1)
			in.errs.note("fetch from %s: %v (retrying)", in.cons.CachedInfo().Name, err)
			if err := in.conn.retryWait(ctx, attempt); err != nil {
				return nil // stopped while waiting; nothing held
			}
			attempt++
			continue
		}
		attempt = 0
		in.errs.ok()
	}
	return nil
}

// inFatal is an error that ends the bridge (the ring failed), as opposed
// to one of the server (retried).
type inFatal struct{ err error }

func (e *inFatal) Error() string { return e.err.Error() }

// drain pushes and acks every message of one fetch.
func (in *In) drain(ctx context.Context, batch jetstream.MessageBatch) error {
	first := true
	for msg := range batch.Messages() {
		if first {
			shm.CrashPoint(crashInAfterFetch)
			first = false
		}
		in.stats.Fetched.Add(1)
		in.stats.InFlight.Add(1)
		err := in.carry(ctx, msg)
		in.stats.InFlight.Add(-1)
		if err != nil {
			// What is left of the batch is redelivered after the ack
			// wait; drain the channel so the fetch ends.
			for range batch.Messages() {
			}
			return err
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return err
	}
	return nil
}

// carry pushes one message (InID of its stream sequence as its id) and
// acks it.
func (in *In) carry(ctx context.Context, msg jetstream.Msg) error {
	md, err := msg.Metadata()
	if err != nil {
		return &inFatal{fmt.Errorf("message on %s without JetStream metadata: %v", msg.Subject(), err)}
	}
	in.stats.Lag.Store(md.NumPending)
	if md.NumDelivered > 1 {
		in.stats.Redelivered.Add(1)
	}
	seq := md.Sequence.Stream
	if len(msg.Data()) > in.sink.MaxPayload() {
		return in.tooLarge(msg, seq)
	}
	if err := in.push(ctx, msg, InID(seq)); err != nil {
		return err
	}
	in.stats.Pushed.Add(1)
	shm.CrashPoint(crashInAfterPush)
	// The ack is sent, not confirmed: one that is lost makes JetStream
	// redeliver the message, which arrives again with the same id.
	if err := msg.Ack(); err != nil {
		in.stats.AckErrors.Add(1)
		return nil
	}
	in.stats.Acked.Add(1)
	shm.CrashPoint(crashInAfterAck)
	return nil
}

// push pushes msg, waiting while the ring is full and telling JetStream,
// well within the ack wait, that the message is in progress (so that it
// is not redelivered meanwhile).
func (in *In) push(ctx context.Context, msg jetstream.Msg, seq uint64) error {
	if in.sink.Room() == 0 {
		in.stats.FullWaits.Add(1)
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, in.o.AckWait/3)
		err := in.sink.PushID(pctx, msg.Data(), seq)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			in.stats.InProgress.Add(1)
			_ = msg.InProgress()
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return &inFatal{fmt.Errorf("%s: push: %w", in.sink.Path(), err)}
		}
	}
}

// tooLarge refuses a message the ring's slot cannot hold, never
// truncating it: sent to the dead-letter subject when there is one, then
// terminated (JetStream stops delivering it; it stays in the stream).
func (in *In) tooLarge(msg jetstream.Msg, seq uint64) error {
	reason := fmt.Sprintf("%d bytes, larger than the %d-byte slot payload of %s", len(msg.Data()), in.sink.MaxPayload(), in.sink.Path())
	if in.o.DeadLetter != "" {
		dl := nats.NewMsg(in.o.DeadLetter)
		dl.Data = msg.Data()
		dl.Header.Set(SeqHeader, strconv.FormatUint(seq, 10))
		dl.Header.Set(jetstream.MsgIDHeader, DeadLetterID(in.o.Stream, in.o.StreamCreated, seq))
		ack, err := in.js.PublishMsg(context.Background(), dl)
		if err == nil && ack.Duplicate {
			// Our own earlier copy (a bridge died before the
			// terminate), or another message under this id: only the
			// first may be terminated.
			err = in.sameDeadLetter(dl, ack)
		}
		if err != nil {
			// Not terminated: it comes again after the ack wait.
			in.errs.note("dead letter to %s: %v (the message comes again)", in.o.DeadLetter, err)
			return nil
		}
		shm.CrashPoint(crashInAfterDeadLetter)
	}
	in.stats.TooLarge.Add(1)
	fmt.Fprintf(in.o.Log, "refused stream sequence %d: %s\n", seq, reason)
	_ = msg.TermWithReason(reason)
	return nil
}

// sameDeadLetter checks that the stored copy a duplicate PubAck of a
// dead letter names is that dead letter (same payload and source
// sequence): ErrIDCollision otherwise, and the message is not
// terminated.
func (in *In) sameDeadLetter(dl *nats.Msg, ack *jetstream.PubAck) error {
	ctx, cancel := context.WithTimeout(context.Background(), in.o.AckWait/3)
	defer cancel()
	s, err := in.js.Stream(ctx, ack.Stream)
	if err != nil {
		return err
	}
	stored, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		return fmt.Errorf("verify the duplicate dead letter %s: %w", dl.Header.Get(jetstream.MsgIDHeader), err)
	}
	if !bytes.Equal(stored.Data, dl.Data) || stored.Header.Get(SeqHeader) != dl.Header.Get(SeqHeader) {
		return fmt.Errorf("%w: dead letter %s is stream %s sequence %d's, another message", ErrIDCollision, dl.Header.Get(jetstream.MsgIDHeader), ack.Stream, ack.Sequence)
	}
	return nil
}
