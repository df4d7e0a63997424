package pass

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// parking holds results whose reply ring was full when their pass
// finished, so that the worker could go on serving other submitters. Each
// keeps its pass's lease (a pool that dies here loses nothing: the passes
// run again) and is retried every retry interval until it fits, its
// submitter is proven gone (dropped, counted), or Stop hands the pass back.
//
// A client never has more passes awaiting results than its reply ring
// holds, less a margin (ClientConfig.InFlight), so its ring fills only
// when results it does not await arrive faster than it reads (duplicates
// of passes run twice after a crash, results for an earlier client in the
// slot) or when it stopped reading. Parking is the rare path: a ticker
// polls it only while something is parked.
type parking struct {
	p       *Pool
	mu      sync.Mutex
	waiting []parked
	kick    chan struct{}
	done    chan struct{}
	quit    chan struct{}
	once    sync.Once
}

type parked struct {
	lease    transport.Lease
	ref      heartbeat.LeaseRef
	recorded bool
	to       heartbeat.Ticket
	reply    *transport.Ring // nil: a pass to hand back, whose Release found the queue full
	res      []byte
}

const parkRetry = 2 * time.Millisecond

func newParking(p *Pool) *parking {
	k := &parking{p: p, kick: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{})}
	go k.loop()
	return k
}

func (k *parking) add(e parked) {
	k.mu.Lock()
	k.waiting = append(k.waiting, e)
	k.mu.Unlock()
	shm.CrashPoint(crashPassWorkerAfterPark)
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *parking) loop() {
	defer close(k.done)
	var tick *time.Ticker
	var tc <-chan time.Time
	for {
		select {
		case <-k.quit:
			if tick != nil {
				tick.Stop()
			}
			return
		case <-k.kick:
		case <-tc:
		}
		if k.retry() == 0 {
			if tick != nil {
				tick.Stop()
				tick, tc = nil, nil
			}
		} else if tick == nil {
			tick = time.NewTicker(parkRetry)
			tc = tick.C
		}
	}
}

// retry tries every parked result once and returns how many still wait.
func (k *parking) retry() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	// Settling a result can hand its pass back, and a hand-back that finds
	// the queue full parks it again (add takes k.mu): those wait here, and
	// are settled after the lock is dropped.
	var unreachable []parked
	defer func() {
		k.mu.Unlock()
		for _, e := range unreachable {
			k.p.unreachable(e.lease, e.ref, e.recorded, e.to)
		}
		k.mu.Lock()
	}()
	keep := k.waiting[:0]
	for _, e := range k.waiting {
		if e.reply == nil {
			if errors.Is(k.p.submit.Release(e.lease), transport.ErrFull) {
				keep = append(keep, e)
				continue
			}
			k.p.released.Add(1)
			if e.recorded {
				k.p.member.ClearLease(e.ref)
			}
			continue
		}
		err := e.reply.TryPush(e.res)
		switch {
		case err == nil:
			k.p.finish(e.lease, e.ref, e.recorded)
		case errors.Is(err, transport.ErrFull) && !k.p.hb.Gone(e.to):
			keep = append(keep, e)
		case errors.Is(err, transport.ErrFull):
			k.p.orphanedResults.Add(1)
			k.p.finish(e.lease, e.ref, e.recorded)
		default:
			unreachable = append(unreachable, e)
		}
	}
	clear(k.waiting[len(keep):])
	k.waiting = keep
	return len(keep)
}

// stop keeps retrying until nothing is parked or ctx ends, then hands
// the rest back to the submit queue and ends the loop.
func (k *parking) stop(ctx context.Context) {
	k.once.Do(func() {
		close(k.quit)
		<-k.done
		for k.retry() > 0 {
			select {
			case <-ctx.Done():
				k.mu.Lock()
				waiting := k.waiting
				k.waiting = nil
				k.mu.Unlock()
				for _, e := range waiting {
					// A Release that still finds the queue full leaves
					// the lease held; closing the queue releases it.
					if k.p.submit.Release(e.lease) == nil {
						k.p.released.Add(1)
					}
					if e.recorded {
						k.p.member.ClearLease(e.ref)
					}
				}
				return
			case <-time.After(parkRetry):
			}
		}
	})
}
