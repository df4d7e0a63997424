package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
)

// Loaners, plain pushers and consumers in separate processes on one small
// ring (so that it wraps, fills and empties all the time, and blocking
// loans and pops sleep and wake): every message whose Publish or Push
// returned is delivered exactly once, intact, and no aborted loan is ever
// delivered, though each was written out in full before its Abort.
//
// Child roles (on loanHelper, see TestRingLoanHelperProcess), each for ids
// P<<32|S, S = 0..COUNT-1:
//
//	mp-loaner    Loan (blocking) 20 bytes, or the whole payload and
//	             PublishN 20; every 5th is aborted: "aborted P S", the
//	             others published: "ok P S"
//	mp-pusher    Push: "ok P S"
//	mp-consumer  Pop, or Claim and Ack, printing "got P S" for each, until
//	             the file STOP exists and the ring is empty

func loanMPChild(r *Ring, role string) error {
	p, count := proctest.EnvUint64("PRODUCER"), proctest.EnvUint64("COUNT")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch role {
	case "mp-loaner":
		for s := uint64(0); s < count; s++ {
			id := p<<32 | s
			msg := encodeMsg(id)
			n := len(msg)
			if s%2 == 1 {
				n = r.MaxPayload()
			}
			l, err := r.Loan(ctx, n)
			if err != nil {
				return fmt.Errorf("loan %d %d: %w", p, s, err)
			}
			copy(l.Data(), msg)
			switch {
			case s%5 == 4:
				err = r.Abort(l)
				if err == nil {
					fmt.Printf("aborted %d %d\n", p, s)
				}
			case n == len(msg):
				err = r.Publish(l)
			default:
				err = r.PublishN(l, len(msg))
			}
			if err != nil {
				return fmt.Errorf("end loan %d %d: %w", p, s, err)
			}
			if s%5 != 4 {
				fmt.Printf("ok %d %d\n", p, s)
			}
		}
	case "mp-pusher":
		for s := uint64(0); s < count; s++ {
			if err := r.Push(ctx, encodeMsg(p<<32|s)); err != nil {
				return fmt.Errorf("push %d %d: %w", p, s, err)
			}
			fmt.Printf("ok %d %d\n", p, s)
		}
	case "mp-consumer":
		stop := os.Getenv("STOP")
		buf := make([]byte, r.MaxPayload())
		got := func(b []byte) error {
			id, err := decodeMsg(b)
			if err != nil {
				return err
			}
			fmt.Printf("got %d %d\n", id>>32, id&(1<<32-1))
			return nil
		}
		for i := 0; ; i++ {
			wait, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			var err error
			if i%3 == 0 {
				var l Lease
				if l, err = r.Claim(wait); err == nil {
					if err = got(l.Data()); err == nil {
						err = r.Ack(l)
					}
				}
			} else {
				var n int
				if n, err = r.Pop(wait, buf); err == nil {
					err = got(buf[:n])
				}
			}
			cancel()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				if !proctest.Exists(stop) {
					continue
				}
				// Every producer has exited: take what is left.
				for {
					n, err := r.TryPop(buf)
					if err == ErrEmpty {
						return r.Close()
					}
					if err != nil {
						return err
					}
					if err := got(buf[:n]); err != nil {
						return err
					}
				}
			}
			if err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return r.Close()
}

func TestLoansAndPushesDeliverExactlyOnce(t *testing.T) {
	count := 3000
	if proctest.RaceEnabled || testing.Short() {
		count = 500
	}
	r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
	stop := filepath.Join(t.TempDir(), "stop")
	env := func(p int) []string {
		return []string{proctest.PathArg(r.Path()), "PRODUCER=" + strconv.Itoa(p), "COUNT=" + strconv.Itoa(count), "STOP=" + stop}
	}
	producers := []*proctest.Child{
		loanHelper.Start(t, "mp-loaner", env(1)...),
		loanHelper.Start(t, "mp-loaner", env(2)...),
		loanHelper.Start(t, "mp-pusher", env(3)...),
	}
	consumers := []*proctest.Child{
		loanHelper.Start(t, "mp-consumer", env(0)...),
		loanHelper.Start(t, "mp-consumer", env(0)...),
	}
	for _, c := range producers {
		c.MustSucceed(t)
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range consumers {
		c.MustSucceed(t)
	}

	lines := func(c *proctest.Child, word string) []string {
		out, _ := c.Output()
		var ids []string
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, word+" "); ok {
				ids = append(ids, rest)
			}
		}
		return ids
	}
	promised, aborted := map[string]bool{}, map[string]bool{}
	for _, c := range producers {
		for _, id := range lines(c, "ok") {
			promised[id] = true
		}
		for _, id := range lines(c, "aborted") {
			aborted[id] = true
		}
	}
	delivered := map[string]int{}
	for _, c := range consumers {
		for _, id := range lines(c, "got") {
			delivered[id]++
		}
	}
	for _, id := range drain(t, r) { // nothing should be left
		delivered[fmt.Sprintf("%d %d", id>>32, id&(1<<32-1))]++
	}
	if want := 3*count - 2*(count/5); len(promised) != want || len(aborted) != 2*(count/5) {
		t.Fatalf("%d promised and %d aborted, want %d and %d", len(promised), len(aborted), want, 2*(count/5))
	}
	for id := range promised {
		if n := delivered[id]; n != 1 {
			t.Errorf("message %s delivered %d times, want exactly once", id, n)
		}
	}
	for id, n := range delivered {
		switch {
		case aborted[id]:
			t.Errorf("aborted loan %s delivered %d times", id, n)
		case !promised[id]:
			t.Errorf("message %s delivered but never published", id)
		}
	}
	c := r.Counters()
	if c.Pushed != uint64(len(promised)) || c.Abandoned != uint64(len(aborted)) || c.Depth() != 0 {
		t.Errorf("counters %+v: want pushed %d, abandoned %d, depth 0", c, len(promised), len(aborted))
	}
	if rep := r.Check(); !rep.Clean() {
		t.Errorf("Check after the run: %+v", rep.Findings)
	}
	if s := r.Scan(); s.States[layout.SlotFree] != int(r.Capacity()) {
		t.Errorf("slots after the run: %+v", s.States)
	}
	t.Logf("%d published (%d by loans), %d aborted; counters %+v", len(promised), len(promised)-count, len(aborted), c)
}
