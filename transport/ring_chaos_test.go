package transport

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// The ring's multi-process chaos test, on the harness of
// chaos_harness_test.go (which describes the children's log lines).

var chaosHelper = proctest.Helper{Test: "TestRingChaosHelperProcess", Prefix: "chaos-"}

// TestRingChaosHelperProcess is the child side of TestRingChaos. Roles:
//
//	chaos-producer  push ids P<<32|S for S = FIRST, FIRST+1, ... until the
//	                file STOP_PRODUCERS exists; with MODE=loan, each is
//	                written into a loan (Loan, Publish) instead
//	chaos-consumer  claim+ack (MODE=claim) or a mix of claim and pop
//	                (MODE=mixed) until the file STOP_CONSUMERS exists
func TestRingChaosHelperProcess(t *testing.T) { chaosHelper.Serve(chaosChild) }

func chaosChild(role string) error {
	r, err := OpenRing(proctest.EnvPath())
	if err != nil {
		return err
	}
	rng := proctest.ChildRand()
	switch role {
	case "producer":
		push := r.Push
		if os.Getenv("MODE") == "loan" {
			push = func(ctx context.Context, msg []byte) error {
				l, err := r.Loan(ctx, len(msg))
				if err != nil {
					return err
				}
				copy(l.Data(), msg)
				return r.Publish(l)
			}
		}
		err = chaosProduce(push, proctest.EnvUint64("PRODUCER"), nil)
	case "consumer":
		err = chaosConsume(r, rng, r.Pop, "pop")
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	return r.Close()
}

// Crash points a restarted child may be armed with, by role: besides the
// parent's random kills, these land exactly in the windows of docs/design.md.
var (
	chaosProducerPoints = []string{crashRingPushAfterClaim, crashRingPushAfterAdvance, crashRingPushAfterWrite,
		crashRingPushAfterPublish, crashRingPushAfterBurn, peers.CrashPeersAttachAfterClaimEntry,
		// The loaning producer's (MODE=loan); the other producer never
		// reaches them, and its armed runs end like unarmed ones.
		crashRingLoanAfterClaim, crashRingLoanAfterAdvance, crashRingPublishBeforeReady, crashRingPublishAfterReady}
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
		helper: chaosHelper, producerRole: "producer", consumerRole: "consumer",
		producers: producers, consumers: consumers, path: r.Path(),
		env: func(slot, gen int) []string {
			switch {
			case slot < producers:
				mode := "MODE=push"
				if slot == 1 {
					mode = "MODE=loan"
				}
				return []string{"PRODUCER=" + strconv.Itoa(slot), "FIRST=" + strconv.Itoa(gen*1_000_000), "PACE=" + strconv.Itoa(pace), mode}
			case slot == producers+consumers-1:
				return []string{"MODE=mixed"}
			}
			return []string{"MODE=claim"}
		},
		producerPoints: chaosProducerPoints, consumerPoints: chaosConsumerPoints,
		repair:   chaosRepair(r),
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

	checkOnlySelfAttached(t, r.Peers())
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
	run.log(t, "ring", tally, len(drained), c)
}
