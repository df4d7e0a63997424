package pass

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/sched/task"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// ClientConfig configures a client: a process that submits passes and
// awaits their results.
type ClientConfig struct {
	Shared

	// Reply is the geometry of this client's reply ring when it creates
	// one (default capacity 1024, 64-byte slots). A ring left by an
	// earlier client in the same heartbeat slot is reused as it is.
	Reply transport.RingConfig

	// InFlight bounds the passes awaiting results at once: Submit waits
	// for one to settle beyond it. It must leave room in the reply ring
	// for results nobody awaits (duplicates, late results of cancelled
	// passes); the default and the most is the ring's capacity less an
	// eighth.
	InFlight int
}

// ClientStats counts what a client saw.
type ClientStats struct {
	Submitted uint64 // passes pushed
	Resolved  uint64 // results that settled a pass (ok or error)
	Cancelled uint64 // passes cancelled (by Cancel, a lost Race or Any, or Close) before their result came
	Late      uint64 // results of cancelled passes, dropped when they came
	Unmatched uint64 // results of passes not awaited here: duplicates of a pass run twice (after a worker crash or a Stop that gave up), or results for an earlier client in this slot
	Stale     uint64 // results found in the reply ring at start, left for an earlier client in this slot
	Undecoded uint64 // reply messages that could not be decoded
	// CancelsUndelivered counts cancellations that found the cancel board
	// full: the pass still settles as cancelled here, but its worker is
	// not told and runs it to the end (its result is then late).
	CancelsUndelivered uint64
}

// Client submits passes to a submit queue shared with any number of other
// clients and pools, and receives exactly the results of its own passes,
// in a reply ring of its own. It is safe for concurrent use.
//
// Submit returns a Handle, awaited on its own (Wait) or with the joins
// (All, Race, Any, AllSettled), which behave as the task scheduler's: every
// pass is a task of the client's task.Scheduler. A settled task is
// forgotten once every awaiter has its result: the handle (when its Wait
// returned the result, or it became unreachable) and every join that
// includes it (when the join returned). A handle keeps its result, so
// waiting on it again, or joining it later, still works.
type Client struct {
	cfg ClientConfig
	*seat
	ticket  heartbeat.Ticket
	reply   *transport.Ring
	tasks   task.Scheduler[[]byte]
	credits chan struct{}
	bufs    sync.Pool // *[]byte of the submit queue's payload size

	mu      sync.Mutex
	pending map[uint64]*call // token → pass awaiting its result
	closed  bool             // Close has begun: no new passes

	// life guards the mappings: every call that touches shared memory
	// holds it for reading, and Close takes it for writing before it
	// unmaps (gone is then true). closing is closed when Close begins, so
	// that a Submit waiting for room or credit gives up rather than hold
	// Close up.
	life    sync.RWMutex
	gone    bool
	closing chan struct{}

	stop      context.CancelFunc
	done      chan struct{} // closed when receive has returned
	beating   chan struct{} // closed when beat has returned
	closeOnce sync.Once
	closeErr  error

	submitted, resolved, cancelled, late, unmatched, stale, undecoded, undelivered atomic.Uint64
}

// call is one submitted pass. Guarded by Client.mu.
type call struct {
	token     uint64
	comp      *task.Completer[[]byte]
	pending   bool // its result has not come
	cancelled bool // cancelled before its result came: the result is late
	handle    bool // the handle's share is still out
	joins     int  // joins in progress that include it
	forgotten bool // its task is gone from the scheduler; out holds the outcome
	out       task.Outcome[[]byte]
}

