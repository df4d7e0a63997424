package main

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// SoakEnv sets how many messages the bridged soak carries (scripts/soak.sh:
// 100000); the normal suite carries 6000, 2000 with -short.
const SoakEnv = "SHMBRIDGE_SOAK_MESSAGES"

func soakMessages(t *testing.T) uint64 {
	if s := os.Getenv(SoakEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("%s=%q: want a positive integer", SoakEnv, s)
		}
		return n
	}
	if testing.Short() {
		return 2000
	}
	return 6000
}

// The bridge's crash points, by direction, each with the range of passes
// after which a life dies there (batches for the batch steps, messages
// for the per-message ones): wide enough that every life moves the run
// forward, so that no message is in flight at enough deaths in a row to
// become the ring's poison.
var soakPoints = map[string][]struct {
	point    string
	min, max int
}{
	"out": {
		{"bridge.out.after-claim", 3, 12},
		{"bridge.out.after-journal", 3, 12},
		{"bridge.out.after-publish", 3, 12},
		{"bridge.out.after-puback", 3, 12},
		{"bridge.out.after-lease-ack", 3, 12},
	},
	"in": {
		{"bridge.in.after-fetch", 3, 12},
		{"bridge.in.after-push", 200, 3000},
		{"bridge.in.after-ack", 200, 3000},
	},
}

// Ring A → out → JetStream → in → ring B while both bridges are killed
// over and over at random crash points (each life armed at one, after a
// random number of passes) and restarted: B gets every message, the
// stream stores each once (every republish dropped by the duplicate
// window), no late duplicates, nothing poisoned; the duplicates in B are
// counted and logged.
func TestBridgedSoakWithKillsLosesNothing(t *testing.T) {
	n := soakMessages(t)
	srv := startServer(t)
	js := srv.client(t)
	a, b := newRing(t, 4096), newRing(t, 4096)
	ra, rb := openRing(t, a), openRing(t, b)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), n))
	var rngMu sync.Mutex
	pick := func(dir string) (string, int) {
		rngMu.Lock()
		defer rngMu.Unlock()
		ps := soakPoints[dir]
		p := ps[rng.IntN(len(ps))]
		return p.point, p.min + rng.IntN(p.max-p.min+1)
	}
	args := map[string][]string{
		"out": outArgs(srv, a, "SOAK", "soak.msgs"),
		"in":  inArgs(srv, b, "SOAK", "soak.msgs"),
	}
	stop := make(chan struct{})
	kills := map[string]*atomic.Int64{"out": {}, "in": {}}
	var wg sync.WaitGroup
	for dir := range args {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				point, after := pick(dir)
				p := startBridge(t, proctest.Arm(point, after), args[dir]...)
				select {
				case <-stop:
					// Alive (its point not reached): stop it, which must
					// exit 0; dead at its point just now: nothing to do.
					_ = p.cmd.Process.Signal(syscall.SIGTERM)
					<-p.done
					if _, errOut := p.output(); p.code() != 0 && !strings.Contains(errOut, "shm: killed at crash point ") {
						t.Errorf("%s bridge exited %d after SIGTERM: %s", dir, p.code(), p.describe())
					}
					return
				case <-p.done:
				}
				_, errOut := p.output()
				if !strings.Contains(errOut, "shm: killed at crash point "+point+"\n") {
					t.Errorf("%s bridge died (%v) but not at %s: %s", dir, p.err, point, p.describe())
					return
				}
				killedAt.Store(point, true)
				kills[dir].Add(1)
			}
		}()
	}
	produceAsync(t, ra, 0, n)
	got := newTally()
	drainRing(t, rb, got, int(n))
	close(stop)
	wg.Wait()
	dups := got.check(t, n)
	if stored := readStream(t, js, "SOAK").check(t, n); stored != 0 {
		t.Fatalf("the stream stores %d duplicates: republishes escaped the window", stored)
	}
	if c := ra.Counters(); c.Poisoned != 0 {
		t.Fatalf("%d messages of ring A set aside as poison", c.Poisoned)
	}
	t.Logf("%d messages, out killed %d times, in killed %d times; %d duplicates in ring B (JetStream redeliveries: at-least-once)",
		n, kills["out"].Load(), kills["in"].Load(), dups)
	if kills["out"].Load() == 0 || kills["in"].Load() == 0 {
		t.Fatalf("a bridge was never killed (out %d, in %d)", kills["out"].Load(), kills["in"].Load())
	}
}
