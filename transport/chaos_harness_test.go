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
	"github.com/shmkit/shmkit/transport/check"
)

// The multi-process chaos harness shared by the ring's and the deque's
// chaos tests: producers and consumers in real processes, SIGKILLed at
// random and restarted (half of the restarts also armed with a random
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
// A producer may also pop (the deque's owner does): its "popping" and
// "got" lines count as a consumer's. Message ids are P<<32 | S; a
// restarted producer takes a fresh range of S.

// chaosConfig says what to run.
type chaosConfig struct {
	helper                         proctest.Helper // the helper test children run
	producerRole, consumerRole     string          // roles of helper
	producers, consumers           int
	path                           string
	env                            func(slot, gen int) []string // role-specific environment of an instance
	producerPoints, consumerPoints []string
	repair                         func() (changed bool, err error) // the parent's repair, every ~20 ms
	chaosFor                       time.Duration
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

type chaosRun struct {
	instances              []*chaosInstance
	kills, crashes, repair int
	killLog                []string
}

// runChaos starts the children, kills and restarts them for cfg.chaosFor
// while repairing, then stops producers (through a stop file), then
// consumers, and reaps everyone. Children that died of anything but a
// kill, and failed parent repairs, fail the test.
func runChaos(t *testing.T, rng *rand.Rand, cfg chaosConfig) *chaosRun {
	t.Helper()
	dir := t.TempDir()
	stopProducers, stopConsumers := filepath.Join(dir, "stop-producers"), filepath.Join(dir, "stop-consumers")
	run := &chaosRun{}
	total := cfg.producers + cfg.consumers
	gens := make([]int, total)
	start := func(slot int) *chaosInstance {
		gen := gens[slot]
		gens[slot]++
		env := append([]string{proctest.PathArg(cfg.path), "STOP_PRODUCERS=" + stopProducers, "STOP_CONSUMERS=" + stopConsumers,
			proctest.ChildSeed(rng)}, cfg.env(slot, gen)...)
		role, points := cfg.consumerRole, cfg.consumerPoints
		if slot < cfg.producers {
			role, points = cfg.producerRole, cfg.producerPoints
		}
		armed := ""
		if gen > 0 && rng.IntN(2) == 0 {
			armed = points[rng.IntN(len(points))]
			env = append(env, proctest.Arm(armed, 1+rng.IntN(300))...)
		}
		in := &chaosInstance{slot: slot, gen: gen, armed: armed, child: cfg.helper.Start(t, role, env...)}
		run.instances = append(run.instances, in)
		return in
	}
	running := make([]*chaosInstance, total)
	for s := range running {
		running[s] = start(s)
	}

	var repairMu sync.Mutex
	var repairErrs []string
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
			changed, err := cfg.repair()
			repairMu.Lock()
			if err != nil {
				repairErrs = append(repairErrs, err.Error())
			}
			if changed {
				run.repair++
			}
			repairMu.Unlock()
		}
	}()

	// Kill a random child every 50-150 ms and restart it; restart at once a
	// child that died at its crash point.
	diedArmed := func(in *chaosInstance) bool { return in.armed != "" && in.child.DiedAt(in.armed) }
	end := time.Now().Add(cfg.chaosFor)
	nextKill := time.Now().Add(time.Duration(50+rng.IntN(101)) * time.Millisecond)
	for time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond)
		for s, in := range running {
			select {
			case <-in.child.Done():
				if diedArmed(in) {
					in.killed = true
					run.crashes++
					run.killLog = append(run.killLog, fmt.Sprintf("slot %d gen %d pid %d died at %s", s, in.gen, in.child.PID(), in.armed))
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
		s := rng.IntN(total)
		in := running[s]
		select {
		case <-in.child.Done():
			continue // picked up on the next pass
		default:
		}
		in.killed = true
		in.killAt = shm.MonoNow()
		in.child.Kill()
		run.kills++
		// Do not wait for the reap: tearing down a killed process (a race
		// build maps terabytes of shadow memory) can take hundreds of ms.
		running[s] = start(s)
		run.killLog = append(run.killLog, fmt.Sprintf("slot %d gen %d pid %d killed", s, in.gen, in.child.PID()))
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
	waitAll(0, cfg.producers, "producers")
	time.Sleep(100 * time.Millisecond) // consumers take some of what is left
	if err := os.WriteFile(stopConsumers, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitAll(cfg.producers, total, "consumers")
	close(stopRepair)
	<-repairDone

	// Children that died of anything but our SIGKILL are failures.
	reapBy := time.After(20 * time.Second)
	for i, in := range run.instances {
		select {
		case <-in.child.Done():
		case <-reapBy:
			t.Fatalf("instance %d (slot %d gen %d) not reaped in time", i, in.slot, in.gen)
		}
		if !in.killed && diedArmed(in) {
			in.killed = true // at its crash point, after the chaos phase
			run.crashes++
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
	return run
}

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

// chaosTally is what the logs and the final drain add up to.
type chaosTally struct {
	promised            int // messages whose push returned
	distinct            int // distinct messages delivered
	inCallKills         int // kills that landed inside a transport call
	popKills            int // ... inside a plain pop, by the parent
	producerInCallKills int
}

// check parses every instance's log and checks, against what the final
// drain got: nothing delivered that was never pushed; at-least-once for
// every message whose push returned (some consumer completed it: acked
// its lease, or its pop returned, or the final drain got it); and that
// every duplicate is explained by a kill.
func (run *chaosRun) check(t *testing.T, drained []uint64) chaosTally {
	t.Helper()
	var tally chaosTally
	type key = uint64
	pushing := map[key]bool{}
	promised := map[key]bool{}
	deliveries := map[key][]chaosDelivery{}
	completed := map[key]int{} // acked leases, returned pops, the final drain
	unacked := map[key]int{}   // logged leases in killed instances never acked
	maybeAcked := map[key]bool{}
	var gotAt []chaosGot
	for i, in := range run.instances {
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
			tally.inCallKills++
			tally.producerInCallKills++
		case strings.HasPrefix(last, "claiming"):
			tally.inCallKills++
		case strings.HasPrefix(last, "popping"):
			tally.inCallKills++
			if in.killAt != 0 {
				// The parent's kill: it may have landed after the pop
				// freed the slot. (Every pop crash point is before that.)
				tally.popKills++
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
	tally.promised, tally.distinct = len(promised), len(deliveries)

	for id := range deliveries {
		if !pushing[id] {
			t.Errorf("message %d/%d delivered but never pushed", id>>32, id&(1<<32-1))
		}
	}
	// A lease logged by a consumer killed before its Ack does not count:
	// the message must come back. Exceptions, both exact: a consumer
	// killed inside Ack (last line "acking m") may have acked m; a
	// consumer killed inside a pop after it freed the slot but before it
	// printed (last line "popping") lost at most one message, which is a
	// plain pop's contract.
	var missing []string
	for id := range promised {
		if completed[id] == 0 && !maybeAcked[id] {
			missing = append(missing, fmt.Sprintf("%d/%d (logged deliveries %d)", id>>32, id&(1<<32-1), len(deliveries[id])))
		}
	}
	sort.Strings(missing)
	if len(missing) > tally.popKills {
		t.Errorf("%d messages whose push returned were never completed (only %d consumers were killed inside a pop): %v", len(missing), tally.popKills, missing)
	} else if len(missing) > 0 {
		t.Logf("%d promised messages never completed, allowed: %d consumers killed inside a pop: %v", len(missing), tally.popKills, missing)
	}
	if len(missing) > 0 {
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
		for i, in := range run.instances {
			out, _ := in.child.Output()
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if in.killAt != 0 && strings.HasPrefix(lines[len(lines)-1], "popping") {
				tail := lines[max(0, len(lines)-3):]
				t.Logf("instance %d (slot %d gen %d, armed %q) killed at %d inside a pop; last lines %q", i, in.slot, in.gen, in.armed, in.killAt, tail)
			}
		}
	}
	// Duplicates. A message's logged deliveries beyond the first must be
	// explained by kills: each logged delivery to a killed consumer that
	// never acked it may be repeated once (the lease was in flight), and
	// each kill that landed inside a transport call may have been inside a
	// repair (healing or a requeue run by a child) after it pushed a copy
	// and before it freed the original: at most one extra copy each.
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
	if unexplained > tally.inCallKills {
		t.Errorf("%d duplicate deliveries not explained by an in-flight lease at a kill (kills inside a transport call: %d): %v", unexplained, tally.inCallKills, dups)
	} else if unexplained > 0 {
		t.Logf("%d duplicates attributed to kills inside a transport call (%d such kills): %v", unexplained, tally.inCallKills, dups)
	}
	return tally
}

// chaosSeed is the run's random numbers, from SHMKIT_CHAOS_SEED or the
// clock (logged for a rerun).
func chaosSeed(t *testing.T) *rand.Rand {
	t.Helper()
	return proctest.SeededRand(t, "SHMKIT_CHAOS_SEED")
}

// chaosQueue is what a chaos child uses of a ring or a deque.
type chaosQueue interface {
	Claim(ctx context.Context) (Lease, error)
	Ack(l Lease) error
	MaxPayload() int
}

// chaosProduce is a producer child's loop: push P<<32|S for S = FIRST,
// FIRST+1, ... (a 1 ms pause every PACE pushes) until the file
// STOP_PRODUCERS exists, calling after, if not nil, after every push.
func chaosProduce(push func(context.Context, []byte) error, p uint64, after func() error) error {
	s, pace := proctest.EnvUint64("FIRST"), proctest.EnvInt("PACE")
	stop := os.Getenv("STOP_PRODUCERS")
	for i := 0; ; i, s = i+1, s+1 {
		if i%16 == 0 && proctest.Exists(stop) {
			return nil
		}
		if pace > 0 && i%pace == 0 {
			time.Sleep(time.Millisecond)
		}
		fmt.Printf("pushing %d %d\n", p, s)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := push(ctx, encodeMsg(p<<32|s))
		cancel()
		if err != nil {
			return fmt.Errorf("push %d %d: %w", p, s, err)
		}
		fmt.Printf("ok %d %d\n", p, s)
		if after != nil {
			if err := after(); err != nil {
				return err
			}
		}
	}
}

// chaosConsume is a consumer child's loop until the file STOP_CONSUMERS
// exists: claim and ack (MODE=claim), or (MODE=mixed) a third of the time
// a plain take instead (take, named what in errors). Now and then it holds
// a lease a while, so that kills find leases in flight (and a deque's owner
// burns past them).
func chaosConsume(q chaosQueue, rng *rand.Rand, take func(context.Context, []byte) (int, error), what string) error {
	mixed := os.Getenv("MODE") == "mixed"
	stop := os.Getenv("STOP_CONSUMERS")
	buf := make([]byte, q.MaxPayload())
	for i := 0; ; i++ {
		if i%16 == 0 && proctest.Exists(stop) {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if mixed && rng.IntN(3) == 0 {
			fmt.Printf("popping %d\n", shm.MonoNow())
			n, err := take(ctx, buf)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				i = 15 // look at the stop file
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			logTaken(buf[:n], 0, "p")
			continue
		}
		fmt.Printf("claiming %d\n", shm.MonoNow())
		l, err := q.Claim(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			i = 15
			continue
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		id, ok := logTaken(l.Data(), l.Deliveries, "c")
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
		if ok {
			fmt.Printf("acking %d %d\n", id>>32, id&(1<<32-1))
		}
		if err := q.Ack(l); err != nil {
			return fmt.Errorf("ack %d %d: %w", id>>32, id&(1<<32-1), err)
		}
		if ok {
			fmt.Printf("acked %d %d\n", id>>32, id&(1<<32-1))
		}
	}
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

// chaosRepair is the parent's repair of a ring or a deque during the
// chaos: a repair lock held by a child is not an error.
func chaosRepair(q interface {
	Repair() (check.RepairReport, error)
}) func() (bool, error) {
	return func() (bool, error) {
		rep, err := q.Repair()
		if errors.Is(err, ErrRepairBusy) {
			err = nil
		}
		return rep.Changed(), err
	}
}

// checkOnlySelfAttached fails the test unless every participant entry but
// the caller's own is free: every killed child's entry was reclaimed.
func checkOnlySelfAttached(t *testing.T, ps []check.Peer) {
	t.Helper()
	for _, p := range ps {
		if p.State != "free" && !p.Self {
			t.Errorf("participant %d left %s (%s, %s)", p.Index, p.State, p.ID, p.Reason)
		}
	}
}

// log reports what the run did (and, if the test failed or
// SHMKIT_CHAOS_VERBOSE is set, every kill).
func (run *chaosRun) log(t *testing.T, kind string, tally chaosTally, drained int, counters any) {
	t.Helper()
	t.Logf("%d kills and %d crash points (%d inside a %s call, %d inside a pop), %d instances, %d promised, %d distinct delivered, %d drained at the end, %d repairs that changed something; counters %+v",
		run.kills, run.crashes, tally.inCallKills, kind, tally.popKills, len(run.instances), tally.promised, tally.distinct, drained, run.repair, counters)
	if t.Failed() || os.Getenv("SHMKIT_CHAOS_VERBOSE") != "" {
		t.Logf("kills: %v", run.killLog)
	}
}
