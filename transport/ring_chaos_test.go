package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
)

// Multi-process chaos: producers and consumers in real processes, SIGKILLed
// at random and restarted (half of the restarts also armed with a random
// crash point of docs/design.md), while the parent repairs concurrently.
// Every child logs what it did, one line per write(2) (os.Stdout is
// unbuffered), so what a SIGKILL cut short is exactly the last line:
//
//	producer: "pushing P S" before each push, "ok P S" after it returned
//	consumer: "claiming T" / "popping T" before each call, "got P S D K T"
//	          after it returned a message (D: lease deliveries, 0 for a pop;
//	          K: c or p; T: shm.MonoNow, for diagnostics), "acking P S"
//	          before Ack, "acked P S" after it returned, "BAD ..." for a
//	          payload that fails its checksum
//
// Message ids are P<<32 | S; a restarted producer takes a fresh range of S.

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

// chaosInstance is one run of one child: a role slot restarts as a new
// instance after each kill.
type chaosInstance struct {
	slot   int // 0..P-1 producers, P.. consumers
	gen    int
	child  *proctest.Child
	armed  string // crash point the child was started with, if any
	killed bool   // SIGKILLed by the parent or by its crash point
	killAt int64  // shm.MonoNow() of the parent's kill
}

// Crash points a restarted child may be armed with, by role: besides the
// parent's random kills, these land exactly in the windows of docs/design.md.
var (
	chaosProducerPoints = []string{"ring.push.after-claim", "ring.push.after-advance", "ring.push.after-write",
		"ring.push.after-publish", "ring.push.after-burn", "peers.attach.after-claim-entry"}
	chaosConsumerPoints = []string{"ring.pop.after-take", "ring.pop.after-advance", "ring.pop.after-copy",
		"ring.claim.after-take", "ring.claim.after-advance", "ring.ack.before-free", "ring.repair.after-requeue",
		"peers.attach.after-claim-entry"}
)

type chaosGot struct {
	inst int
	ts   int64
	line string
}

type chaosDelivery struct {
	inst    int // index into instances; -1 for the parent's final drain
	deliv   int // lease delivery count (0 for pops and the drain)
	claimed bool
}

func TestRingChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped with -short")
	}
	const producers, consumers = 2, 3
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SHMKIT_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHMKIT_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with SHMKIT_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	chaosFor, pace := 4*time.Second, 8 // pace: pushes per 1 ms pause
	if raceEnabled {
		chaosFor, pace = 3*time.Second, 2
	}

	r := newRing(t, RingConfig{Capacity: 64})
	dir := t.TempDir()
	stopProducers, stopConsumers := filepath.Join(dir, "stop-producers"), filepath.Join(dir, "stop-consumers")

	var instances []*chaosInstance
	gens := make([]int, producers+consumers)
	start := func(slot int) *chaosInstance {
		gen := gens[slot]
		gens[slot]++
		env := []string{"SHMKIT_TEST_PATH=" + r.Path(), "STOP_PRODUCERS=" + stopProducers, "STOP_CONSUMERS=" + stopConsumers,
			"CHILD_SEED=" + strconv.FormatUint(rng.Uint64(), 10)}
		role := "chaos-consumer"
		if slot < producers {
			role = "chaos-producer"
			env = append(env, "PRODUCER="+strconv.Itoa(slot), "FIRST="+strconv.Itoa(gen*1_000_000), "PACE="+strconv.Itoa(pace))
		} else if slot == producers+consumers-1 {
			env = append(env, "MODE=mixed")
		} else {
			env = append(env, "MODE=claim")
		}
		armed := ""
		if gen > 0 && rng.IntN(2) == 0 {
			points := chaosConsumerPoints
			if slot < producers {
				points = chaosProducerPoints
			}
			armed = points[rng.IntN(len(points))]
			env = append(env, shm.CrashPointEnv+"="+armed, shm.CrashPointAfterEnv+"="+strconv.Itoa(1+rng.IntN(300)))
		}
		in := &chaosInstance{slot: slot, gen: gen, armed: armed, child: proctest.StartTimeout(t, 60*time.Second, chaosHelper, role, env...)}
		instances = append(instances, in)
		return in
	}
	running := make([]*chaosInstance, producers+consumers)
	for s := range running {
		running[s] = start(s)
	}

	// The parent repairs every ~20 ms throughout.
	var repairMu sync.Mutex
	var repairErrs []string
	repairs := 0
	stopRepair := make(chan struct{})
	repairDone := make(chan struct{})
	go func() {
		defer close(repairDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopRepair:
				return
			case <-tick.C:
			}
			rep, err := r.Repair()
			repairMu.Lock()
			if err != nil && !errors.Is(err, ErrRepairBusy) {
				repairErrs = append(repairErrs, err.Error())
			}
			if rep.Changed() {
				repairs++
			}
			repairMu.Unlock()
		}
	}()

	// Kill a random child every 50-150 ms and restart it; restart at once a
	// child that died at its crash point.
	diedArmed := func(in *chaosInstance) bool {
		err := in.child.Wait()
		return in.armed != "" && err != nil && strings.Contains(err.Error(), "killed")
	}
	var killLog []string
	kills, crashes := 0, 0
	end := time.Now().Add(chaosFor)
	nextKill := time.Now().Add(time.Duration(50+rng.IntN(101)) * time.Millisecond)
	for time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond)
		for s, in := range running {
			select {
			case <-in.child.Done():
				if diedArmed(in) {
					in.killed = true
					crashes++
					killLog = append(killLog, fmt.Sprintf("slot %d gen %d pid %d died at %s", s, in.gen, in.child.PID(), in.armed))
				}
				// Otherwise it failed: reported below.
				running[s] = start(s)
			default:
			}
		}
		if time.Now().Before(nextKill) {
			continue
		}
		nextKill = time.Now().Add(time.Duration(50+rng.IntN(101)) * time.Millisecond)
		s := rng.IntN(producers + consumers)
		in := running[s]
		select {
		case <-in.child.Done():
			continue // picked up on the next pass
		default:
		}
		in.killed = true
		in.killAt = shm.MonoNow()
		in.child.Kill()
		kills++
		// Do not wait for the reap: tearing down a killed process (a race
		// build maps terabytes of shadow memory) can take hundreds of ms.
		running[s] = start(s)
		killLog = append(killLog, fmt.Sprintf("slot %d gen %d pid %d killed", s, in.gen, in.child.PID()))
	}

	// Let the producers finish, then the consumers.
	waitAll := func(from, to int, what string) {
		deadline := time.After(20 * time.Second)
		for s := from; s < to; s++ {
			select {
			case <-running[s].child.Done():
			case <-deadline:
				t.Fatalf("%s did not stop in time", what)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(stopProducers, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitAll(0, producers, "producers")
	time.Sleep(100 * time.Millisecond) // consumers take some of what is left
	if err := os.WriteFile(stopConsumers, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitAll(producers, producers+consumers, "consumers")
	close(stopRepair)
	<-repairDone

	// Children that died of anything but our SIGKILL are failures.
	reapBy := time.After(20 * time.Second)
	for i, in := range instances {
		select {
		case <-in.child.Done():
		case <-reapBy:
			t.Fatalf("instance %d (slot %d gen %d) not reaped in time", i, in.slot, in.gen)
		}
		if !in.killed && diedArmed(in) {
			in.killed = true // at its crash point, after the chaos phase
			crashes++
		}
		if in.killed {
			continue
		}
		if err := in.child.Wait(); err != nil {
			out, errOut := in.child.Output()
			if len(out) > 2000 {
				out = "..." + out[len(out)-2000:]
			}
			t.Errorf("instance %d (slot %d gen %d) failed: %v\nstdout tail:\n%s\nstderr:\n%s", i, in.slot, in.gen, err, out, errOut)
		}
	}
	repairMu.Lock()
	for _, e := range repairErrs {
		t.Errorf("parent repair: %v", e)
	}
	repairMu.Unlock()

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

	// Parse every instance's log.
	type key = uint64
	pushing := map[key]bool{}
	promised := map[key]bool{}
	deliveries := map[key][]chaosDelivery{}
	completed := map[key]int{} // acked leases, returned pops, the final drain
	unacked := map[key]int{}   // logged leases in killed instances never acked
	maybeAcked := map[key]bool{}
	var gotAt []chaosGot
	inCallKills, popKills, producerInCallKills := 0, 0, 0
	for i, in := range instances {
		out, _ := in.child.Output()
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		acked := map[key]int{}
		got := map[key]int{}
		last := ""
		var lastID key
		for _, line := range lines {
			if line == "" {
				continue
			}
			last = line
			f := strings.Fields(line)
			if f[0] == "BAD" {
				t.Errorf("instance %d received a corrupt payload: %s", i, line)
				continue
			}
			if len(f) < 3 {
				continue
			}
			if f[0] == "got" {
				ts, _ := strconv.ParseInt(f[5], 10, 64)
				gotAt = append(gotAt, chaosGot{inst: i, ts: ts, line: line})
			}
			p, e1 := strconv.ParseUint(f[1], 10, 32)
			s, e2 := strconv.ParseUint(f[2], 10, 32)
			if e1 != nil || e2 != nil {
				continue
			}
			id := p<<32 | s
			lastID = id
			switch f[0] {
			case "pushing":
				pushing[id] = true
			case "ok":
				promised[id] = true
			case "got":
				d, _ := strconv.Atoi(f[3])
				claimed := f[4] == "c"
				deliveries[id] = append(deliveries[id], chaosDelivery{inst: i, deliv: d, claimed: claimed})
				if claimed {
					got[id]++
				} else {
					completed[id]++
				}
			case "acked":
				acked[id]++
				completed[id]++
			}
		}
		if !in.killed {
			continue
		}
		switch {
		case strings.HasPrefix(last, "pushing"):
			inCallKills++
			producerInCallKills++
		case strings.HasPrefix(last, "claiming"):
			inCallKills++
		case strings.HasPrefix(last, "popping"):
			inCallKills++
			if in.killAt != 0 {
				// The parent's kill: it may have landed after the pop
				// freed the slot. (Every Pop crash point is before that.)
				popKills++
			}
		case strings.HasPrefix(last, "acking"):
			// Killed inside Ack: the message may or may not be acked.
			maybeAcked[lastID] = true
		}
		for id, n := range got {
			if n > acked[id] {
				unacked[id] += n - acked[id]
			}
		}
	}
	for _, id := range drained {
		deliveries[id] = append(deliveries[id], chaosDelivery{inst: -1})
		completed[id]++
	}

	// Every message delivered was pushed by someone: nothing invented.
	for id := range deliveries {
		if !pushing[id] {
			t.Errorf("message %d/%d delivered but never pushed", id>>32, id&(1<<32-1))
		}
	}
	// At-least-once for every message whose push returned: some consumer
	// completed it (acked its lease, or its Pop returned), or the final
	// drain got it. A lease logged by a consumer killed before its Ack does
	// not count: the message must come back. Exceptions, both exact: a
	// consumer killed inside Ack (last line "acking m") may have acked m;
	// a consumer killed inside Pop after the pop freed the slot but before
	// it printed (last line "popping") lost at most one message, which is
	// Pop's contract.
	var missing []string
	for id := range promised {
		if completed[id] == 0 && !maybeAcked[id] {
			missing = append(missing, fmt.Sprintf("%d/%d (logged deliveries %d)", id>>32, id&(1<<32-1), len(deliveries[id])))
		}
	}
	sort.Strings(missing)
	if len(missing) > popKills {
		t.Errorf("%d messages whose push returned were never completed (only %d consumers were killed inside Pop): %v", len(missing), popKills, missing)
	} else if len(missing) > 0 {
		t.Logf("%d promised messages never completed, allowed: %d consumers killed inside Pop: %v", len(missing), popKills, missing)
	}
	if len(missing) > 0 {
		// When were the neighbours of a missing message delivered, and
		// which consumers were killed inside Pop, when?
		sort.Slice(gotAt, func(a, b int) bool { return gotAt[a].ts < gotAt[b].ts })
		for id := range promised {
			if completed[id] != 0 || maybeAcked[id] {
				continue
			}
			for _, g := range gotAt {
				f := strings.Fields(g.line)
				p, _ := strconv.ParseUint(f[1], 10, 32)
				q, _ := strconv.ParseUint(f[2], 10, 32)
				if p == id>>32 && (q+1 == id&(1<<32-1) || q == id&(1<<32-1)+1) {
					t.Logf("missing %d/%d: neighbour %q delivered by instance %d at %d", id>>32, id&(1<<32-1), g.line, g.inst, g.ts)
				}
			}
		}
		for i, in := range instances {
			out, _ := in.child.Output()
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if in.killAt != 0 && strings.HasPrefix(lines[len(lines)-1], "popping") {
				tail := lines[max(0, len(lines)-3):]
				t.Logf("instance %d (slot %d gen %d, armed %q) killed at %d inside Pop; last lines %q", i, in.slot, in.gen, in.armed, in.killAt, tail)
			}
		}
	}
	// Duplicates. A message's logged deliveries beyond the first must be
	// explained by kills: each logged delivery to a killed consumer that
	// never acked it may be repeated once (the lease was in flight), and
	// each kill that landed inside a ring call may have been inside a
	// repair (healing or deferred requeue run by a child) after it pushed a
	// copy and before it freed the original: at most one extra copy each.
	unexplained := 0
	var dups []string
	for id, ds := range deliveries {
		if len(ds) <= 1 {
			continue
		}
		extra := len(ds) - 1 - unacked[id]
		desc := fmt.Sprintf("%d/%d x%d (unacked at a kill %d, deliveries", id>>32, id&(1<<32-1), len(ds), unacked[id])
		for _, d := range ds {
			desc += fmt.Sprintf(" %d@%d", d.deliv, d.inst)
		}
		desc += ")"
		if extra > 0 {
			unexplained += extra
			dups = append(dups, desc)
		}
	}
	sort.Strings(dups)
	if unexplained > inCallKills {
		t.Errorf("%d duplicate deliveries not explained by an in-flight lease at a kill (kills inside a ring call: %d): %v", unexplained, inCallKills, dups)
	} else if unexplained > 0 {
		t.Logf("%d duplicates attributed to kills inside a ring call (%d such kills): %v", unexplained, inCallKills, dups)
	}

	// Only the parent stays attached.
	for _, p := range r.Peers() {
		if p.State != "free" && !p.Self {
			t.Errorf("participant %d left %s (%s, %s)", p.Index, p.State, p.ID, p.Reason)
		}
	}
	c := r.Counters()
	if c.Pushed+uint64(producerInCallKills) < uint64(len(deliveries)) {
		t.Errorf("counters: pushed %d (+%d producers killed mid-push) < %d distinct messages delivered", c.Pushed, producerInCallKills, len(deliveries))
	}
	if c.Pushed < uint64(len(deliveries)) {
		t.Logf("note: pushed %d < %d distinct delivered (a producer killed between publishing and counting)", c.Pushed, len(deliveries))
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
		kills, crashes, inCallKills, popKills, len(instances), len(promised), len(deliveries), len(drained), repairs, c)
	if t.Failed() || os.Getenv("SHMKIT_CHAOS_VERBOSE") != "" {
		t.Logf("kills: %v", killLog)
		t.Logf("seed %d", seed)
	}
}
