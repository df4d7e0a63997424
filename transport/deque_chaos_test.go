package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
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

const dequeChaosHelper = "TestDequeChaosHelperProcess"

// TestDequeChaosHelperProcess is the child side of TestDequeChaos. Roles:
//
//	dchaos-owner  adopt, then push ids FIRST, FIRST+1, ... (and pop one
//	              back now and then) until the file STOP_PRODUCERS exists
//	dchaos-thief  claim+ack (MODE=claim) or a mix of claims and plain
//	              steals (MODE=mixed) until the file STOP_CONSUMERS exists
func TestDequeChaosHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || !strings.HasPrefix(role, "dchaos-") {
		return
	}
	code := 0
	if err := dequeChaosChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "ERR child:", err)
		code = 1
	}
	os.Exit(code)
}

func dequeChaosChild(role string) error {
	d, err := OpenDeque(os.Getenv("SHMKIT_TEST_PATH"))
	if err != nil {
		return err
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	envU := func(k string) uint64 { v, _ := strconv.ParseUint(os.Getenv(k), 10, 64); return v }
	rng := rand.New(rand.NewPCG(envU("CHILD_SEED"), uint64(os.Getpid())))
	buf := make([]byte, d.MaxPayload())
	switch role {
	case "dchaos-owner":
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
		s, pace := envU("FIRST"), int(envU("PACE"))
		stop := os.Getenv("STOP_PRODUCERS")
		for i := 0; ; i, s = i+1, s+1 {
			if i%16 == 0 && exists(stop) {
				break
			}
			if pace > 0 && i%pace == 0 {
				time.Sleep(time.Millisecond)
			}
			fmt.Printf("pushing 0 %d\n", s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := d.Push(ctx, encodeMsg(s))
			cancel()
			if err != nil {
				return fmt.Errorf("push %d: %w", s, err)
			}
			fmt.Printf("ok 0 %d\n", s)
			if rng.IntN(4) == 0 {
				fmt.Printf("popping %d\n", shm.MonoNow())
				n, err := d.TryPop(buf)
				if errors.Is(err, ErrEmpty) {
					continue
				}
				if err != nil {
					return fmt.Errorf("pop: %w", err)
				}
				logTaken(buf[:n], 0, "p")
			}
		}
	case "dchaos-thief":
		mixed := os.Getenv("MODE") == "mixed"
		stop := os.Getenv("STOP_CONSUMERS")
		for i := 0; ; i++ {
			if i%16 == 0 && exists(stop) {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			if mixed && rng.IntN(3) == 0 {
				fmt.Printf("popping %d\n", shm.MonoNow())
				n, err := d.Steal(ctx, buf)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					i = 15 // look at the stop file
					continue
				}
				if err != nil {
					return fmt.Errorf("steal: %w", err)
				}
				logTaken(buf[:n], 0, "p")
				continue
			}
			fmt.Printf("claiming %d\n", shm.MonoNow())
			l, err := d.Claim(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				i = 15
				continue
			}
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			id, ok := logTaken(l.Data(), l.Deliveries, "c")
			// Sometimes hold the lease a while, so kills find leases in
			// flight and the owner burns past them.
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			if ok {
				fmt.Printf("acking %d %d\n", id>>32, id&(1<<32-1))
			}
			if err := d.Ack(l); err != nil {
				return fmt.Errorf("ack %d: %w", id, err)
			}
			if ok {
				fmt.Printf("acked %d %d\n", id>>32, id&(1<<32-1))
			}
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return d.Close()
}

// logTaken prints the harness's "got" line for a message (or "BAD").
func logTaken(b []byte, deliveries int, kind string) (uint64, bool) {
	id, err := decodeMsg(b)
	if err != nil {
		fmt.Printf("BAD %x\n", b)
		return 0, false
	}
	fmt.Printf("got %d %d %d %s %d\n", id>>32, id&(1<<32-1), deliveries, kind, shm.MonoNow())
	return id, true
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
		helper: dequeChaosHelper, producerRole: "dchaos-owner", consumerRole: "dchaos-thief",
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
		repair: func() (bool, error) {
			rep, err := d.Repair()
			if errors.Is(err, ErrRepairBusy) {
				err = nil
			}
			return rep.Changed(), err
		},
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
	for _, p := range d.Peers() {
		if p.State != "free" && !p.Self {
			t.Errorf("participant %d left %s (%s, %s)", p.Index, p.State, p.ID, p.Reason)
		}
	}
	c := d.Counters()
	if d.Len() != 0 || c.Pending != 0 {
		t.Errorf("after the drain: len %d, %+v", d.Len(), c)
	}
	if err := d.TryPush(encodeMsg(7)); err != nil {
		t.Errorf("deque unusable at the end: %v", err)
	} else if got := drainDeque(t, d); len(got) != 1 || got[0] != 7 {
		t.Errorf("deque unusable at the end: drained %v", got)
	}
	t.Logf("%d kills and %d crash points (%d inside a deque call, %d inside a pop), %d instances, %d promised, %d distinct delivered, %d drained at the end, %d repairs that changed something; counters %+v",
		run.kills, run.crashes, tally.inCallKills, tally.popKills, len(run.instances), tally.promised, tally.distinct, len(drained), run.repair, c)
	if t.Failed() || os.Getenv("SHMKIT_CHAOS_VERBOSE") != "" {
		t.Logf("kills: %v", run.killLog)
	}
}
