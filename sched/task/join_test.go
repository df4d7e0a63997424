package task

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTaskJoinAllSeed(t *testing.T) {
	var ts Scheduler[float64]
	var calls atomic.Int32
	_ = ts.Register(1, taskValue(1.0, &calls))
	_ = ts.Register(2, taskValue(2.0, &calls))
	vals, err := ts.All(t.Context(), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vals, []float64{1, 2}) {
		t.Fatalf("All = %v, want [1 2]", vals)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d callables ran, want 2", n)
	}
}

func TestTaskJoinRaceSeed(t *testing.T) {
	var ts Scheduler[float64]
	_ = ts.Register(10, taskValue(7.0, nil))
	_ = ts.Register(20, taskValue(7.0, nil))
	id, v, err := ts.Race(t.Context(), 10, 20)
	if err != nil || v != 7 || (id != 10 && id != 20) {
		t.Fatalf("Race = %d, %v, %v", id, v, err)
	}
}

// TestTaskJoinEmptyGroup: Race and Any have no winner in an empty group
// (All and AllSettled: empty_group_joins_return_empty_results_test.go).
func TestTaskJoinEmptyGroup(t *testing.T) {
	var ts Scheduler[int]
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Race": func() error { _, _, err := ts.Race(ctx); return err },
		"Any":  func() error { _, _, err := ts.Any(ctx); return err },
	} {
		if err := call(); !errors.Is(err, ErrEmptyGroup) {
			t.Errorf("%s(): %v, want ErrEmptyGroup", name, err)
		}
	}
}

// TestTaskJoinRunsConcurrently would deadlock if a join ran its tasks one
// after another: each task waits until all of them have started.
func TestTaskJoinRunsConcurrently(t *testing.T) {
	const n = 8
	joins := map[string]func(ctx context.Context, ts *Scheduler[int], ids []ID) error{
		"All": func(ctx context.Context, ts *Scheduler[int], ids []ID) error {
			_, err := ts.All(ctx, ids...)
			return err
		},
		"AllSettled": func(ctx context.Context, ts *Scheduler[int], ids []ID) error {
			_, err := ts.AllSettled(ctx, ids...)
			return err
		},
	}
	for name, join := range joins {
		t.Run(name, func(t *testing.T) {
			var ts Scheduler[int]
			var started sync.WaitGroup
			started.Add(n)
			ids := make([]ID, n)
			for i := range n {
				ids[i] = ID(i)
				_ = ts.Register(ids[i], func(context.Context) (int, error) {
					started.Done()
					started.Wait()
					return i, nil
				})
			}
			ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
			defer cancel()
			if err := join(ctx, &ts, ids); err != nil {
				t.Fatalf("%s: %v (tasks did not run concurrently?)", name, err)
			}
		})
	}
}

