package pass_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/sched/task"
	"github.com/shmkit/shmkit/shm"
)

// Five passes, awaited together with All. The workers would normally run
// in other processes (Start with Workers > 0 there, same paths and closure
// ids); here one process plays both parts.
func ExampleTasks() {
	base := filepath.Join(shm.DefaultDir, "shmkit-example-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(base + "-submit")
	defer os.Remove(base + "-result")
	defer os.Remove(base + "-hb")

	reg := pass.NewRegistry()
	reg.Register(1, func(ctx context.Context, args []byte) ([]byte, error) { return append([]byte("hello "), args...), nil })
	s, err := pass.Start(pass.Config{
		SubmitPath: base + "-submit", ResultPath: base + "-result", HeartbeatPath: base + "-hb",
		Workers: 2, Registry: reg,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop(context.Background())

	pt := pass.NewTasks(s)
	defer pt.Close()
	ctx := context.Background()
	var ids []task.ID
	for i := 0; i < 5; i++ {
		id, _ := pt.Submit(ctx, 1, []byte(strconv.Itoa(i)))
		ids = append(ids, id)
	}
	results, err := pt.Tasks.All(ctx, ids...)
	for _, r := range results {
		fmt.Println(string(r))
	}
	fmt.Println(err)
	// Output:
	// hello 0
	// hello 1
	// hello 2
	// hello 3
	// hello 4
	// <nil>
}
