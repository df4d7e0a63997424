package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/shmkit/shmkit/shm"
)

// --chaos N kills N worker processes with SIGKILL while a run goes on
// (consumers for `run`, pass workers for `pass`), each at a random moment
// and each chosen at random among those working, and starts a replacement
// for each at once. Moments are drawn from the seed, as points of the
// run's progress: in a counted run, when the consumers (or the parent, for
// pass) have received a given number of messages, uniform between 5 % and
// 60 % of the total; in a timed run, a time uniform between 5 % and 60 %
// of the duration. A counted run always reaches every point, since
// nothing is lost (every message is received at least once before the run
// ends), so it always makes its N kills.
//
// A plan with a gate (a counted `run`) also holds the producers back: they
// may run only chaosLead of the messages ahead of the next point, until
// its kill is made and the replacement is working. Without that, the
// consumers went on while a replacement started (an exec, slow on a
// loaded machine), and a later kill could come after the last data
// message had been received.
const (
	chaosFrom = 0.05
	chaosTo   = 0.60
)

// maxChaos bounds --chaos.
const maxChaos = 1000

// chaosPoll is how often the agent looks at the run's progress.
const chaosPoll = 200 * time.Microsecond

// ChaosReport is what --chaos did.
type ChaosReport struct {
	Seed          int64       `json:"seed"`           // of the kill plan; --seed repeats it
	Requested     int         `json:"requested"`      // --chaos N
	Kills         []ChaosKill `json:"kills"`          // in order
	WatchdogScans int         `json:"watchdog_scans"` // scans of the parent's watchdog
	Reclaimed     int         `json:"reclaimed"`      // heartbeat slots of dead workers the watchdog freed
}

// ChaosKill is one worker killed on purpose.
type ChaosKill struct {
	Role     string `json:"role"`     // consumer or worker
	ID       int    `json:"id"`       // its number; replacements get new ones
	AtNs     int64  `json:"at_ns"`    // since the run started
	Progress int64  `json:"progress"` // messages (passes) received when it was killed
}

// chaosAgent kills workers while a run goes on. start is called as the
// run starts; finish waits until it has made every kill it will make (and
// each replacement is working); killed says how many it made, which
// excuses duplicates in the result.
type chaosAgent interface {
	start(ctx context.Context, f *fleet)
	finish() error
	killed() int
}

// chaosPlan is the agent behind --chaos.
type chaosPlan struct {
	seed  int64
	rng   *rand.Rand
	role  string  // whom to kill
	at    []int64 // progress points (counted run) or ns since the start (timed run)
	timed bool

	progress func() int64                                    // messages received so far
	replace  func(ctx context.Context, victim *worker) error // starts a replacement for victim and waits until it works
	gate     func(next int64)                                // nil, or holds the producers before the point next (0: lets them go)

	mu    sync.Mutex
	kills []ChaosKill
	done  chan struct{}
	err   error
}

// newChaosPlan draws n kill moments from seed: between 5 % and 60 % of
// total messages, or of d in a timed run (total 0).
func newChaosPlan(n int, seed int64, role string, total int64, d time.Duration,
	progress func() int64, replace func(ctx context.Context, victim *worker) error) *chaosPlan {
	p := &chaosPlan{seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)), role: role,
		timed: total == 0, progress: progress, replace: replace, done: make(chan struct{})}
	span := float64(total)
	if p.timed {
		span = float64(d)
	}
	for range n {
		p.at = append(p.at, max(1, int64(span*(chaosFrom+(chaosTo-chaosFrom)*p.rng.Float64()))))
	}
	slices.Sort(p.at)
	return p
}

func (p *chaosPlan) start(ctx context.Context, f *fleet) {
	go func() {
		defer close(p.done)
		p.err = p.run(ctx, f)
	}()
}

// holdAt sets the gate, if any, before the point next (0: none left).
func (p *chaosPlan) holdAt(next int64) {
	if p.gate != nil {
		p.gate(next)
	}
}

func (p *chaosPlan) run(ctx context.Context, f *fleet) error {
	defer p.holdAt(0) // whatever happens, the producers must not wait for kills that will not come
	begin := int64(f.ctl.start.Load())
	t := time.NewTicker(chaosPoll)
	defer t.Stop()
	for k, at := range p.at {
		for {
			now := shm.MonoNow()
			reached := p.progress() >= at
			if p.timed {
				reached = now-begin >= at
			}
			var victim *worker
			if reached {
				victim = p.pick(f)
			}
			if victim != nil {
				f.killOnPurpose(victim)
				p.mu.Lock()
				p.kills = append(p.kills, ChaosKill{Role: victim.role, ID: victim.id, AtNs: now - begin, Progress: p.progress()})
				p.mu.Unlock()
				if err := p.replace(ctx, victim); err != nil {
					return fmt.Errorf("starting a replacement for %s %d: %w", victim.role, victim.id, err)
				}
				if k+1 < len(p.at) {
					p.holdAt(p.at[k+1])
				}
				break
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-t.C:
			}
		}
	}
	return nil
}

// pick chooses a victim at random among the workers of the role that are
// ready (they have opened everything and work) and still running.
func (p *chaosPlan) pick(f *fleet) *worker {
	var alive []*worker
	for _, w := range f.list() {
		if w.role == p.role && w.proc != nil && !w.killed.Load() && !w.proc.exited() && f.ctl.isReady(w.index) {
			alive = append(alive, w)
		}
	}
	if len(alive) == 0 {
		return nil
	}
	return alive[p.rng.IntN(len(alive))]
}

func (p *chaosPlan) finish() error {
	<-p.done
	return p.err
}

func (p *chaosPlan) killed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.kills)
}

// report is what the plan did, for the result.
func (p *chaosPlan) report() *ChaosReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &ChaosReport{Seed: p.seed, Requested: len(p.at), Kills: slices.Clone(p.kills)}
}

// chaosSeed returns the seed to use: the one given, or a fresh one.
func chaosSeed(given int64, set bool) int64 {
	if set {
		return given
	}
	return int64(rand.Uint64() >> 1)
}