func TestTaskJoinAll(t *testing.T) {
	boom := errors.New("boom")
	t.Run("order", func(t *testing.T) {
		var ts Scheduler[int]
		// Later tasks finish first; results still come in group order.
		for i := range 5 {
			_ = ts.Register(ID(i), func(context.Context) (int, error) {
				time.Sleep(time.Duration(5-i) * 2 * time.Millisecond)
				return i * 10, nil
			})
		}
		vals, err := ts.All(t.Context(), 0, 1, 2, 3, 4)
		if err != nil || !slices.Equal(vals, []int{0, 10, 20, 30, 40}) {
			t.Fatalf("All = %v, %v", vals, err)
		}
	})
	t.Run("first error", func(t *testing.T) {
		var ts Scheduler[int]
		slow := newTaskBlocker()
		defer close(slow.release)
		_ = ts.Register(1, slow.fn(1))
		_ = ts.Register(2, func(context.Context) (int, error) { return 0, boom })
		vals, err := ts.All(t.Context(), 1, 2)
		if !errors.Is(err, boom) || vals != nil {
			t.Fatalf("All = %v, %v; want boom", vals, err)
		}
		var te *Error
		if !errors.As(err, &te) || te.ID != 2 {
			t.Fatalf("error %v does not name task 2", err)
		}
		// All cancels nothing: the slow task is still running.
		mustTaskStatus(t, &ts, 1, Pending)
	})
	t.Run("already resolved", func(t *testing.T) {
		var ts Scheduler[int]
		var runs atomic.Int32
		_ = ts.Register(1, taskValue(1, &runs))
		_ = ts.Register(2, taskValue(2, &runs))
		if _, err := ts.Resolve(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		c, _ := ts.RegisterExternal(3)
		_ = c.Complete(3)
		vals, err := ts.All(t.Context(), 1, 2, 3, 1)
		if err != nil || !slices.Equal(vals, []int{1, 2, 3, 1}) {
			t.Fatalf("All = %v, %v", vals, err)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("callables ran %d times, want 2", n)
		}
	})
	t.Run("cancelled member", func(t *testing.T) {
		var ts Scheduler[int]
		_ = ts.Register(1, taskValue(1, nil))
		_ = ts.Register(2, taskValue(2, nil))
		_ = ts.Cancel(2)
		_, err := ts.All(t.Context(), 1, 2)
		if !errors.Is(err, ErrCancelled) {
			t.Fatalf("All with a cancelled task: %v, want ErrCancelled", err)
		}
		if strings.Count(err.Error(), "task 2") != 1 {
			t.Fatalf("error %q should name task 2 once", err)
		}
	})
	t.Run("dropped completer", func(t *testing.T) {
		var ts Scheduler[int]
		c, _ := ts.RegisterExternal(1)
		go c.Release()
		ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
		defer cancel()
		if _, err := ts.All(ctx, 1); !errors.Is(err, ErrCompleterDropped) {
			t.Fatalf("All: %v, want ErrCompleterDropped", err)
		}
	})
}

// TestTaskJoinRaceFastSlow races a fast task against one that would take
// 10 s: the race returns in about the fast one's time and the slow one's
// context is cancelled. Only a generous upper bound is asserted.
func TestTaskJoinRaceFastSlow(t *testing.T) {
	var ts Scheduler[string]
	slowCause := make(chan error, 1)
	_ = ts.Register(1, func(ctx context.Context) (string, error) {
		select {
		case <-time.After(10 * time.Second):
			return "slow", nil
		case <-ctx.Done():
			slowCause <- context.Cause(ctx)
			return "", ctx.Err()
		}
	})
	_ = ts.Register(2, func(ctx context.Context) (string, error) {
		time.Sleep(10 * time.Millisecond)
		return "fast", nil
	})
	start := time.Now()
	id, v, err := ts.Race(t.Context(), 1, 2)
	elapsed := time.Since(start)
	if err != nil || id != 2 || v != "fast" {
		t.Fatalf("Race = %d, %q, %v; want 2, fast", id, v, err)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("Race took %v: it waited for the slow task", elapsed)
	}
	select {
	case cause := <-slowCause:
		if !errors.Is(cause, ErrCancelled) || !strings.Contains(cause.Error(), "lost a Race to task 2") {
			t.Fatalf("slow task's context cause = %v", cause)
		}
	case <-time.After(taskWaitLong / 2):
		t.Fatal("the slow task's context was not cancelled")
	}
	o := mustTaskStatus(t, &ts, 1, Cancelled)
	if !errors.Is(o.Err, ErrCancelled) {
		t.Fatalf("loser's error = %v", o.Err)
	}
	if _, err := ts.Resolve(t.Context(), 1); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Resolve of the loser: %v, want ErrCancelled", err)
	}
}

