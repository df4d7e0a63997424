package task

import (
	"context"
	"testing"
)

// TestEmptyGroupJoinsReturnEmptyResults: All and AllSettled over no tasks
// have every result at once: an empty, non-nil slice and no error, even
// when ctx has already ended (there is nothing to wait for), and with
// other tasks registered (they are not touched: none is started).
func TestEmptyGroupJoinsReturnEmptyResults(t *testing.T) {
	live, cancel := context.WithCancel(t.Context())
	ended, end := context.WithCancel(t.Context())
	end()
	defer cancel()
	var ts Scheduler[int]
	started := false
	if err := ts.Register(1, func(context.Context) (int, error) { started = true; return 1, nil }); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"live ctx": live, "ended ctx": ended} {
		vals, err := ts.All(ctx)
		if err != nil || vals == nil || len(vals) != 0 {
			t.Errorf("%s: All() = %#v, %v; want an empty slice, nil", name, vals, err)
		}
		outs, err := ts.AllSettled(ctx, []ID{}...)
		if err != nil || outs == nil || len(outs) != 0 {
			t.Errorf("%s: AllSettled() = %#v, %v; want an empty slice, nil", name, outs, err)
		}
	}
	if out, err := ts.Status(1); err != nil || started || out.Status != Pending {
		t.Fatalf("an empty join touched task 1: started %v, status %v, %v", started, out.Status, err)
	}
}
