package gather_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/shmkit/shmkit/sched/gather"
)

// Three participants (goroutines here, processes in practice) exchange
// words through a shared-memory all-gather file.
func ExampleGroup() {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("example-allgather-%d", os.Getpid()))
	defer os.Remove(path)
	ag, err := gather.Create(path, gather.Config{Participants: 3, MaxWords: 4})
	if err != nil {
		panic(err)
	}
	defer ag.Close()
	results := make([][]uint32, 3)
	var wg sync.WaitGroup
	for rank := 0; rank < 3; rank++ {
		m, err := ag.Join(rank)
		if err != nil {
			panic(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := m.AllGather(nil, []uint32{uint32(rank), uint32(rank * rank)})
			if err != nil {
				panic(err)
			}
			results[rank] = out
		}()
	}
	wg.Wait()
	fmt.Println(results[0])
	fmt.Println(results[2])
	// Output:
	// [0 0 1 1 2 4]
	// [0 0 1 1 2 4]
}