func TestTaskJoinRace(t *testing.T) {
	boom := errors.New("boom")
	t.Run("failure wins", func(t *testing.T) {
		var ts Scheduler[int]
		slow := newTaskBlocker()
		_ = ts.Register(1, slow.fn(1))
		_ = ts.Register(2, func(context.Context) (int, error) { return 0, boom })
		id, _, err := ts.Race(t.Context(), 1, 2)
		if id != 2 || err != boom {
			t.Fatalf("Race = %d, %v; want 2, boom", id, err)
		}
		recvTask(t, slow.cancelled, "loser cancellation")
		mustTaskStatus(t, &ts, 1, Cancelled)
	})
	t.Run("already resolved wins in taskGroup order", func(t *testing.T) {
		var ts Scheduler[int]
		_ = ts.Register(1, taskValue(1, nil))
		_ = ts.Register(2, taskValue(2, nil))
		_, _ = ts.Resolve(t.Context(), 1)
		_, _ = ts.Resolve(t.Context(), 2)
		slow := newTaskBlocker()
		_ = ts.Register(3, slow.fn(3))
		id, v, err := ts.Race(t.Context(), 3, 2, 1)
		if id != 2 || v != 2 || err != nil {
			t.Fatalf("Race = %d, %d, %v; want the first resolved task in taskGroup order, 2", id, v, err)
		}
		// The pending loser is cancelled; the resolved loser keeps its value.
		recvTask(t, slow.cancelled, "loser cancellation")
		mustTaskStatus(t, &ts, 3, Cancelled)
		mustTaskStatus(t, &ts, 1, Completed)
	})
	t.Run("cancelled member wins", func(t *testing.T) {
		var ts Scheduler[int]
		slow := newTaskBlocker()
		defer close(slow.release)
		_ = ts.Register(1, slow.fn(1))
		_ = ts.Register(2, taskValue(2, nil))
		_ = ts.Cancel(2)
		id, _, err := ts.Race(t.Context(), 1, 2)
		if id != 2 || !errors.Is(err, ErrCancelled) {
			t.Fatalf("Race = %d, %v; want the cancelled task 2", id, err)
		}
	})
	t.Run("external loser", func(t *testing.T) {
		var ts Scheduler[int]
		c, _ := ts.RegisterExternal(1)
		_ = ts.Register(2, taskValue(2, nil))
		id, v, err := ts.Race(t.Context(), 1, 2)
		if id != 2 || v != 2 || err != nil {
			t.Fatalf("Race = %d, %d, %v", id, v, err)
		}
		recvTask(t, c.Done(), "external loser's Done")
		err = c.Complete(1)
		if !errors.Is(err, ErrAlreadyResolved) || !errors.Is(err, ErrCancelled) {
			t.Fatalf("Complete of a cancelled loser: %v, want ErrAlreadyResolved and ErrCancelled", err)
		}
		if !strings.Contains(err.Error(), "lost a Race to task 2") {
			t.Fatalf("error %q does not say the task lost a race", err)
		}
		mustTaskStatus(t, &ts, 1, Cancelled)
	})
	t.Run("same id twice", func(t *testing.T) {
		var ts Scheduler[int]
		_ = ts.Register(1, taskValue(1, nil))
		id, v, err := ts.Race(t.Context(), 1, 1)
		if id != 1 || v != 1 || err != nil {
			t.Fatalf("Race = %d, %d, %v", id, v, err)
		}
		mustTaskStatus(t, &ts, 1, Completed)
	})
}

