package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Heartbeat tables that drain --heartbeat creates when missing.
const (
	defaultHBCapacity = 64
	defaultHBLeases   = 16
	beatInterval      = 100 * time.Millisecond
	hbLabel           = "ringctl drain"
)

// drainedJSON is one line of drain --format json.
type drainedJSON struct {
	Pos        *uint64 `json:"pos"`
	Len        int     `json:"len"`
	Deliveries *int    `json:"deliveries"`
	DataHex    string  `json:"data_hex"`
}

// drainQueue is what drain needs of a ring or a deque (a deque's TryClaim
// and Claim take from the top, as a thief: ringctl never owns a deque).
type drainQueue interface {
	TryClaim() (transport.Lease, error)
	Claim(ctx context.Context) (transport.Lease, error)
	Ack(l transport.Lease) error
	Release(l transport.Lease) error
	TakePoisoned(buf []byte) (n, deliveries int, err error)
	MaxPayload() int
	ID() uint64
	Check() check.Report // for warnStranded
	Close() error
}

// drainSource is what drain takes messages from: a kind's queue, attached
// (kind.queue builds it).
type drainSource struct {
	q            drainQueue
	lay          layout.SlotGeometry
	front        func() uint64                 // the ring's head or the deque's top, for positions
	takeReturned func(buf []byte) (int, error) // a deque's TakeReturned; nil for a ring
}

// newDrainSource derives q's layout from its header; on error q is closed.
func newDrainSource(path string, q interface {
	drainQueue
	Header() layout.Header
}, lay func(string, layout.Header) (layout.SlotGeometry, error), front func() uint64, returned func([]byte) (int, error)) (*drainSource, error) {
	l, err := lay(path, q.Header())
	if err != nil {
		q.Close()
		return nil, err
	}
	return &drainSource{q: q, lay: l, front: front, takeReturned: returned}, nil
}

type drainer struct {
	*drainSource
	path    string
	out     io.Writer
	errOut  io.Writer
	format  string
	print   bool // print each message
	lease   bool // ack only after handling
	cmd     string
	member  *heartbeat.Member
	failed  int // messages whose command failed
	handled int
}

func runDrain(c *cli.Context, path string) error {
	format, err := cliutil.Format(c)
	if err != nil {
		return err
	}
	encoding, err := cliutil.Encoding(c)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON && (c.IsSet("encoding") || c.IsSet("hex")) {
		return cliutil.Usage("drain: --encoding applies to text output (JSON carries data_hex)")
	}
	if format == cliutil.FormatText {
		format = encoding // the line is the payload, as is or in hex
	}
	d := &drainer{path: path, out: c.App.Writer, errOut: c.App.ErrWriter, format: format, print: true,
		lease: c.Bool("lease") || c.IsSet("exec") || c.IsSet("heartbeat"), cmd: c.String("exec")}
	if d.errOut == nil {
		d.errOut = os.Stderr
	}
	if c.IsSet("exec") {
		if d.cmd == "" {
			return cliutil.Usage("drain: --exec needs a command")
		}
		d.print = c.IsSet("format") || c.IsSet("json") || c.IsSet("encoding") || c.IsSet("hex")
	}
	if c.Int("max") < 0 {
		return cliutil.Usage("drain: --max must not be negative")
	}
	if c.Bool("poisoned") && (d.lease || c.Bool("follow")) {
		return cliutil.Usage("drain: --poisoned excludes --lease, --exec, --heartbeat and --follow")
	}
	if d.lease && d.cmd == "" {
		// The only honest ack of a message printed to stdout is none:
		// a write to a pipe returns once the bytes are in its buffer,
		// and nothing says whether the reader got to them (drain | head
		// -1 would ack what sits unread in the pipe).
		return cliutil.Usage("drain: --lease and --heartbeat need --exec CMD: a message printed to stdout would be acked once written to the pipe, which cannot tell whether the reader processed it (--exec acks when CMD exits 0; ringctl peek shows messages without taking them)")
	}
	if c.Bool("create-heartbeat") && !c.IsSet("heartbeat") {
		return cliutil.Usage("drain: --create-heartbeat needs --heartbeat HB")
	}
	// A reader that goes away (drain | head) makes writes fail with EPIPE
	// instead of killing drain with SIGPIPE while it holds a lease.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	k, err := kindOf(c, path)
	if err != nil {
		return err
	}
	if k.queue == nil {
		return k.refuse(path, "drain", "rings and deques")
	}
	if d.drainSource, err = k.queue(c, path); err != nil {
		return err
	}
	defer d.q.Close()
	if err := warnStranded(c, path, d.q); err != nil {
		return err
	}
	// The whole drain runs under the fault guard (this goroutine's: one
	// setting for the run, nothing per message): a file truncated or
	// holed under it is exit 3 naming it, not a SIGBUS. A blocked
	// --follow notices a truncation by itself (the library checks the
	// file whenever a sleep times out) and returns it as an error.
	if c.Bool("poisoned") {
		err = guard(path, func() error { return d.poisoned(c.Context, c.Int("max")) })
	} else {
		if hb := c.String("heartbeat"); hb != "" {
			stop, err := d.register(c, shm.Resolve(hb), c.Bool("create-heartbeat"))
			if err != nil {
				return err
			}
			defer stop()
		}
		err = guard(path, func() error { return d.run(c.Context, c.Int("max"), c.Bool("follow")) })
	}
	if errors.Is(err, errOutputClosed) {
		err = nil
	}
	if err != nil {
		return err
	}
	if err := d.q.Close(); err != nil {
		return cliutil.FileError(path, err)
	}
	if d.failed > 0 {
		return cliutil.FileError(path, fmt.Errorf("the command failed for %s; released for redelivery", plural(d.failed, "message", "messages")))
	}
	return nil
}

