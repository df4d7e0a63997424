package transport_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

func ExampleRing() {
	// A bare name lives in /dev/shm. Other processes open it with OpenRing.
	name := fmt.Sprintf("shmkit-example-%d", os.Getpid())
	r, err := transport.CreateRing(name, transport.RingConfig{Capacity: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer shm.Remove(name)
	defer r.Close()

	for _, msg := range []string{"one", "two", "three"} {
		if err := r.TryPush([]byte(msg)); err != nil {
			log.Fatal(err)
		}
	}
	buf := make([]byte, r.MaxPayload())
	for {
		n, err := r.TryPop(buf)
		if errors.Is(err, transport.ErrEmpty) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(buf[:n]))
	}
	// Output:
	// one
	// two
	// three
}

func ExampleRing_Claim() {
	name := fmt.Sprintf("shmkit-example-jobs-%d", os.Getpid())
	r, err := transport.CreateRing(name, transport.RingConfig{Capacity: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer shm.Remove(name)
	defer r.Close()

	if err := r.TryPush([]byte("resize image 42")); err != nil {
		log.Fatal(err)
	}
	// A lease leaves the message in the ring until Ack: if this process
	// dies first, a Repair delivers it to another consumer.
	lease, err := r.TryClaim()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (delivery %d)\n", lease.Data(), lease.Deliveries)
	if err := r.Ack(lease); err != nil {
		log.Fatal(err)
	}
	c := r.Counters()
	fmt.Println("claimed:", c.Claimed, "acked:", c.Acked)
	// Output:
	// resize image 42 (delivery 1)
	// claimed: 1 acked: 1
}

func ExampleRing_Check() {
	name := fmt.Sprintf("shmkit-example-check-%d", os.Getpid())
	r, err := transport.CreateRing(name, transport.RingConfig{Capacity: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer shm.Remove(name)
	defer r.Close()

	// Check judges every word of the file in package check's vocabulary;
	// Repair reports what it did in the same terms.
	var rep check.Report = r.Check()
	fmt.Println("clean:", rep.Clean(), "slots:", rep.Units, "planned:", len(r.PlanRepair()))
	done, err := r.Repair()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("changed:", done.Changed(), "requeued:", done.Count(check.ActionRequeue))
	// Output:
	// clean: true slots: 8 planned: 0
	// changed: false requeued: 0
}

func ExampleRing_TryPushBatch() {
	name := fmt.Sprintf("shmkit-example-batch-%d", os.Getpid())
	r, err := transport.CreateRing(name, transport.RingConfig{Capacity: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer shm.Remove(name)
	defer r.Close()

	// Five messages, room for four: four are pushed, the fifth is not.
	msgs := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}
	n, err := r.TryPushBatch(msgs)
	fmt.Println("pushed", n, err)

	// Claim them in one call, ack them in one call.
	leases := make([]transport.Lease, 8)
	n, err = r.TryClaimBatch(leases)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases[:n] {
		fmt.Print(string(l.Data()))
	}
	fmt.Println()
	if err := r.AckBatch(leases[:n]); err != nil {
		log.Fatal(err)
	}
	_, err = r.TryClaimBatch(leases)
	fmt.Println(errors.Is(err, transport.ErrEmpty))
	// Output:
	// pushed 4 <nil>
	// abcd
	// true
}