// NewClient opens or creates the submit queue, heartbeat table and cancel
// board, registers this process (its slot names its reply ring), opens or
// creates its reply ring, drops what an earlier client in the slot left
// there (ClientStats.Stale) and starts receiving.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg.defaults()
	if cfg.Reply.Capacity == 0 {
		cfg.Reply.Capacity = 1024
	}
	st, err := cfg.take(true)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, seat: st, ticket: st.member.Ticket(), pending: map[uint64]*call{}, done: make(chan struct{}), beating: make(chan struct{}), closing: make(chan struct{})}
	fail := func(err error) (*Client, error) {
		if c.reply != nil {
			c.reply.Close()
		}
		st.close()
		return nil, err
	}
	if MaxArgs(st.submit.MaxPayload()) <= 0 {
		return fail(fmt.Errorf("%w: %s: a %d-byte payload cannot carry a pass header (%d bytes)", heartbeat.ErrInvalidConfig, cfg.SubmitPath, st.submit.MaxPayload(), submitHeader))
	}
	path := ReplyPath(cfg.SubmitPath, int(c.ticket.Slot))
	if c.reply, _, err = transport.OpenOrCreateRing(path, cfg.Reply); err != nil {
		return fail(err)
	}
	if MaxResult(c.reply.MaxPayload()) <= 0 {
		return fail(fmt.Errorf("%w: %s: a %d-byte payload cannot carry a result header (%d bytes)", heartbeat.ErrInvalidConfig, path, c.reply.MaxPayload(), resultHeader))
	}
	most := int(c.reply.Capacity() - c.reply.Capacity()/8)
	switch {
	case cfg.InFlight == 0:
		cfg.InFlight = most
	case cfg.InFlight < 0 || cfg.InFlight > most:
		return fail(fmt.Errorf("%w: %d passes in flight; the reply ring %s (capacity %d) allows 1 to %d", heartbeat.ErrInvalidConfig, cfg.InFlight, path, c.reply.Capacity(), most))
	}
	c.cfg = cfg
	c.credits = make(chan struct{}, cfg.InFlight)
	c.bufs.New = func() any { b := make([]byte, st.submit.MaxPayload()); return &b }
	// What an earlier client in this slot left is for passes nobody here
	// submitted: drop it before receiving.
	buf := make([]byte, c.reply.MaxPayload())
	for {
		if _, err := c.reply.TryPop(buf); err != nil {
			break
		}
		c.stale.Add(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.receive(ctx, buf)
	go c.beat(ctx)
	return c, nil
}

func (c *Client) beat(ctx context.Context) {
	defer close(c.beating)
	t := newTicker(c.cfg.BeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.member.Beat()
		}
	}
}

// Ticket is this client's registration: the reply address its passes
// carry.
func (c *Client) Ticket() heartbeat.Ticket { return c.ticket }

// ReplyPath is this client's reply ring.
func (c *Client) ReplyPath() string { return c.reply.Path() }

// Heartbeat returns the table this client is registered in.
func (c *Client) Heartbeat() *heartbeat.Table { return c.hb }

// MaxArgs is the most argument bytes a pass can carry on this queue.
func (c *Client) MaxArgs() int { return MaxArgs(c.submit.MaxPayload()) }

// Submit puts a pass (closure id and argument bytes) on the submit queue
// and returns its handle. It waits, until ctx ends, for room in the queue
// and for a pass of this client's to settle when InFlight are awaiting
// results. A failed Submit leaves nothing registered and nothing queued.
func (c *Client) Submit(ctx context.Context, closure uint32, args []byte) (*Handle, error) {
	if len(args) > c.MaxArgs() {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrArgsTooLarge, len(args), c.MaxArgs())
	}
	if !c.enter() {
		return nil, ErrClosed
	}
	defer c.exit()
	select {
	case c.credits <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("pass: submit: waiting for one of %d passes in flight to settle: %w", c.cfg.InFlight, ctx.Err())
	case <-c.closing:
		return nil, ErrClosed
	}
	token := c.submit.NextID()
	comp, err := c.tasks.RegisterExternal(task.ID(token))
	if err != nil {
		<-c.credits
		return nil, err // a token is never handed out twice: a broken counter
	}
	cl := &call{token: token, comp: comp, pending: true, handle: true}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.unregister(cl)
		return nil, ErrClosed
	}
	c.pending[token] = cl
	c.mu.Unlock()

	bp := c.bufs.Get().(*[]byte)
	n, err := encodeSubmit(*bp, submitMsg{closure: closure, token: token, reply: c.ticket, args: args})
	if err == nil {
		err = c.push(ctx, (*bp)[:n])
	}
	c.bufs.Put(bp)
	if err == nil {
		shm.CrashPoint(crashPassClientAfterPush)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, token)
		c.mu.Unlock()
		c.unregister(cl)
		return nil, fmt.Errorf("pass: submit to %s: %w", c.submit.Path(), err)
	}
	c.submitted.Add(1)
	h := &Handle{c: c, call: cl}
	runtime.AddCleanup(h, c.dropHandle, cl)
	return h, nil
}

