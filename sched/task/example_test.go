package task_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shmkit/shmkit/sched/task"
)

// All over external tasks: each is completed by its own goroutine, in
// whatever order they finish, and All returns the values in group order.
func ExampleScheduler_All() {
	var tasks task.Scheduler[string]
	ids := []task.ID{1, 2, 3}
	for _, id := range ids {
		c, err := tasks.RegisterExternal(id)
		if err != nil {
			panic(err)
		}
		go func() {
			defer c.Release() // cancels the task if we return without a result
			time.Sleep(time.Duration(4-id) * time.Millisecond)
			_ = c.Complete(fmt.Sprintf("result %d", id))
		}()
	}
	vals, err := tasks.All(context.Background(), ids...)
	fmt.Println(vals, err)
	// Output: [result 1 result 2 result 3] <nil>
}

// Race returns the first task to finish and cancels the others: here the
// external task loses, and its completer's late delivery is refused.
func ExampleScheduler_Race() {
	var tasks task.Scheduler[int]
	_ = tasks.Register(1, func(ctx context.Context) (int, error) { return 42, nil })
	slow, _ := tasks.RegisterExternal(2)

	id, v, err := tasks.Race(context.Background(), 1, 2)
	fmt.Println(id, v, err)

	err = slow.Complete(7)
	fmt.Println(errors.Is(err, task.ErrCancelled))
	o, _ := tasks.Status(2)
	fmt.Println(o.Status)
	// Output:
	// 1 42 <nil>
	// true
	// cancelled
}

// Resolve runs a task's callable once and caches the result.
func ExampleScheduler_Resolve() {
	var tasks task.Scheduler[int]
	runs := 0
	_ = tasks.Register(7, func(ctx context.Context) (int, error) { runs++; return 6 * 7, nil })
	for range 2 {
		v, err := tasks.Resolve(context.Background(), 7)
		fmt.Println(v, err)
	}
	fmt.Println("runs:", runs)
	// Output:
	// 42 <nil>
	// 42 <nil>
	// runs: 1
}