// errOutputClosed ends a drain whose reader went away; the message in hand
// was released.
var errOutputClosed = errors.New("output closed")

// run takes messages until the ring is empty (or, following, until ctx
// ends), or max are handled.
func (d *drainer) run(ctx context.Context, max int, follow bool) error {
	for max == 0 || d.handled < max {
		if ctx.Err() != nil {
			return nil
		}
		var l transport.Lease
		var err error
		if follow {
			l, err = d.q.Claim(ctx)
		} else {
			l, err = d.q.TryClaim()
		}
		switch {
		case err == nil:
		case errors.Is(err, transport.ErrEmpty) && d.takeReturned != nil && !d.lease && !follow:
			return d.returned(ctx, max)
		case errors.Is(err, transport.ErrEmpty), ctx.Err() != nil:
			return nil
		default:
			return cliutil.FileError(d.path, err)
		}
		if err := d.handle(l); err != nil {
			return err
		}
		d.handled++
	}
	return nil
}

// handle deals with one lease. Plain drain: ack, then print. --exec (and
// so --lease): the command is the handling: a message is acked once its
// command succeeded, before it is printed (if --format asks), and
// released if the command fails.
func (d *drainer) handle(l transport.Lease) error {
	data := bytes.Clone(l.Data()) // the lease aliases the mapping until Ack
	pos := position(&d.lay, l.Slot(), l.Lap(), d.front())
	if !d.lease {
		if err := d.q.Ack(l); err != nil {
			return cliutil.FileError(d.path, err)
		}
		err := d.emit(&pos, data, &l.Deliveries)
		if errors.Is(err, syscall.EPIPE) {
			return cliutil.FileError(d.path, fmt.Errorf("output closed: the message at position %d was taken and is lost (ringctl peek shows messages without taking them; drain --exec acks only what a command handled)", pos))
		}
		return err
	}
	if d.member != nil {
		ref, err := d.member.RecordLease(d.q.ID(), l.Slot(), l.Lap(), l.Deliveries)
		if err != nil {
			return errors.Join(cliutil.FileError(d.path, err), d.release(l))
		}
		defer d.member.ClearLease(ref)
	}
	ok, err := d.exec(data, pos, l.Deliveries)
	switch {
	case err != nil:
		return errors.Join(err, d.release(l))
	case !ok:
		d.failed++
		return d.release(l)
	}
	if err := d.q.Ack(l); err != nil {
		return cliutil.FileError(d.path, err)
	}
	if !d.print {
		return nil
	}
	if err = d.emit(&pos, data, &l.Deliveries); errors.Is(err, syscall.EPIPE) {
		return errOutputClosed
	}
	return err
}

