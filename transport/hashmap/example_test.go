package hashmap_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/hashmap"
)

func ExampleMap() {
	// A bare name lives in /dev/shm. Other processes open it with
	// Open and see the same entries.
	name := fmt.Sprintf("shmkit-example-hashmap-%d", os.Getpid())
	m, err := hashmap.Create(name, hashmap.Config{Capacity: 64, KeySize: 32, ValueSize: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer shm.Remove(name)
	defer m.Close()

	inserted, err := m.Put([]byte("alice"), []byte("worker-3"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inserted:", inserted)
	inserted, _ = m.Put([]byte("alice"), []byte("worker-7")) // replaces the value
	fmt.Println("inserted:", inserted)

	buf := make([]byte, m.ValueSize())
	n, err := m.Get([]byte("alice"), buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("alice:", string(buf[:n]))

	if err := m.Delete([]byte("alice")); err != nil {
		log.Fatal(err)
	}
	_, err = m.Get([]byte("alice"), buf)
	fmt.Println("after delete:", errors.Is(err, transport.ErrNotFound), m.Len())
	// Output:
	// inserted: true
	// inserted: false
	// alice: worker-7
	// after delete: true 0
}
