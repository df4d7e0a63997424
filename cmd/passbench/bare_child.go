package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/bareref"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// roleBare is the child role of the bare loop's sides.
const roleBare = "bare"

// bareStop is the sequence number that ends a round trip's echo.
const bareStop = ^uint64(0)

// The loops below are written out once per queue, on purpose: a shared
// loop taking the queue's calls as functions would add an indirect call
// per try to every row, and the point of the bare loop is that nothing
// but the queue's own calls are in it. Each failed try counts; after
// spinLimit failures in a row the side yields to the Go scheduler (which,
// with nothing else runnable, returns at once) and starts counting again.

// bareChildMain runs one side of one bare-loop run and prints its report.
func bareChildMain(jobJSON string) error {
	var j bareJob
	if err := json.Unmarshal([]byte(jobJSON), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	ctl, err := shm.Open(j.Ctl, layout.KindRegion)
	if err != nil {
		return err
	}
	defer ctl.Close()
	goWord, err := ctl.Uint32(bareCtlGo)
	if err != nil {
		return err
	}
	ready, err := ctl.Uint32(bareCtlReady + uint64(j.Side)*layout.CacheLine)
	if err != nil {
		return err
	}
	start := func() error {
		ready.Store(1)
		if _, err := shm.FutexWake(ready, 1); err != nil {
			return err
		}
		for goWord.Load() == 0 {
			if err := shm.FutexWait(goWord, 0, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
				return err
			}
		}
		return nil
	}
	runtime.LockOSThread()
	var rep bareReport
	switch j.Row {
	case bareRing, bareRingBatch, bareRingLoan, bareRingRTT:
		rep, err = bareRingSide(&j, start)
	case bareRef, bareRefBatch, bareRefLocked, bareRefRTT:
		rep, err = bareRefSide(&j, start)
	case barePingPong:
		rep, err = barePingPongSide(&j, start)
	case bareUDS:
		rep, err = bareUDSSide(&j, start)
	case bareChan:
		if err = start(); err == nil {
			rep = bareChanRun(j.Messages)
		}
	default:
		err = fmt.Errorf("unknown row %q", j.Row)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// bareMsg is a message of the bare loop: 56 bytes, its sequence number in
// the first 8.
func bareMsg() []byte { return make([]byte, barePayload) }

func setSeq(m []byte, seq uint64) { binary.LittleEndian.PutUint64(m, seq) }
func seqOf(m []byte) uint64       { return binary.LittleEndian.Uint64(m) }

// lastSeqErr checks, after the loop, that a consumer's last message was
// the producer's last: the queues are FIFO with one producer.
func lastSeqErr(last uint64, n int64) error {
	if n > 0 && last != uint64(n-1) {
		return fmt.Errorf("last message received was number %d, want %d", last, n-1)
	}
	return nil
}

// backoff counts a failed try and yields after spinLimit in a row.
func backoff(fails *int) {
	*fails++
	if *fails >= spinLimit {
		*fails = 0
		runtime.Gosched()
	}
}

// bareRingSide is a side of a shmkit ring row.
func bareRingSide(j *bareJob, start func() error) (bareReport, error) {
	r, err := transport.OpenRing(j.Shm)
	if err != nil {
		return bareReport{}, err
	}
	defer r.Close()
	if j.Row == bareRingRTT {
		back, err := transport.OpenRing(j.Back)
		if err != nil {
			return bareReport{}, err
		}
		defer back.Close()
		if err := start(); err != nil {
			return bareReport{}, err
		}
		if j.Side == 0 {
			return ringPing(r, back, j.Rounds, j.Warmup)
		}
		return bareReport{}, ringEcho(r, back)
	}
	if err := start(); err != nil {
		return bareReport{}, err
	}
	switch {
	case j.Side == 0 && j.Row == bareRingBatch:
		return ringProduceBatch(r, j.Messages, j.Batch)
	case j.Side == 0 && j.Row == bareRingLoan:
		return ringProduceLoan(r, j.Messages)
	case j.Side == 0:
		return ringProduce(r, j.Messages)
	case j.Row == bareRingBatch:
		return ringConsumeBatch(r, j.Messages, j.Batch)
	case j.Row == bareRingLoan:
		return ringConsumeClaim(r, j.Messages)
	default:
		return ringConsume(r, j.Messages)
	}
}

func ringProduce(r *transport.Ring, n int64) (bareReport, error) {
	msg := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for seq := uint64(0); seq < uint64(n); seq++ {
		setSeq(msg, seq)
		for {
			err := r.TryPush(msg)
			if err == nil {
				break
			}
			if err != transport.ErrFull {
				return bareReport{}, err
			}
			backoff(&fails)
		}
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}, nil
}

func ringConsume(r *transport.Ring, n int64) (bareReport, error) {
	buf := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		_, err := r.TryPop(buf)
		if err == nil {
			got++
			continue
		}
		if err != transport.ErrEmpty {
			return bareReport{}, err
		}
		backoff(&fails)
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(seqOf(buf), n)
}

func ringProduceBatch(r *transport.Ring, n int64, batch int) (bareReport, error) {
	msgs := batchBufs(batch, barePayload)
	fails := 0
	t0 := shm.MonoNow()
	for sent := int64(0); sent < n; {
		k := int(min(int64(batch), n-sent))
		for i := range k {
			setSeq(msgs[i], uint64(sent)+uint64(i))
		}
		for off := 0; off < k; {
			m, err := r.TryPushBatch(msgs[off:k])
			off += m
			if err != nil && err != transport.ErrFull {
				return bareReport{}, err
			}
			if m == 0 {
				backoff(&fails)
			}
		}
		sent += int64(k)
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}, nil
}

func ringConsumeBatch(r *transport.Ring, n int64, batch int) (bareReport, error) {
	bufs := batchBufs(batch, barePayload)
	lens := make([]int, batch)
	fails := 0
	var last uint64
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		m, err := r.TryPopBatch(bufs[:min(int64(batch), n-got)], lens)
		if m > 0 {
			got += int64(m)
			last = seqOf(bufs[m-1])
			continue
		}
		if err != nil && err != transport.ErrEmpty {
			return bareReport{}, err
		}
		backoff(&fails)
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(last, n)
}

func ringProduceLoan(r *transport.Ring, n int64) (bareReport, error) {
	msg := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for seq := uint64(0); seq < uint64(n); seq++ {
		for {
			l, err := r.TryLoan(barePayload)
			if err == nil {
				d := l.Data()
				copy(d, msg)
				setSeq(d, seq)
				if err := r.Publish(l); err != nil {
					return bareReport{}, err
				}
				break
			}
			if err != transport.ErrFull {
				return bareReport{}, err
			}
			backoff(&fails)
		}
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}, nil
}

func ringConsumeClaim(r *transport.Ring, n int64) (bareReport, error) {
	fails := 0
	var last uint64
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		l, err := r.TryClaim()
		if err == nil {
			last = seqOf(l.Data())
			if err := r.Ack(l); err != nil {
				return bareReport{}, err
			}
			got++
			continue
		}
		if err != transport.ErrEmpty {
			return bareReport{}, err
		}
		backoff(&fails)
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(last, n)
}

// roundTimes holds one clock read per measured round and one before them;
// rttReport turns it into the report's p50 and mean.
func rttReport(ts []int64) bareReport {
	rounds := len(ts) - 1
	d := make([]int64, rounds)
	for i := range d {
		d[i] = ts[i+1] - ts[i]
	}
	slices.Sort(d)
	p50 := float64(d[rounds/2])
	if rounds%2 == 0 {
		p50 = float64(d[rounds/2-1]+d[rounds/2]) / 2
	}
	return bareReport{Count: int64(rounds), Start: ts[0], End: ts[rounds], P50Ns: p50,
		MeanNs: float64(ts[rounds]-ts[0]) / float64(rounds)}
}

func ringPing(there, back *transport.Ring, rounds, warmup int) (bareReport, error) {
	msg, buf := bareMsg(), bareMsg()
	ts := make([]int64, rounds+1)
	fails := 0
	for i := range warmup + rounds {
		if i == warmup {
			ts[0] = shm.MonoNow()
		}
		setSeq(msg, uint64(i))
		for {
			err := there.TryPush(msg)
			if err == nil {
				break
			}
			if err != transport.ErrFull {
				return bareReport{}, err
			}
			backoff(&fails)
		}
		for {
			_, err := back.TryPop(buf)
			if err == nil {
				break
			}
			if err != transport.ErrEmpty {
				return bareReport{}, err
			}
			backoff(&fails)
		}
		if i >= warmup {
			ts[i-warmup+1] = shm.MonoNow()
		}
		if seqOf(buf) != uint64(i) {
			return bareReport{}, fmt.Errorf("round %d: echo carries %d", i, seqOf(buf))
		}
	}
	setSeq(msg, bareStop)
	if err := there.TryPush(msg); err != nil {
		return bareReport{}, err
	}
	return rttReport(ts), nil
}

func ringEcho(there, back *transport.Ring) error {
	buf := bareMsg()
	fails := 0
	for {
		_, err := there.TryPop(buf)
		if err != nil {
			if err != transport.ErrEmpty {
				return err
			}
			backoff(&fails)
			continue
		}
		if seqOf(buf) == bareStop {
			return nil
		}
		for {
			err := back.TryPush(buf)
			if err == nil {
				break
			}
			if err != transport.ErrFull {
				return err
			}
			backoff(&fails)
		}
	}
}

// bareRefSide is a side of a reference-ring row.
func bareRefSide(j *bareJob, start func() error) (bareReport, error) {
	reg, err := shm.Open(j.Shm, layout.KindRegion)
	if err != nil {
		return bareReport{}, err
	}
	defer reg.Close()
	body := reg.Body()
	size := bareref.Size(bareSlots, bareSlotSize)
	if len(body) < 2*size {
		return bareReport{}, fmt.Errorf("%s: body of %d bytes, want %d", j.Shm, len(body), 2*size)
	}
	there, err := bareref.Attach(body[:size], bareSlots, bareSlotSize)
	if err != nil {
		return bareReport{}, err
	}
	back, err := bareref.Attach(body[size:2*size], bareSlots, bareSlotSize)
	if err != nil {
		return bareReport{}, err
	}
	if err := start(); err != nil {
		return bareReport{}, err
	}
	switch {
	case j.Row == bareRefRTT && j.Side == 0:
		return refPing(there, back, j.Rounds, j.Warmup)
	case j.Row == bareRefRTT:
		refEcho(there, back)
		return bareReport{}, nil
	case j.Row == bareRefBatch && j.Side == 0:
		return refProduceBatch(there, j.Messages, j.Batch), nil
	case j.Row == bareRefBatch:
		return refConsumeBatch(there, j.Messages, j.Batch)
	case j.Row == bareRefLocked && j.Side == 0:
		return refProduceLocked(there, j.Messages), nil
	case j.Row == bareRefLocked:
		return refConsumeLocked(there, j.Messages)
	case j.Side == 0:
		return refProduce(there, j.Messages), nil
	default:
		return refConsume(there, j.Messages)
	}
}

func refProduce(r *bareref.Ring, n int64) bareReport {
	msg := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for seq := uint64(0); seq < uint64(n); seq++ {
		setSeq(msg, seq)
		for !r.TryPush(msg) {
			backoff(&fails)
		}
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}
}

func refConsume(r *bareref.Ring, n int64) (bareReport, error) {
	buf := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		if _, ok := r.TryPop(buf); ok {
			got++
			continue
		}
		backoff(&fails)
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(seqOf(buf), n)
}

// refProduceLocked and refConsumeLocked are refProduce and refConsume
// on the stamped calls, written out for the reason the file's loops are.
func refProduceLocked(r *bareref.Ring, n int64) bareReport {
	msg := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for seq := uint64(0); seq < uint64(n); seq++ {
		setSeq(msg, seq)
		for !r.TryPushStamped(msg) {
			backoff(&fails)
		}
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}
}

func refConsumeLocked(r *bareref.Ring, n int64) (bareReport, error) {
	buf := bareMsg()
	fails := 0
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		if _, ok := r.TryPopStamped(buf); ok {
			got++
			continue
		}
		backoff(&fails)
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(seqOf(buf), n)
}

func refProduceBatch(r *bareref.Ring, n int64, batch int) bareReport {
	msgs := batchBufs(batch, barePayload)
	fails := 0
	t0 := shm.MonoNow()
	for sent := int64(0); sent < n; {
		k := int(min(int64(batch), n-sent))
		for i := range k {
			setSeq(msgs[i], uint64(sent)+uint64(i))
		}
		for off := 0; off < k; {
			m := r.TryPushBatch(msgs[off:k])
			if m == 0 {
				backoff(&fails)
			}
			off += m
		}
		sent += int64(k)
	}
	return bareReport{Count: n, Start: t0, End: shm.MonoNow()}
}

func refConsumeBatch(r *bareref.Ring, n int64, batch int) (bareReport, error) {
	bufs := batchBufs(batch, barePayload)
	lens := make([]int, batch)
	fails := 0
	var last uint64
	t0 := shm.MonoNow()
	for got := int64(0); got < n; {
		m := r.TryPopBatch(bufs[:min(int64(batch), n-got)], lens)
		if m == 0 {
			backoff(&fails)
			continue
		}
		got += int64(m)
		last = seqOf(bufs[m-1])
	}
	t1 := shm.MonoNow()
	return bareReport{Count: n, Start: t0, End: t1}, lastSeqErr(last, n)
}

func refPing(there, back *bareref.Ring, rounds, warmup int) (bareReport, error) {
	msg, buf := bareMsg(), bareMsg()
	ts := make([]int64, rounds+1)
	fails := 0
	for i := range warmup + rounds {
		if i == warmup {
			ts[0] = shm.MonoNow()
		}
		setSeq(msg, uint64(i))
		for !there.TryPush(msg) {
			backoff(&fails)
		}
		for {
			if _, ok := back.TryPop(buf); ok {
				break
			}
			backoff(&fails)
		}
		if i >= warmup {
			ts[i-warmup+1] = shm.MonoNow()
		}
		if seqOf(buf) != uint64(i) {
			return bareReport{}, fmt.Errorf("round %d: echo carries %d", i, seqOf(buf))
		}
	}
	setSeq(msg, bareStop)
	for !there.TryPush(msg) {
		backoff(&fails)
	}
	return rttReport(ts), nil
}

func refEcho(there, back *bareref.Ring) {
	buf := bareMsg()
	fails := 0
	for {
		if _, ok := there.TryPop(buf); !ok {
			backoff(&fails)
			continue
		}
		if seqOf(buf) == bareStop {
			return
		}
		for !back.TryPush(buf) {
			backoff(&fails)
		}
	}
}

// barePingPongSide is a side of the one-word ping-pong: the layout of
// pingpong.go (the word alone on its cache line), timed as the bare
// loop's round trips are.
func barePingPongSide(j *bareJob, start func() error) (bareReport, error) {
	reg, err := shm.Open(j.Shm, layout.KindRegion)
	if err != nil {
		return bareReport{}, err
	}
	defer reg.Close()
	w, err := reg.Uint32(layout.HeaderSize)
	if err != nil {
		return bareReport{}, err
	}
	if err := start(); err != nil {
		return bareReport{}, err
	}
	if j.Side == 1 {
		return bareReport{}, wordEcho(w)
	}
	return wordPing(w, j.Rounds, j.Warmup)
}

// awaitWord spins until w no longer holds old.
func awaitWord(w *atomic.Uint32, old uint32) uint32 {
	fails := 0
	for {
		if v := w.Load(); v != old {
			return v
		}
		backoff(&fails)
	}
}

func wordPing(w *atomic.Uint32, rounds, warmup int) (bareReport, error) {
	ts := make([]int64, rounds+1)
	last := uint32(0)
	for i := range warmup + rounds {
		if i == warmup {
			ts[0] = shm.MonoNow()
		}
		ping := last + 1
		w.Store(ping)
		v := awaitWord(w, ping)
		if i >= warmup {
			ts[i-warmup+1] = shm.MonoNow()
		}
		if v != ping+1 {
			return bareReport{}, fmt.Errorf("round %d: sent %d, peer answered %d", i, ping, v)
		}
		last = v
	}
	w.Store(stopValue)
	return rttReport(ts), nil
}

func wordEcho(w *atomic.Uint32) error {
	last := uint32(0)
	for {
		v := awaitWord(w, last)
		if v == stopValue {
			return nil
		}
		if v != last+1 {
			return fmt.Errorf("had %d, pinger sent %d", last, v)
		}
		last = v + 1
		w.Store(last)
	}
}

// bareUDSSide is a side of the socket row: descriptor 3 is its socket.
func bareUDSSide(j *bareJob, start func() error) (bareReport, error) {
	const fd = 3
	msg := bareMsg()
	if err := start(); err != nil {
		return bareReport{}, err
	}
	t0 := shm.MonoNow()
	if j.Side == 0 {
		for seq := uint64(0); seq < uint64(j.Messages); seq++ {
			setSeq(msg, seq)
			for {
				n, err := unix.Write(fd, msg)
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					return bareReport{}, fmt.Errorf("write: %w", err)
				}
				if n != len(msg) {
					return bareReport{}, fmt.Errorf("short write: %d of %d bytes", n, len(msg))
				}
				break
			}
		}
		return bareReport{Count: j.Messages, Start: t0, End: shm.MonoNow()}, nil
	}
	for got := int64(0); got < j.Messages; got++ {
		for {
			n, err := unix.Read(fd, msg)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return bareReport{}, fmt.Errorf("read: %w", err)
			}
			if n != len(msg) {
				return bareReport{}, fmt.Errorf("read %d bytes, want %d (peer gone?)", n, len(msg))
			}
			break
		}
	}
	t1 := shm.MonoNow()
	return bareReport{Count: j.Messages, Start: t0, End: t1}, lastSeqErr(seqOf(msg), j.Messages)
}

// bareChanRun is the channel row: a producer goroutine and this one, in
// one process. The producer's clock read before its loop starts the run,
// this goroutine's after its own ends it.
func bareChanRun(n int64) bareReport {
	ch := make(chan [barePayload]byte, bareSlots)
	started := make(chan int64, 1)
	go func() {
		var m [barePayload]byte
		started <- shm.MonoNow()
		for seq := uint64(0); seq < uint64(n); seq++ {
			setSeq(m[:], seq)
			ch <- m
		}
	}()
	var m [barePayload]byte
	for range n {
		m = <-ch
	}
	t1 := shm.MonoNow()
	rep := bareReport{Count: n, Start: <-started, End: t1}
	if seqOf(m[:]) != uint64(n-1) {
		rep.Count = -1 // bareResult reports the mismatch
	}
	return rep
}
