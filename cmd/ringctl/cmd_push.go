package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport"
)

// source yields the messages to push; ok is false after the last. A
// message too large to keep comes as a nil msg with its size.
type source func(ctx context.Context) (msg []byte, size msgSize, ok bool, err error)

// msgSize is a message's size in bytes; more when only the first n bytes
// were read (a stream that goes on past what push reads of one message).
type msgSize struct {
	n    int
	more bool
}

func (s msgSize) String() string {
	if s.more {
		return fmt.Sprintf("over %d bytes (read no further)", s.n)
	}
	return fmt.Sprintf("%d bytes", s.n)
}

// scanPast is how far past the slot payload push reads a message that is
// too large, to name its size: a stream that goes on beyond it (/dev/zero,
// a line without end) is refused without reading more.
const scanPast = 64 << 10

func runPush(c *cli.Context, path string) error {
	if err := exclusive(c, "push", "seq", "hex", "file"); err != nil {
		return err
	}
	if c.Duration("timeout") < 0 {
		return cliutil.Usage("push: --timeout must not be negative")
	}
	var seqLo, seqHi int64
	var one []byte
	var err error
	switch {
	case c.IsSet("seq"):
		if seqLo, seqHi, err = parseSeq(c.String("seq")); err != nil {
			return err
		}
	case c.IsSet("hex"):
		if one, err = hex.DecodeString(strings.Join(strings.Fields(c.String("hex")), "")); err != nil {
			return cliutil.Usage("push: --hex: %v", err)
		}
	}
	k, err := kindOf(c, path)
	if err != nil {
		return err
	}
	if k.push == nil {
		return k.refuse(path, "push", "rings (a deque is pushed by its owner only)")
	}
	r, err := k.push(c, path)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := warnStranded(c, path, r); err != nil {
		return err
	}
	limit := r.MaxPayload()
	tooLarge := func(i int, size msgSize, pushed int) error {
		return cliutil.FileError(path, fmt.Errorf("%w: message %d is %s, more than the limit of %d bytes (slot size %d); %s pushed before it",
			transport.ErrTooLarge, i, size, limit, r.SlotSize(), plural(pushed, "message", "messages")))
	}
	var next source
	switch {
	case c.IsSet("seq"):
		if size := max(len(strconv.FormatInt(seqLo, 10)), len(strconv.FormatInt(seqHi, 10))); size > limit {
			return tooLarge(1, msgSize{n: size}, 0)
		}
		v, done := seqLo, false
		next = func(context.Context) ([]byte, msgSize, bool, error) {
			if done {
				return nil, msgSize{}, false, nil
			}
			msg := strconv.AppendInt(nil, v, 10)
			done = v == seqHi
			v++
			return msg, msgSize{n: len(msg)}, true, nil
		}
	case c.IsSet("hex"):
		next = once(one)
	case c.IsSet("file"):
		msg, size, err := readWhole(c.Context, c.String("file"), limit)
		switch {
		case c.Context.Err() != nil:
			return cliutil.FileError(path, fmt.Errorf("interrupted while reading --file %s; 0 messages were pushed", c.String("file")))
		case err != nil:
			return cliutil.Exit(cliutil.ExitProblems, fmt.Errorf("push: --file: %w", err))
		}
		if msg == nil {
			return tooLarge(1, size, 0)
		}
		next = once(msg)
	default:
		next = stdinLines(os.Stdin, limit)
	}
	// Under the fault guard, as drain's loop: a file truncated while we
	// push is exit 3 with one line, not a SIGBUS (it costs nothing per
	// message).
	var pushed int
	if err := guard(path, func() (err error) {
		pushed, err = pushAll(c.Context, r, next, c.Duration("timeout"), tooLarge)
		return err
	}); err != nil {
		return cliutil.FileError(path, err)
	}
	fmt.Fprintf(c.App.Writer, "pushed %s\n", plural(pushed, "message", "messages"))
	return cliutil.FileError(path, r.Close())
}

func pushAll(ctx context.Context, r *transport.Ring, next source, timeout time.Duration, tooLarge func(i int, size msgSize, pushed int) error) (int, error) {
	pushed := 0
	for {
		msg, size, ok, err := next(ctx)
		if ctx.Err() != nil {
			return pushed, fmt.Errorf("interrupted; %s pushed", plural(pushed, "message was", "messages were"))
		}
		if err != nil {
			return pushed, fmt.Errorf("%w; %s pushed", err, plural(pushed, "message was", "messages were"))
		}
		if !ok {
			return pushed, nil
		}
		if msg == nil || size.more || size.n > r.MaxPayload() {
			return pushed, tooLarge(pushed+1, size, pushed)
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			pctx, cancel = context.WithTimeout(ctx, timeout)
		}
		err = r.Push(pctx, msg)
		cancel()
		switch {
		case err == nil:
			pushed++
		case ctx.Err() != nil:
			return pushed, fmt.Errorf("interrupted while the ring was full; %s pushed", plural(pushed, "message was", "messages were"))
		case errors.Is(err, context.DeadlineExceeded):
			return pushed, fmt.Errorf("%w for %s; %s pushed", transport.ErrFull, timeout, plural(pushed, "message was", "messages were"))
		default:
			return pushed, err
		}
	}
}

func once(msg []byte) source {
	done := false
	return func(context.Context) ([]byte, msgSize, bool, error) {
		if done {
			return nil, msgSize{}, false, nil
		}
		done = true
		return msg, msgSize{n: len(msg)}, true, nil
	}
}

