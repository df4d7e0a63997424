package pass

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/task"
)

// TestPassTasksAllAcrossProcesses: All over passes executed by worker
// processes, through tasks.
func TestPassTasksAllAcrossProcesses(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0))
	startWorkers(t, f, 2)
	pt := NewTasks(s)
	defer pt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []task.ID
	for i := 0; i < 5; i++ {
		id, err := pt.Submit(ctx, closureEcho, []byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	results, err := pt.Tasks.All(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if string(r) != strconv.Itoa(i) {
			t.Fatalf("result %d = %q", i, r)
		}
	}
	// A failing pass fails the All with the pass's error.
	bad, _ := pt.Submit(ctx, closureFail, []byte("x"))
	good, _ := pt.Submit(ctx, closureEcho, []byte("y"))
	if _, err := pt.Tasks.All(ctx, good, bad); !errors.Is(err, ErrFailed) {
		t.Fatalf("All with a failing pass: %v", err)
	}
}

func TestPassTasksCloseCancelsWaiting(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0)) // no workers: nothing completes
	pt := NewTasks(s)
	id, err := pt.Submit(context.Background(), closureEcho, nil)
	if err != nil {
		t.Fatal(err)
	}
	pt.Close()
	if _, err := pt.Tasks.Resolve(context.Background(), id); !errors.Is(err, task.ErrCancelled) {
		t.Fatalf("waiting task after Close: %v", err)
	}
}
