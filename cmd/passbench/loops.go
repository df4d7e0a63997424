package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/shmkit/shmkit/shm"
)

// checkEvery is how many messages a producer sends between looks at its
// context.
const checkEvery = 256

// produce sends this producer's share: per-producer count, or until the
// deadline of a timed run. Each message is stamped with the send time just
// before it is sent. With a gate (counted --chaos runs), a sequence number
// is sent only once it is below the gate word, or the word is 0.
func produce(ctx context.Context, j *job, tx endpoint, deadline int64, gate *atomic.Uint32) (*report, error) {
	msg := newMsg(j.Lane.Payload, uint32(j.ID))
	limit := uint64(math.MaxUint64)
	if j.PerProducer != nil {
		limit = uint64(j.PerProducer[j.ID])
	}
	corruptSeq := uint64(math.MaxUint64)
	if c := j.Corrupt; c != nil && c.Producer == j.ID {
		corruptSeq = c.Seq
	}
	rep := &report{Role: roleProducer, ID: j.ID}
	done := ctx.Done()
	var seq uint64
	for ; seq < limit; seq++ {
		if seq%checkEvery == 0 {
			select {
			case <-done:
				return nil, context.Cause(ctx)
			default:
			}
		}
		if gate != nil {
			if err := awaitGate(ctx, gate, seq); err != nil {
				return nil, err
			}
		}
		now := shm.MonoNow()
		if deadline != 0 && now >= deadline {
			break
		}
		if seq == 0 {
			rep.First = now
		}
		stamp(msg, seq, now)
		if seq == corruptSeq {
			msg[offSeq] ^= 0x10 // after sealing: the checksum no longer matches
		}
		if err := tx.send(msg); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
	}
	rep.Sent, rep.Last = int64(seq), shm.MonoNow()
	return rep, nil
}

// awaitGate waits until seq may be sent: the gate word is 0 or above it.
func awaitGate(ctx context.Context, gate *atomic.Uint32, seq uint64) error {
	for {
		g := gate.Load()
		if g == 0 || seq < uint64(g) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := shm.FutexWait(gate, g, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return fmt.Errorf("waiting at the gate: %w", err)
		}
	}
}

// progressEvery is how many messages a consumer receives between updates
// of its progress word (read by the parent for the progress bar).
const progressEvery = 1024

// consume receives and verifies messages until an end marker: each must
// have the run's length, a matching checksum, and a producer id and
// sequence number in range.
func consume(j *job, rx endpoint, progress *atomic.Uint64) (rep *report, err error) {
	// Exactly one message: a pipe read of more could take two.
	buf := make([]byte, j.Lane.Payload)
	seen := newSeenSet(j.Producers, j.PerProducer)
	rec := newRecorder()
	var out *recordFile
	if j.Record != "" {
		if out, err = createRecordFile(j.Record); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := out.close(); err == nil && cerr != nil {
				rep, err = nil, cerr
			}
		}()
	}
	rep = &report{Role: roleConsumer, ID: j.ID, seen: seen, rec: rec}
	for {
		n, err := rx.recv(buf)
		now := shm.MonoNow()
		if err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		h, err := parseMsg(buf[:n], j.Lane.Payload)
		if err == nil && h.isEnd() {
			break
		}
		if err == nil && !seen.add(h.producer, h.seq) {
			err = fmt.Errorf("producer %d sequence %d out of range", h.producer, h.seq)
		}
		if err != nil {
			if rep.Corrupt == 0 {
				rep.Why = err.Error()
			}
			rep.Corrupt++
			continue
		}
		rec.record(now - h.sent)
		if rep.Received == 0 {
			rep.First = now
		}
		rep.Received++
		rep.Last = now
		if out != nil {
			out.add(h.producer, h.seq)
		}
		if rep.Received%progressEvery == 0 {
			progress.Store(uint64(rep.Received))
		}
	}
	progress.Store(uint64(rep.Received))
	return rep, nil
}

// echo sends back every message it receives, unchecked (the side that
// measures checks), until an end marker.
func echo(j *job, rx, tx endpoint) error {
	buf := make([]byte, j.Lane.Payload)
	for {
		n, err := rx.recv(buf)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if n >= offProducer+4 && binary.LittleEndian.Uint32(buf[offProducer:]) == endMarker {
			return nil
		}
		if err := tx.send(buf[:n]); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
}

// recordFile lists what a consumer received, one line per message:
// "<producer id> <sequence number>", in the order received.
type recordFile struct {
	f    *os.File
	w    *bufio.Writer
	line []byte
	err  error
}

func createRecordFile(path string) (*recordFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &recordFile{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (r *recordFile) add(producer uint32, seq uint64) {
	r.line = strconv.AppendUint(r.line[:0], uint64(producer), 10)
	r.line = append(r.line, ' ')
	r.line = strconv.AppendUint(r.line, seq, 10)
	r.line = append(r.line, '\n')
	if _, err := r.w.Write(r.line); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *recordFile) close() error {
	err := r.err
	if ferr := r.w.Flush(); err == nil {
		err = ferr
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}