// readWhole reads file name ("-": stdin) as one message of at most limit
// bytes. A larger one gives a nil message and its size: a regular file's
// from fstat, without reading it; a stream's by reading at most scanPast
// bytes more. The open and the reads run on their own goroutine, so that
// SIGINT or SIGTERM (ctx) ends a push blocked on a FIFO without a writer
// or a silent pipe: readWhole then returns ctx's error at once (the
// goroutine ends with the process).
func readWhole(ctx context.Context, name string, limit int) ([]byte, msgSize, error) {
	type result struct {
		msg  []byte
		size msgSize
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		res.msg, res.size, res.err = readWholeBlocking(name, limit)
		done <- res
	}()
	select {
	case <-ctx.Done():
		return nil, msgSize{}, ctx.Err()
	case res := <-done:
		return res.msg, res.size, res.err
	}
}

func readWholeBlocking(name string, limit int) ([]byte, msgSize, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, msgSize{}, err
		}
		defer f.Close()
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > int64(limit) {
		return nil, msgSize{n: int(min(st.Size(), math.MaxInt))}, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, msgSize{}, err
	}
	if len(b) <= limit {
		return b, msgSize{n: len(b)}, nil
	}
	rest, err := io.Copy(io.Discard, io.LimitReader(f, scanPast))
	if err != nil {
		return nil, msgSize{}, err
	}
	size := msgSize{n: len(b) + int(rest)}
	if rest == scanPast {
		// There may be more: look for one byte, no further.
		var one [1]byte
		if n, _ := f.Read(one[:]); n > 0 {
			size.more = true
		}
	}
	return nil, size, nil
}

type lineResult struct {
	msg  []byte
	size msgSize
	err  error
}

// stdinLines yields the lines of in, each without its newline. Reading
// happens on its own goroutine so that Ctrl-C ends a push waiting on a
// terminal. A line longer than limit is yielded as its size alone; one
// that goes on scanPast bytes past limit is not read further (it ends the
// push anyway).
func stdinLines(in io.Reader, limit int) source {
	lines := make(chan lineResult)
	started := false
	return func(ctx context.Context) ([]byte, msgSize, bool, error) {
		if !started {
			started = true
			go func() {
				br := bufio.NewReader(in)
				for {
					msg, size, err := readLine(br, limit)
					select {
					case lines <- lineResult{msg, size, err}:
					case <-ctx.Done():
						return
					}
					if err != nil || msg == nil {
						return
					}
				}
			}()
		}
		select {
		case <-ctx.Done():
			return nil, msgSize{}, false, ctx.Err()
		case l := <-lines:
			switch {
			case errors.Is(l.err, io.EOF):
				return nil, msgSize{}, false, nil
			case l.err != nil:
				return nil, msgSize{}, false, fmt.Errorf("reading standard input: %w", l.err)
			}
			return l.msg, l.size, true, nil
		}
	}
}

// readLine reads one line, keeping at most limit+1 bytes of it and
// counting up to scanPast bytes past limit (size.more beyond that, the
// rest of the line unread). A nil msg means the line is too large.
// io.EOF means there was no line left.
func readLine(br *bufio.Reader, limit int) (msg []byte, size msgSize, err error) {
	msg = []byte{}
	for {
		chunk, err := br.ReadSlice('\n')
		size.n += len(chunk)
		if len(msg) <= limit {
			msg = append(msg, chunk[:min(len(chunk), limit+1-len(msg))]...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if size.n > limit+scanPast {
				size.more = true
				return nil, size, nil
			}
			continue
		case errors.Is(err, io.EOF):
			if size.n == 0 {
				return nil, size, io.EOF
			}
		case err != nil:
			return nil, size, err
		default:
			size.n-- // the newline
			msg = msg[:min(len(msg), size.n)]
		}
		if size.n > limit {
			return nil, size, nil
		}
		return msg, size, nil
	}
}

func pushCommand() *cli.Command {
	return command("push", "push messages: one per line of standard input, or --seq, --hex, --file", "PATH [--seq A:B | --hex HEX | --file F] [--timeout D]", runPush,
		`By default each line of standard input (without its newline) is one message; an empty
line is an empty message. --seq A:B pushes the decimal text of each integer from A to B;
--hex one message given in hex; --file one message holding a whole file (- for stdin).
A message larger than the ring's slot payload is refused (exit 1) with its size and the
limit; messages before it stay pushed. Of a stream (a pipe, FIFO or device, a line of
standard input) push reads at most 64 KiB past the limit, so --file /dev/zero is refused
at once. When the ring is full, push waits for room: at most --timeout per message if set,
until Ctrl-C otherwise (both exit 1 with the count pushed). SIGINT and SIGTERM also end a
push waiting for input (a FIFO without a writer, a silent pipe): exit 1, "interrupted".`,
		&cli.StringFlag{Name: "seq", Usage: "push the decimal text of each integer from `A:B`, inclusive"},
		&cli.StringFlag{Name: "hex", Usage: "push one message given in hex"},
		&cli.StringFlag{Name: "file", Usage: "push the whole file `F` as one message (- for stdin)"},
		&cli.DurationFlag{Name: "timeout", Usage: "give up when the ring stays full this long (0: wait until Ctrl-C)"},
		cliutil.AllowModeFlag())
}