// push pushes a pass, waiting for room until ctx ends or Close begins.
func (c *Client) push(ctx context.Context, msg []byte) error {
	err := c.submit.TryPush(msg)
	if !errors.Is(err, transport.ErrFull) {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(closingContext{c.closing}, func() { cancel(ErrClosed) })
	defer stop()
	if err := c.submit.Push(ctx, msg); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrClosed) {
			return cause
		}
		return err
	}
	return nil
}

// closingContext is a context done when Close begins.
type closingContext struct{ ch chan struct{} }

func (closingContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c closingContext) Done() <-chan struct{}     { return c.ch }
func (c closingContext) Err() error {
	select {
	case <-c.ch:
		return ErrClosed
	default:
		return nil
	}
}
func (closingContext) Value(any) any { return nil }

// enter holds the mappings for a call; false after Close unmapped them.
func (c *Client) enter() bool {
	c.life.RLock()
	if c.gone {
		c.life.RUnlock()
		return false
	}
	return true
}

func (c *Client) exit() { c.life.RUnlock() }

// unregister undoes a Submit that pushed nothing.
func (c *Client) unregister(cl *call) {
	cl.comp.Release()
	_ = c.tasks.Forget(task.ID(cl.token))
	<-c.credits
}

// receive routes every result in the reply ring to its pass, until Close.
func (c *Client) receive(ctx context.Context, buf []byte) {
	defer close(c.done)
	for {
		n, err := c.reply.Pop(ctx, buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrNotAttached) {
				return
			}
			// Corrupt ring memory: reported by the ring's own Scan. Do
			// not spin on it.
			c.undecoded.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.cfg.BeatInterval):
			}
			continue
		}
		r, err := decodeResult(buf[:n])
		if err != nil {
			c.undecoded.Add(1)
			continue
		}
		c.settle(r)
		// The pass's waiter is now runnable, most often on this P; the
		// next Pop spins (tens of µs) before it sleeps, and a spinning
		// goroutine does not yield its P. Let the waiter run first: one
		// Gosched costs well under a microsecond, a starved waiter 20-40.
		runtime.Gosched()
	}
}

// settle gives a result to the pass it answers. The first result of a
// token settles it; any later one finds no pending pass (Unmatched): this
// is how a pass run twice is resolved once.
func (c *Client) settle(r result) {
	c.mu.Lock()
	cl := c.pending[r.token]
	if cl == nil {
		c.mu.Unlock()
		c.unmatched.Add(1)
		return
	}
	delete(c.pending, r.token)
	cl.pending = false
	late := cl.cancelled
	c.mu.Unlock()
	<-c.credits
	if late {
		c.late.Add(1)
		c.board.clear(c.ticket, r.token)
		return
	}
	// Counted before the waiter can run, so that a waiter reading the
	// stats sees its own pass counted.
	c.resolved.Add(1)
	var err error
	if e := r.err(); e != nil {
		err = cl.comp.Fail(e)
	} else {
		err = cl.comp.Complete(append([]byte(nil), r.data...))
	}
	if err != nil {
		// Settled meanwhile: a join cancelled it as a loser before the
		// client's own cancel ran (which now finds it settled and counts
		// nothing). The result is late; the pass counts as cancelled.
		c.resolved.Add(math.MaxUint64) // -1
		c.cancelled.Add(1)
		c.late.Add(1)
		c.board.clear(c.ticket, r.token)
	}
	c.mu.Lock()
	c.forgetIfDone(cl)
	c.mu.Unlock()
}