func (d *drainer) release(l transport.Lease) error {
	return cliutil.FileError(d.path, d.q.Release(l))
}

// exec runs the command on one message. ok is false when it ran and
// failed; err is set when it could not be run at all.
func (d *drainer) exec(data []byte, pos uint64, deliveries int) (ok bool, err error) {
	cmd := exec.Command("sh", "-c", d.cmd)
	stdin, err := messageFile(data)
	if err != nil {
		return false, fmt.Errorf("--exec: %w", err)
	}
	defer stdin.Close()
	cmd.Stdin = stdin
	cmd.Stdout, cmd.Stderr = d.out, d.errOut
	cmd.Env = append(os.Environ(), "RINGCTL_RING="+d.path, "RINGCTL_POS="+strconv.FormatUint(pos, 10),
		"RINGCTL_DELIVERIES="+strconv.Itoa(deliveries))
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee):
		fmt.Fprintf(d.errOut, "ringctl: %s: message at position %d (delivery %d of %d): command failed (%s); released for redelivery\n",
			d.path, pos, deliveries, d.lay.DeliveryLimit, ee.ProcessState)
		return false, nil
	}
	return false, fmt.Errorf("--exec: %w", err)
}

// messageFile holds a message in an anonymous memory file, rewound, for a
// command's standard input: the command gets the whole message (seekable)
// even if drain dies while it runs, which a pipe fed by drain would not
// guarantee.
func messageFile(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("ringctl-message", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "ringctl-message")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// emit prints one message in the chosen format.
func (d *drainer) emit(pos *uint64, data []byte, deliveries *int) error {
	var line []byte
	switch d.format {
	case "text":
		line = append(data, '\n')
	case "hex":
		line = append([]byte(hex.EncodeToString(data)), '\n')
	case "json":
		b, err := json.Marshal(drainedJSON{Pos: pos, Len: len(data), Deliveries: deliveries, DataHex: hex.EncodeToString(data)})
		if err != nil {
			return err
		}
		line = append(b, '\n')
	}
	_, err := d.out.Write(line)
	return err
}

// poisoned takes the poisoned messages out of the ring and prints them.
func (d *drainer) poisoned(ctx context.Context, max int) error {
	buf := make([]byte, d.q.MaxPayload())
	for ; max == 0 || d.handled < max; d.handled++ {
		if ctx.Err() != nil {
			return nil
		}
		n, deliveries, err := d.q.TakePoisoned(buf)
		switch {
		case errors.Is(err, transport.ErrEmpty):
			return nil
		case err != nil:
			return cliutil.FileError(d.path, err)
		}
		if err := d.emit(nil, buf[:n], &deliveries); err != nil {
			return err
		}
	}
	return nil
}

// returned takes, once a deque's top is drained, the returned messages no
// claim found (the pending hint was short after a crash): TakeReturned
// frees each at once, so only plain drains (no --lease) take them. Their
// position and delivery count are not known.
func (d *drainer) returned(ctx context.Context, max int) error {
	buf := make([]byte, d.q.MaxPayload())
	for ; max == 0 || d.handled < max; d.handled++ {
		if ctx.Err() != nil {
			return nil
		}
		n, err := d.takeReturned(buf)
		switch {
		case errors.Is(err, transport.ErrEmpty):
			return nil
		case err != nil:
			return cliutil.FileError(d.path, err)
		}
		if err := d.emit(nil, buf[:n], nil); err != nil {
			if errors.Is(err, syscall.EPIPE) {
				return cliutil.FileError(d.path, errors.New("output closed: a returned message was taken and is lost"))
			}
			return err
		}
	}
	return nil
}

// register joins heartbeat table hb and beats every beatInterval until
// the returned stop is called, which unregisters. The table must exist
// unless create is set: a typo must not start a table nobody watches.
func (d *drainer) register(c *cli.Context, hb string, create bool) (stop func(), err error) {
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return nil, err
	}
	t, err := heartbeat.Open(hb, opts...)
	switch {
	case errors.Is(err, shm.ErrNotExist) && create:
		t, _, err = heartbeat.OpenOrCreate(hb, heartbeat.Config{Capacity: defaultHBCapacity, Leases: defaultHBLeases}, opts...)
	case errors.Is(err, shm.ErrNotExist):
		return nil, cliutil.FileError(hb, fmt.Errorf("%w (--heartbeat names an existing table; add --create-heartbeat to create one)", err))
	}
	if err != nil {
		return nil, cliutil.FileError(hb, err)
	}
	// A table full of dead drainers' slots recovers itself: the leases
	// they recorded are in this queue, which Register repairs first.
	var queues []heartbeat.Repairable
	if rq, ok := d.q.(heartbeat.Repairable); ok {
		queues = append(queues, rq)
	}
	m, err := t.Register(hbLabel, queues...)
	if err != nil {
		t.Close()
		return nil, cliutil.FileError(hb, err)
	}
	d.member = m
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(beatInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				m.Beat()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		if err := m.Unregister(); err != nil {
			fmt.Fprintf(d.errOut, "ringctl: %v\n", cliutil.FileError(hb, err))
		}
		t.Close()
	}, nil
}