func TestTaskJoinAny(t *testing.T) {
	boom := errors.New("boom")
	t.Run("first success after failures", func(t *testing.T) {
		var ts Scheduler[int]
		slow := newTaskBlocker()
		_ = ts.Register(1, func(context.Context) (int, error) { return 0, boom })
		_ = ts.Register(2, slow.fn(2))
		done1, _ := ts.Done(1)
		_ = ts.Register(3, func(context.Context) (int, error) {
			<-done1 // succeed only after task 1 has failed
			return 3, nil
		})
		id, v, err := ts.Any(t.Context(), 1, 2, 3)
		if id != 3 || v != 3 || err != nil {
			t.Fatalf("Any = %d, %d, %v; want 3, 3", id, v, err)
		}
		recvTask(t, slow.cancelled, "loser cancellation")
		if !strings.Contains(slow.cause.Error(), "task 3 won an Any") {
			t.Fatalf("loser's cause = %v", slow.cause)
		}
		mustTaskStatus(t, &ts, 1, Failed) // resolved losers stay as they are
		mustTaskStatus(t, &ts, 2, Cancelled)
	})
	t.Run("all fail: last error", func(t *testing.T) {
		var ts Scheduler[int]
		first, last := errors.New("first"), errors.New("last")
		_ = ts.Register(1, func(context.Context) (int, error) { return 0, first })
		done1, _ := ts.Done(1)
		_ = ts.Register(2, func(context.Context) (int, error) { <-done1; return 0, last })
		c, _ := ts.RegisterExternal(3)
		c.Release() // counts as a failure
		id, _, err := ts.Any(t.Context(), 2, 1, 3)
		if id != 2 || err != last {
			t.Fatalf("Any = %d, %v; want 2, last", id, err)
		}
	})
	t.Run("already resolved success", func(t *testing.T) {
		var ts Scheduler[int]
		_ = ts.Register(1, func(context.Context) (int, error) { return 0, boom })
		_ = ts.Register(2, taskValue(2, nil))
		_, _ = ts.Resolve(t.Context(), 1)
		_, _ = ts.Resolve(t.Context(), 2)
		c, _ := ts.RegisterExternal(3)
		id, v, err := ts.Any(t.Context(), 1, 3, 2)
		if id != 2 || v != 2 || err != nil {
			t.Fatalf("Any = %d, %d, %v", id, v, err)
		}
		if err := c.Complete(3); !errors.Is(err, ErrCancelled) {
			t.Fatalf("Complete of the external loser: %v, want ErrCancelled", err)
		}
	})
}

func TestTaskJoinAllSettled(t *testing.T) {
	var ts Scheduler[int]
	boom := errors.New("boom")
	_ = ts.Register(1, taskValue(10, nil))
	_ = ts.Register(2, func(context.Context) (int, error) { return 0, boom })
	_ = ts.Register(3, taskValue(30, nil))
	_ = ts.Cancel(3)
	c4, _ := ts.RegisterExternal(4)
	c5, _ := ts.RegisterExternal(5)
	go func() { _ = c4.Complete(40) }()
	go c5.Release()
	ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
	defer cancel()
	outs, err := ts.AllSettled(ctx, 1, 2, 3, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		st    Status
		v     int
		errIs error
	}{
		{Completed, 10, nil},
		{Failed, 0, boom},
		{Cancelled, 0, ErrCancelled},
		{Completed, 40, nil},
		{Cancelled, 0, ErrCompleterDropped},
	}
	for i, w := range want {
		o := outs[i]
		if o.ID != ID(i+1) || o.Status != w.st || o.Value != w.v || !errors.Is(o.Err, w.errIs) || (w.errIs == nil) != (o.Err == nil) {
			t.Errorf("outcome %d = %+v, want %+v", i, o, w)
		}
	}
}

func TestTaskJoinContextEnds(t *testing.T) {
	joins := map[string]func(ctx context.Context, ts *Scheduler[int]) error{
		"All":        func(ctx context.Context, ts *Scheduler[int]) error { _, err := ts.All(ctx, 1, 2); return err },
		"Race":       func(ctx context.Context, ts *Scheduler[int]) error { _, _, err := ts.Race(ctx, 1, 2); return err },
		"Any":        func(ctx context.Context, ts *Scheduler[int]) error { _, _, err := ts.Any(ctx, 1, 2); return err },
		"AllSettled": func(ctx context.Context, ts *Scheduler[int]) error { _, err := ts.AllSettled(ctx, 1, 2); return err },
	}
	for name, join := range joins {
		t.Run(name, func(t *testing.T) {
			var ts Scheduler[int]
			b := newTaskBlocker()
			_ = ts.Register(1, b.fn(1))
			c, _ := ts.RegisterExternal(2)
			defer c.Release()
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-b.started; cancel() }()
			if err := join(ctx, &ts); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v, want context.Canceled", name, err)
			}
			// Nothing was decided, so nothing was cancelled.
			mustTaskStatus(t, &ts, 1, Pending)
			mustTaskStatus(t, &ts, 2, Pending)
			close(b.release)
			if v, err := ts.Resolve(t.Context(), 1); v != 1 || err != nil {
				t.Fatalf("Resolve after the join gave up = %d, %v", v, err)
			}
		})
	}
}
