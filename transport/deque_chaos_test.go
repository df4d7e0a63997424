package transport

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// The deque's multi-process chaos test, on the harness of
// chaos_harness_test.go: an owner process (pushing, and popping some of
// its work back at the bottom) and three thieves (leasing, or stealing
// plainly), all SIGKILLed at random; each new owner adopts the deque of
// the one killed before it.

var dequeChaosHelper = proctest.Helper{Test: "TestDequeChaosHelperProcess", Prefix: "dchaos-"}

// TestDequeChaosHelperProcess is the child side of TestDequeChaos. Roles:
//
//	dchaos-owner  adopt, then push ids FIRST, FIRST+1, ... (and pop one
//	              back now and then) until the file STOP_PRODUCERS exists
//	dchaos-thief  claim+ack (MODE=claim) or a mix of claims and plain
//	              steals (MODE=mixed) until the file STOP_CONSUMERS exists
func TestDequeChaosHelperProcess(t *testing.T) { dequeChaosHelper.Serve(dequeChaosChild) }

func dequeChaosChild(role string) error {
	d, err := OpenDeque(proctest.EnvPath())
	if err != nil {
		return err
	}
	rng := proctest.ChildRand()
	switch role {
	case "owner":
		// The previous owner was SIGKILLed: until the kernel has torn it
		// down (or a repair has freed the role) it may still count as
		// alive.
		for deadline := time.Now().Add(20 * time.Second); ; {
			_, err := d.Adopt()
			if err == nil {
				break
			}
			if (!errors.Is(err, ErrOwnerAlive) && !errors.Is(err, ErrRepairBusy)) || time.Now().After(deadline) {
				return fmt.Errorf("adopt: %w", err)
			}
			time.Sleep(time.Millisecond)
		}
		buf := make([]byte, d.MaxPayload())
		err = chaosProduce(d.Push, 0, func() error {
			if rng.IntN(4) != 0 {
				return nil
			}
			fmt.Printf("popping %d\n", shm.MonoNow())
			n, err := d.TryPop(buf)
			if errors.Is(err, ErrEmpty) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("pop: %w", err)
			}
			logTaken(buf[:n], 0, "p")
			return nil
		})
	case "thief":
		err = chaosConsume(d, rng, d.Steal, "steal")
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	return d.Close()
}

var (
	dequeChaosOwnerPoints = []string{crashDequePushAfterClaim, crashDequePushAfterWrite, crashDequePushAfterPublish,
		crashDequePushAfterBurn, crashDequePushAfterRepublish, crashDequePopAfterAnnounce, crashDequePopAfterTake,
		crashDequePopAfterCopy, crashDequeAdoptAfterFixBottom, peers.CrashPeersAttachAfterClaimEntry}
	dequeChaosThiefPoints = []string{crashDequeStealAfterTake, crashDequeStealAfterAdvance, crashDequeStealAfterCopy,
		crashDequeAckBeforeFree, crashDequeRepairAfterFixBottom, peers.CrashPeersAttachAfterClaimEntry}
)

func TestDequeChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped with -short")
	}
	rng := chaosSeed(t)
	chaosFor, pace := 4*time.Second, 8
	if proctest.RaceEnabled {
		chaosFor, pace = 3*time.Second, 2
	}
	d := newDeque(t, DequeConfig{Capacity: 64})
	if err := d.Disown(); err != nil { // the first owner child adopts it
		t.Fatal(err)
	}
	const producers, consumers = 1, 3
	run := runChaos(t, rng, chaosConfig{
		helper: dequeChaosHelper, producerRole: "owner", consumerRole: "thief",
		producers: producers, consumers: consumers, path: d.Path(),
		env: func(slot, gen int) []string {
			switch {
			case slot < producers:
				return []string{"FIRST=" + strconv.Itoa(gen*1_000_000), "PACE=" + strconv.Itoa(pace)}
			case slot == producers+consumers-1:
				return []string{"MODE=mixed"}
			}
			return []string{"MODE=claim"}
		},
		producerPoints: dequeChaosOwnerPoints, consumerPoints: dequeChaosThiefPoints,
		repair:   chaosRepair(d),
		chaosFor: chaosFor,
	})

	// The parent adopts what the last owner left and drains everything.
	if _, err := d.Repair(); err != nil {
		t.Fatalf("final repair: %v", err)
	}
	if _, err := d.Adopt(); err != nil {
		t.Fatalf("final adopt: %v", err)
	}
	var drained []uint64
	buf := make([]byte, d.MaxPayload())
	take := func(n int, err error) bool {
		if errors.Is(err, ErrEmpty) {
			return false
		}
		if err != nil {
			t.Fatalf("final drain: %v", err)
		}
		id, err := decodeMsg(buf[:n])
		if err != nil {
			t.Errorf("final drain: %v", err)
		} else {
			drained = append(drained, id)
		}
		return true
	}
	for take(d.TryPop(buf)) {
	}
	for take(d.TakeReturned(buf)) {
	}
	for {
		n, _, err := d.TakePoisoned(buf)
		if !take(n, err) {
			break
		}
	}
	scan := d.Scan()
	for _, sl := range scan.Slots {
		if sl.Word.State != 0 {
			t.Errorf("slot left after the drain: %+v", sl)
		}
	}
	tally := run.check(t, drained)
	checkOnlySelfAttached(t, d.Peers())
	c := d.Counters()
	if d.Len() != 0 || c.Pending != 0 {
		t.Errorf("after the drain: len %d, %+v", d.Len(), c)
	}
	if err := d.TryPush(encodeMsg(7)); err != nil {
		t.Errorf("deque unusable at the end: %v", err)
	} else if got := drainDeque(t, d); len(got) != 1 || got[0] != 7 {
		t.Errorf("deque unusable at the end: drained %v", got)
	}
	run.log(t, "deque", tally, len(drained), c)
}