// cancel cancels a pass whose result has not come: its task settles as
// cancelled, and the request goes on the cancel board for the worker that
// runs it (or will claim it). cause, if not nil, is the task's error.
func (c *Client) cancel(cl *call, cause error) {
	c.mu.Lock()
	post := cl.pending && !cl.cancelled
	if post {
		cl.cancelled = true
	}
	c.mu.Unlock()
	if !post {
		return
	}
	if cause == nil {
		cause = ErrCancelled
	}
	c.cancelled.Add(1)
	_ = c.tasks.CancelWith(task.ID(cl.token), cause) // already settled if a join cancelled it as a loser
	if !c.enter() {
		return // closed meanwhile: the pass's submitter is gone, workers skip it
	}
	defer c.exit()
	posted := c.board.request(c.ticket, cl.token)
	if !posted {
		c.board.sweep(c.hb) // requests of clients that have gone
		if posted = c.board.request(c.ticket, cl.token); !posted {
			c.undelivered.Add(1)
		}
	}
	c.mu.Lock()
	late := !cl.pending
	c.forgetIfDone(cl)
	c.mu.Unlock()
	if posted && late {
		// The result came (and settle cleared the board) between our
		// marking the pass cancelled and posting the request: settle
		// sets pending false before it clears, so one of the two always
		// clears after the post.
		c.board.clear(c.ticket, cl.token)
	}
}

// forgetIfDone forgets cl's task once it is settled and nobody awaits it:
// its handle has the result (or is gone) and no join includes it.
func (c *Client) forgetIfDone(cl *call) {
	if cl.forgotten || cl.handle || cl.joins > 0 {
		return
	}
	out, err := c.tasks.Status(task.ID(cl.token))
	if err != nil || out.Status == task.Pending {
		return
	}
	cl.out = out
	cl.forgotten = true
	_ = c.tasks.Forget(task.ID(cl.token))
}

// dropHandle runs when a handle becomes unreachable: its share is given
// up, so its task is forgotten once settled.
func (c *Client) dropHandle(cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.handle = false
	c.forgetIfDone(cl)
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		Submitted: c.submitted.Load(), Resolved: c.resolved.Load(), Cancelled: c.cancelled.Load(), Late: c.late.Load(),
		Unmatched: c.unmatched.Load(), Stale: c.stale.Load(), Undecoded: c.undecoded.Load(), CancelsUndelivered: c.undelivered.Load(),
	}
}

// Pending is how many passes await their results.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close cancels every pass still awaiting its result (its task fails with
// ErrClosed), stops receiving, removes this client's requests from the
// cancel board, unregisters (so workers skip its passes still queued, and
// drop results of those they run) and closes its files, which stay: the
// next client in this slot reuses the reply ring. Calls after the first
// return the first's result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		var open []*call
		for _, cl := range c.pending {
			open = append(open, cl)
		}
		c.mu.Unlock()
		close(c.closing)
		for _, cl := range open {
			c.cancel(cl, ErrClosed)
		}
		c.stop()
		<-c.done
		<-c.beating // a beat stores into the table: done before it is unmapped
		c.life.Lock()
		defer c.life.Unlock()
		c.gone = true
		c.board.clearOwner(c.ticket)
		c.closeErr = errors.Join(c.seat.leave(), c.reply.Close())
	})
	return c.closeErr
}
