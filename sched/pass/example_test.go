package pass_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/shm"
)

// Submit a pass and await its result. The pool would normally run in other
// processes (NewPool there, with the same paths and closure ids), and any
// number of clients in any processes share it, each receiving the results
// of its own passes; here one process plays both parts.
func Example() {
	dir, _ := os.MkdirTemp(shm.DefaultDir, "shmkit-example-")
	defer os.RemoveAll(dir)
	shared := pass.Shared{SubmitPath: filepath.Join(dir, "submit"), HeartbeatPath: filepath.Join(dir, "hb")}

	reg := pass.NewRegistry()
	reg.Register(1, func(ctx context.Context, args []byte) ([]byte, error) { return append([]byte("hello "), args...), nil })
	pool, err := pass.NewPool(pass.PoolConfig{Shared: shared, Registry: reg})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Stop(context.Background())

	client, err := pass.NewClient(pass.ClientConfig{Shared: shared})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	ctx := context.Background()
	h, err := client.Submit(ctx, 1, []byte("world"))
	if err != nil {
		fmt.Println(err)
		return
	}
	result, err := h.Wait(ctx)
	fmt.Println(string(result), err)
	// Output: hello world <nil>
}

// Five passes awaited together with All (Race, Any and AllSettled work
// the same way; Race and Any cancel the losers, in whichever process they
// run).
func ExampleClient_All() {
	dir, _ := os.MkdirTemp(shm.DefaultDir, "shmkit-example-")
	defer os.RemoveAll(dir)
	shared := pass.Shared{SubmitPath: filepath.Join(dir, "submit"), HeartbeatPath: filepath.Join(dir, "hb")}

	reg := pass.NewRegistry()
	reg.Register(1, func(ctx context.Context, args []byte) ([]byte, error) { return append([]byte("hello "), args...), nil })
	pool, err := pass.NewPool(pass.PoolConfig{Shared: shared, Workers: 2, Registry: reg})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Stop(context.Background())
	client, err := pass.NewClient(pass.ClientConfig{Shared: shared})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	ctx := context.Background()
	var hs []*pass.Handle
	for i := 0; i < 5; i++ {
		h, err := client.Submit(ctx, 1, []byte(strconv.Itoa(i)))
		if err != nil {
			fmt.Println(err)
			return
		}
		hs = append(hs, h)
	}
	results, err := client.All(ctx, hs...)
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
