package pass

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
)

// Regression (found in review): board.sweep reads an entry's owner word, judges it gone, and only
// then loads the entry's token to hand to free. Between the two loads the
// entry can be freed by another sweeper and taken by a live client, whose
// token is then the one loaded: free's token CAS (token -> 0) succeeds on
// the live client's request, and only the owner CAS fails. The live
// client's cancellation vanishes from the board (workers never see it) and
// the entry is left owner=live, token=0: its owner's clear looks for the
// token and never finds it, so the entry leaks until the client closes.
//
// Goroutines on a one-entry board, each doing only what real processes
// do: a member that registers, posts a request and unregisters (a client
// that closed or died with a request on the board), two sweepers (clients
// on a full board, or pools after a reclaim), and a live client posting
// and clearing its own requests.
func TestSweepNeverWipesALiveRequest(t *testing.T) {
	f := newSchedFiles(t)
	b, err := openBoard(f.submit, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	hb, _, err := heartbeat.OpenOrCreate(f.hb, heartbeat.Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	live, err := hb.Register("live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Unregister()
	a := live.Ticket()
	// More threads than cores: the OS preempts a sweeper between its two
	// loads much more often (the race shows within seconds on 2 CPUs
	// without this, within milliseconds with it).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))

	var tokens atomic.Uint64
	var stop atomic.Bool
	var lost, leaked atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // members leaving a request behind
		defer wg.Done()
		for !stop.Load() {
			m, err := hb.Register("leaving")
			if err != nil {
				continue
			}
			for i := 0; i < 100 && !b.request(m.Ticket(), tokens.Add(1)); i++ {
			}
			m.Unregister()
		}
	}()
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() { // sweepers
			defer wg.Done()
			for !stop.Load() {
				b.sweep(hb)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			tok := tokens.Add(1)
			if !b.request(a, tok) {
				continue
			}
			if !b.has(tok) {
				lost.Add(1) // our request, never cleared by us, is gone
				t.Logf("lost token %d: entry owner %#x token %d, requests hint %d", tok, b.owner(0).Load(), b.token(0).Load(), b.requests.Load())
			}
			b.clear(a, tok)
			if b.owner(0).Load() == ownerWord(a) && b.token(0).Load() == 0 {
				// owner=live, token=0 after our own clear: nobody but
				// clearOwner (at Close) will ever free it.
				leaked.Add(1)
				stop.Store(true)
			}
		}
	}()
	deadline := time.Now().Add(time.Duration(proctest.SoakLoops(t)) * 12 * time.Millisecond) // 3 s; longer under scripts/soak.sh
	for !stop.Load() && time.Now().Before(deadline) && lost.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if lost.Load() > 0 || leaked.Load() > 0 || b.owner(0).Load() == ownerWord(a) {
		t.Fatalf("a sweep cleared a live client's request: %d requests lost before their owner cleared them, %d entries left owner=live token=0 (owner word now %#x, token %d)",
			lost.Load(), leaked.Load(), b.owner(0).Load(), b.token(0).Load())
	}
}
