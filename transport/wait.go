package transport

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/spin"
)

// Blocking operations spin briefly (the other side is usually a few hundred
// nanoseconds away), then sleep on a futex word in the mapping. The other
// side issues a wake syscall only when a sleeper has raised the waiter flag,
// so an uncontended push or pop makes no syscall.
//
// This is the wait engine the ring's and the deque's blocking calls share
// (ring_wait.go, deque_wait.go).
//
// The budgets are times, not counts: the other side's reply takes as long
// as its work, and a wait that gives up after a fixed number of tries
// sleeps (and pays a wake-up of several microseconds) whenever that work
// takes a little longer than the tries.
const (
	spinFor  = 20 * time.Microsecond // re-try with short pauses this long
	yieldFor = 30 * time.Microsecond // then re-try after runtime.Gosched until this long
)

// stuckCheckInterval is how long a blocked call waits behind the same
// owned slot word before it judges the owner (see sleep).
const stuckCheckInterval = 100 * time.Millisecond

// fileCheckInterval bounds every sleep of a blocked call: when it times
// out, the call checks the file's size and holes (shm.Region.CheckFile,
// one fstat), so a file truncated under a sleeper (which wakes nobody) is
// noticed within this long. A sleeper costs a wake-up and an fstat per
// interval; wake-ups by the other side check nothing (whoever wakes us
// touched the file first).
const fileCheckInterval = 500 * time.Millisecond

// block runs try until it reports that it got through (a result or an
// error other than full/empty): spinning first, then yielding, then
// sleeping on seq. hits counts blocking calls that had to wait. blocker
// names the slot in the way and heal repairs the file if that slot's owner
// is proven dead (see sleep). The ring and the deque share it.
//
// Once a call sleeps, the rest of it runs under reg's fault guard and
// checks the file each time a sleep times out (at least every
// fileCheckInterval): a file truncated or holed under a blocked call is
// then an error naming it (ErrTruncated, ErrSparse, each wrapping
// shm.ErrFault when a touch faulted) instead of a wait that never ends or
// a SIGBUS. The spinning phase, where every push and pop that does not
// sleep stays, pays for neither.
func block(ctx context.Context, reg *shm.Region, seq, flag *atomic.Uint32, hits *atomic.Uint64, blocker func() (uint64, uint64), heal func(idx, raw uint64), try func() bool) error {
	var began int64
	for attempt := 0; ; attempt++ {
		if try() {
			return nil
		}
		if attempt == 0 {
			hits.Add(1)
			began = shm.MonoNow()
		}
		if !backoff(time.Duration(shm.MonoNow() - began)) {
			break
		}
	}
	stop := wakeOnDone(ctx, seq)
	defer stop()
	var st stuck
	return reg.Guard("wait", func() error {
		for {
			if done, err := sleep(ctx, reg, seq, flag, try, blocker, heal, &st); done || err != nil {
				return err
			}
			if try() {
				return nil
			}
		}
	})
}

// backoff spins, then yields, for as long as the call has been waiting; it
// returns false when it is time to sleep. Each spin pauses a little first:
// re-trying at once would keep taking the cache line the other side is
// about to free (seen in passbench: a full ring that stayed full at half
// the throughput, depending on code layout).
func backoff(waited time.Duration) bool {
	switch {
	case waited < spinFor:
		spin.Pause()
		return true
	case waited < yieldFor:
		runtime.Gosched()
		return true
	}
	return false
}

// stuck remembers the owned slot a blocked call has been waiting behind,
// and since when: wake-ups must not reset the clock, or a stream of
// pushes behind a dead writer would keep its slot from ever being healed.
type stuck struct {
	idx, raw uint64
	since    time.Time
}

// sleep announces a sleeper, re-checks with retry (which performs the
// operation: done is true if it got through), and sleeps on seq until
// woken or ctx ends. When the slot in the way is owned by a writer or
// reader, the wait is bounded so that after stuckCheckInterval behind the
// same word the owner is judged, and the ring repaired on proof of death.
// It returns ctx's error or a futex failure, and neither to make the
// caller try again.
func sleep(ctx context.Context, reg *shm.Region, seq, flag *atomic.Uint32, retry func() bool, blocker func() (uint64, uint64), heal func(idx, raw uint64), st *stuck) (done bool, err error) {
	s := seq.Load()
	flag.Store(1)
	if retry() {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	timeout := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			// Past the deadline: the context may not say so yet.
			return false, context.DeadlineExceeded
		}
	}
	if idx, raw := blocker(); isOwned(raw) {
		now := time.Now()
		if st.since.IsZero() || st.idx != idx || st.raw != raw {
			*st = stuck{idx: idx, raw: raw, since: now}
		}
		left := stuckCheckInterval - now.Sub(st.since)
		if left <= 0 {
			st.since = now
			heal(idx, raw)
			return false, nil
		}
		if timeout < 0 || timeout > left {
			timeout = left
		}
	} else {
		*st = stuck{}
	}
	if timeout < 0 || timeout > fileCheckInterval {
		timeout = fileCheckInterval
	}
	err = shm.FutexWait(seq, s, timeout)
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	if err != nil {
		// A timeout, or a futex failure (EFAULT on a page truncated away):
		// is the file still whole?
		if ferr := reg.CheckFile(); ferr != nil {
			return false, ferr
		}
		if err != shm.ErrTimeout {
			return false, err
		}
	}
	return false, nil
}

func isOwned(raw uint64) bool {
	s := layout.UnpackSlot(raw).State
	return s == layout.SlotWriting || s == layout.SlotReading
}

// wakeOnDone arranges for ctx's end to wake sleepers on seq, so a blocked
// call returns at once on cancellation without polling. Only blocking calls
// that actually sleep pay for it.
//
// The returned stop function must be called before the call returns: if the
// wake-up is already running, stop waits for it, so it never touches a
// mapping that Close has since unmapped.
func wakeOnDone(ctx context.Context, seq *atomic.Uint32) func() {
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		// Its own goroutine, so its own guard: the file may have been
		// truncated under the sleeper being woken.
		_ = shm.Guard(func() error {
			seq.Add(1)
			_, _ = shm.FutexWake(seq, -1)
			return nil
		})
	})
	return func() {
		if !stop() {
			<-done
		}
	}
}
