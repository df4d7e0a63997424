package task

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTaskStress has hundreds of goroutines registering, resolving,
// completing, cancelling and joining the same tasks at once; run it under
// -race. Every callable must run at most once, every task must end
// resolved, and every await of a task must see the one outcome it ended with.
func TestTaskStress(t *testing.T) {
	const (
		n         = 300 // tasks
		resolvers = 4   // concurrent Resolve calls per task
	)
	var ts Scheduler[int]
	var runs [n]atomic.Int32
	boom := errors.New("boom")
	completers := make([]*Completer[int], n)
	ctx, cancel := context.WithTimeout(t.Context(), 2*taskWaitLong)
	defer cancel()

	for i := range n {
		id := ID(i)
		switch i % 3 {
		case 0: // quick callable, sometimes failing
			_ = ts.Register(id, func(context.Context) (int, error) {
				runs[i].Add(1)
				if i%7 == 0 {
					return 0, boom
				}
				return i, nil
			})
		case 1: // external, completed, failed or released by another goroutine
			c, err := ts.RegisterExternal(id)
			if err != nil {
				t.Fatal(err)
			}
			completers[i] = c
		case 2: // slower callable that honours its context
			_ = ts.Register(id, func(ctx context.Context) (int, error) {
				runs[i].Add(1)
				select {
				case <-time.After(time.Duration(rand.IntN(3)) * time.Millisecond):
					return i, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			})
		}
	}

	type result struct {
		v   int
		err error
	}
	var got [n][resolvers]result
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		id := ID(i)
		for r := range resolvers {
			wg.Go(func() {
				<-start
				v, err := ts.Resolve(ctx, id)
				got[i][r] = result{v, err}
			})
		}
		if c := completers[i]; c != nil {
			wg.Go(func() {
				<-start
				switch i % 4 {
				case 0:
					_ = c.Complete(i)
				case 1:
					_ = c.Fail(boom)
				case 2:
					c.Release()
				default:
					// Compete with a Cancel: at most one of them may win
					// (neither does if a Race or Any cancelled the task first).
					var wins atomic.Int32
					var inner sync.WaitGroup
					inner.Go(func() {
						if c.Complete(i) == nil {
							wins.Add(1)
						}
					})
					inner.Go(func() {
						if ts.Cancel(id) == nil {
							wins.Add(1)
						}
					})
					inner.Wait()
					if w := wins.Load(); w > 1 {
						t.Errorf("task %d: both Complete and Cancel succeeded", i)
					}
				}
			})
		}
		if i%5 == 0 {
			wg.Go(func() { <-start; _ = ts.Cancel(id) })
		}
		wg.Go(func() { // pollers
			<-start
			for range 3 {
				_, _ = ts.TryResolve(id)
				_, _ = ts.Status(id)
				_ = ts.IsResolved(id)
				_ = ts.HasExternal(id)
			}
		})
	}
	for g := 0; g+2 < n; g += 3 {
		ids := []ID{ID(g), ID(g + 1), ID(g + 2)}
		wg.Go(func() {
			<-start
			switch g / 3 % 4 {
			case 0:
				_, _, _ = ts.Race(ctx, ids...)
			case 1:
				_, _, _ = ts.Any(ctx, ids...)
			case 2:
				_, _ = ts.All(ctx, ids...)
			default:
				outs, err := ts.AllSettled(ctx, ids...)
				if err != nil {
					t.Errorf("AllSettled(%v): %v", ids, err)
					return
				}
				for _, o := range outs {
					if o.Status == Pending {
						t.Errorf("AllSettled returned a pending outcome %+v", o)
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()

	for i := range n {
		o, err := ts.Status(ID(i))
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == Pending {
			t.Errorf("task %d still pending", i)
			continue
		}
		if r := runs[i].Load(); r > 1 {
			t.Errorf("task %d's callable ran %d times", i, r)
		}
		for r, g := range got[i] {
			if g.v != o.Value || g.err != o.Err {
				t.Errorf("task %d resolver %d got (%d, %v), task ended %+v", i, r, g.v, g.err, o)
			}
		}
		if o.Status == Cancelled && !errors.Is(o.Err, ErrCancelled) {
			t.Errorf("task %d cancelled with %v", i, o.Err)
		}
	}
}
