package gather

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// Found by a review: a participant (in another pid namespace: a container) that
// publishes round r and then leaves must never be reported dead "before
// publishing round r". checkLiveness reads its ctl word (active), and the
// judge then finds its lock released (it left meanwhile) and calls it
// dead without re-reading its round or state.
func TestPublishedThenLeftIsNotJudgedDead(t *testing.T) {
	deadline := time.Now().Add(2 * time.Second) // a sampler: the re-read after the verdict makes it hold by construction
	for iter := 0; time.Now().Before(deadline); iter++ {
		path := fairShmPath(t)
		a, err := Create(path, Config{Participants: 2, MaxWords: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := a.Join(0, Timeout(5*time.Second), LiveCheck(time.Microsecond))
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.Join(1, Timeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Recorded in another pid namespace: a released lock proves death
		// without asking the pid.
		b.area.U64(b.lay.SlotOff(1) + layout.AGSlotPidNS).Store(0xdead0002)
		done := make(chan error, 1)
		go func() {
			time.Sleep(time.Duration(iter%50)*20*time.Microsecond + 300*time.Microsecond)
			_, err := p.AllGather(nil, []uint32{1, 1})
			if err == nil {
				err = p.Leave()
			}
			done <- err
		}()
		_, werr := w.AllGather(nil, []uint32{0, 0})
		perr := <-done
		a.Close()
		b.Close()
		os.Remove(path)
		if perr != nil {
			t.Fatalf("iteration %d: publisher: %v", iter, perr)
		}
		if errors.Is(werr, ErrPeerDead) {
			t.Fatalf("iteration %d: participant 1 published round 1 and left, yet: %v", iter, werr)
		}
		if werr != nil {
			t.Fatalf("iteration %d: %v", iter, werr)
		}
	}
	t.Log("no interleaving hit")
}