func drainCommand() *cli.Command {
	return command("drain", "take messages and print them one per line, or hand each to a command", "PATH [--max N] [--format text|json | --json] [--encoding text|hex | --hex] [--follow] [--exec CMD [--heartbeat HB [--create-heartbeat]]] [--poisoned]", runDrain,
		"Without --follow, drain stops when the ring is empty (exit 0, also when it was empty to\n"+
			"begin with); with --follow it waits for more until Ctrl-C (exit 0). Each message is taken\n"+
			"with a lease. Without --exec the lease is acked as soon as the message is copied out, so it\n"+
			"is gone from the ring before it is printed, as with a pop (ringctl peek looks without\n"+
			"taking). With --exec CMD it is acked only once `sh -c CMD`, given the message on its\n"+
			"standard input, exits 0; a command that fails has its message released for redelivery (one\n"+
			"line on stderr) and drain exits 1 at the end. A drain --exec killed at any moment loses\n"+
			"nothing: ringctl repair brings back what it held. --lease without --exec is refused: a\n"+
			"message printed to a pipe cannot be known to be processed. With --exec, messages are\n"+
			"printed (after their command succeeded) only if --format, --json or --encoding is given. The\n"+
			"command's output goes to drain's; it sees RINGCTL_RING, RINGCTL_POS and RINGCTL_DELIVERIES\n"+
			"in its environment.\n"+
			"--heartbeat HB (with --exec) registers in heartbeat table HB, which must exist unless\n"+
			"--create-heartbeat is given, and records each lease there (hbdump --ring shows who holds\n"+
			"what). --poisoned takes the messages set aside as poison instead (their position is not\n"+
			"known). A deque is drained from the top as a thief, also while its owner is alive (ringctl\n"+
			"never owns a deque); returned messages come after the newer ones. When the file holds\n"+
			"messages of dead processes, drain says so on stderr (run ringctl repair).",
		withFormat(append([]cli.Flag{&cli.IntFlag{Name: "max", Usage: "stop after `N` messages (0: no limit)"}},
			append(cliutil.EncodingFlags(),
				&cli.BoolFlag{Name: "follow", Usage: "wait for more messages instead of stopping when the ring is empty"},
				&cli.BoolFlag{Name: "lease", Usage: "ack each message only after it has been handled (needs --exec, which implies it)"},
				&cli.StringFlag{Name: "heartbeat", Usage: "register and beat in heartbeat table `HB` (it must exist), recording each lease (needs --exec)"},
				&cli.BoolFlag{Name: "create-heartbeat", Usage: "create the --heartbeat table if it does not exist (64 members, 16 leases each)"},
				&cli.StringFlag{Name: "exec", Usage: "handle each message with sh -c `CMD` (the message on its stdin); ack on exit 0, release otherwise"},
				&cli.BoolFlag{Name: "poisoned", Usage: "take the poisoned messages instead of the queued ones"},
				cliutil.AllowModeFlag())...)...)...)
}
