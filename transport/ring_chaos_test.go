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

// The ring's multi-process chaos test, on the harness of
// chaos_harness_test.go (which describes the children's log lines).

const chaosHelper = "TestRingChaosHelperProcess"

// TestRingChaosHelperProcess is the child side of TestRingChaos. Roles:
//
//	chaos-producer  push ids P<<32|S for S = FIRST, FIRST+1, ... until the
//	                file STOP_PRODUCERS exists
//	chaos-consumer  claim+ack (MODE=claim) or a mix of claim and pop
//	                (MODE=mixed) until the file STOP_CONSUMERS exists
func TestRingChaosHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || !strings.HasPrefix(role, "chaos-") {
		return
	}
	code := 0
	if err := chaosChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "ERR child:", err)
		code = 1
	}
	os.Exit(code)
}

func chaosChild(role string) error {
	r, err := OpenRing(os.Getenv("SHMKIT_TEST_PATH"))
	if err != nil {
		return err
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	envU := func(k string) uint64 { v, _ := strconv.ParseUint(os.Getenv(k), 10, 64); return v }
	rng := rand.New(rand.NewPCG(envU("CHILD_SEED"), uint64(os.Getpid())))
	switch role {
	case "chaos-producer":
		p, s, pace := envU("PRODUCER"), envU("FIRST"), int(envU("PACE"))
		stop := os.Getenv("STOP_PRODUCERS")
		for i := 0; ; i, s = i+1, s+1 {
			if i%16 == 0 && exists(stop) {
				break
			}
			if pace > 0 && i%pace == 0 {
				time.Sleep(time.Millisecond)
			}
			fmt.Printf("pushing %d %d\n", p, s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := r.Push(ctx, encodeMsg(p<<32|s))
			cancel()
			if err != nil {
				return fmt.Errorf("push %d %d: %w", p, s, err)
			}
			fmt.Printf("ok %d %d\n", p, s)
		}
	case "chaos-consumer":
		mixed := os.Getenv("MODE") == "mixed"
		stop := os.Getenv("STOP_CONSUMERS")
		buf := make([]byte, r.MaxPayload())
		for i := 0; ; i++ {
			if i%16 == 0 && exists(stop) {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			if mixed && rng.IntN(3) == 0 {
				fmt.Printf("popping %d\n", shm.MonoNow())
				n, err := r.Pop(ctx, buf)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					i = 15 // look at the stop file
					continue
				}
				if err != nil {
					return fmt.Errorf("pop: %w", err)
				}
				id, err := decodeMsg(buf[:n])
				if err != nil {
					fmt.Printf("BAD %x\n", buf[:n])
					continue
				}
				fmt.Printf("got %d %d 0 p %d\n", id>>32, id&(1<<32-1), shm.MonoNow())
				continue
			}
			fmt.Printf("claiming %d\n", shm.MonoNow())
			l, err := r.Claim(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				i = 15
				continue
			}
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			id, err := decodeMsg(l.Data())
			if err != nil {
				fmt.Printf("BAD %x\n", l.Data())
			} else {
				fmt.Printf("got %d %d %d c %d\n", id>>32, id&(1<<32-1), l.Deliveries, shm.MonoNow())
			}
			// Sometimes hold the lease a while, so kills find leases in
			// flight.
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			if err == nil {
				fmt.Printf("acking %d %d\n", id>>32, id&(1<<32-1))
			}
			if err := r.Ack(l); err != nil {
				return fmt.Errorf("ack %d %d: %w", id>>32, id&(1<<32-1), err)
			}
			if err == nil {
				fmt.Printf("acked %d %d\n", id>>32, id&(1<<32-1))
			}
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return r.Close()
}

// Crash points a restarted child may be armed with, by role: besides the
// parent's random kills, these land exactly in the windows of docs/design.md.
var (
	chaosProducerPoints = []string{crashRingPushAfterClaim, crashRingPushAfterAdvance, crashRingPushAfterWrite,
		crashRingPushAfterPublish, crashRingPushAfterBurn, peers.CrashPeersAttachAfterClaimEntry}
	chaosConsumerPoints = []string{crashRingPopAfterTake, crashRingPopAfterAdvance, crashRingPopAfterCopy,
		crashRingClaimAfterTake, crashRingClaimAfterAdvance, crashRingAckBeforeFree, crashRingRepairAfterRequeue,
		peers.CrashPeersAttachAfterClaimEntry}
)

func TestRingChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped with -short")
	}
	const producers, consumers = 2, 3
	rng := chaosSeed(t)
	chaosFor, pace := 4*time.Second, 8 // pace: pushes per 1 ms pause
	if proctest.RaceEnabled {
		chaosFor, pace = 3*time.Second, 2
	}
	r := newRing(t, RingConfig{Capacity: 64})
	run := runChaos(t, rng, chaosConfig{
		helper: chaosHelper, producerRole: "chaos-producer", consumerRole: "chaos-consumer",
		producers: producers, consumers: consumers, path: r.Path(),
		env: func(slot, gen int) []string {
			switch {
			case slot < producers:
				return []string{"PRODUCER=" + strconv.Itoa(slot), "FIRST=" + strconv.Itoa(gen*1_000_000), "PACE=" + strconv.Itoa(pace)}
			case slot == producers+consumers-1:
				return []string{"MODE=mixed"}
			}
			return []string{"MODE=claim"}
		},
		producerPoints: chaosProducerPoints, consumerPoints: chaosConsumerPoints,
		repair: func() (bool, error) {
			rep, err := r.Repair()
			if errors.Is(err, ErrRepairBusy) {
				err = nil
			}
			return rep.Changed(), err
		},
		chaosFor: chaosFor,
	})

	// Repair until Scan finds nothing, draining in between: deferred
	// messages need room.
	var drained []uint64
	drainAll := func() {
		buf := make([]byte, r.MaxPayload())
		for {
			n, err := r.TryPop(buf)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				t.Fatalf("final drain: %v", err)
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				t.Errorf("final drain: %v", err)
				continue
			}
			drained = append(drained, id)
		}
		for {
			n, _, err := r.TakePoisoned(buf)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				t.Fatalf("final drain of poison: %v", err)
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				t.Errorf("final drain (poison): %v", err)
				continue
			}
			drained = append(drained, id)
		}
	}
	clean := false
	for round := 0; round < 10 && !clean; round++ {
		if _, err := r.Repair(); err != nil {
			t.Fatalf("final repair: %v", err)
		}
		drainAll()
		s := r.Scan()
		clean = s.Problems == 0 && s.Counters.Deferred == 0
		if clean {
			for _, sl := range s.Slots {
				if sl.Word.State != 0 {
					clean = false
				}
			}
		}
	}
	if !clean {
		t.Errorf("ring not clean after 10 rounds of repair and drain: %+v", r.Scan().Slots)
	}
	tally := run.check(t, drained)

	// Only the parent stays attached.
	for _, p := range r.Peers() {
		if p.State != "free" && !p.Self {
			t.Errorf("participant %d left %s (%s, %s)", p.Index, p.State, p.ID, p.Reason)
		}
	}
	c := r.Counters()
	if c.Pushed+uint64(tally.producerInCallKills) < uint64(tally.distinct) {
		t.Errorf("counters: pushed %d (+%d producers killed mid-push) < %d distinct messages delivered", c.Pushed, tally.producerInCallKills, tally.distinct)
	}
	if c.Pushed < uint64(tally.distinct) {
		t.Logf("note: pushed %d < %d distinct delivered (a producer killed between publishing and counting)", c.Pushed, tally.distinct)
	}
	if c.Depth() != 0 {
		t.Errorf("counters after the drain: depth %d (%+v)", c.Depth(), c)
	}
	if err := r.TryPush(encodeMsg(7)); err != nil {
		t.Errorf("ring unusable at the end: %v", err)
	} else if got := drain(t, r); len(got) != 1 || got[0] != 7 {
		t.Errorf("ring unusable at the end: drained %v", got)
	}
	t.Logf("%d kills and %d crash points (%d inside a ring call, %d inside Pop), %d instances, %d promised, %d distinct delivered, %d drained at the end, %d repairs that changed something; counters %+v",
		run.kills, run.crashes, tally.inCallKills, tally.popKills, len(run.instances), tally.promised, tally.distinct, len(drained), run.repair, c)
	if t.Failed() || os.Getenv("SHMKIT_CHAOS_VERBOSE") != "" {
		t.Logf("kills: %v", run.killLog)
	}
}
