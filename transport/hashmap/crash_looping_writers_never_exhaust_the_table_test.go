package hashmap

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Invariant: writers that crash-loop never exhaust the participant table
// nor lose an acknowledged write. One live writer (which never calls
// Repair) and a stream of writers that each attach, finish one Put, start
// an insert or an update and are SIGKILLed in the middle of it (at one of
// its crash points, or holding the key's home lock), on a table of 4
// entries: every attach succeeds (one that finds no free entry repairs as
// the repairer entry and takes a freed one), every key whose Put returned
// holds its value (or that of an interrupted Put that had published), no
// Check ever finds a corrupt word while they run, and after a Repair no
// bucket or home lock is held, every entry is free and Check is clean.
//
// The number of crash-looping writers is proctest.SoakLoops (SHMKIT_SOAK_LOOPS;
// scripts/soak.sh runs 3000); each is a process of its own.

const (
	hmSoakLanes      = 2  // crash-looping writers alive at a time (each lane runs its own keys, one writer after another)
	hmSoakLaneKeys   = 8  // keys per lane
	hmSoakLiveKeys   = 16 // keys of the live writer, homed where the lanes' keys are
	hmSoakLiveWriter = 3  // the live writer's id in its values
	hmSoakValueSize  = 64
)

func init() {
	hmRoles["soak-live"] = hmSoakLive
	hmRoles["soak-crash"] = hmSoakCrash
}

// hmSoakLive puts the keys KEYS (ids, comma-separated) in turn until the
// file STOP exists, then prints "last ID SEQ" for each key (the last Put
// of it, which returned) and "ops N".
func hmSoakLive(m *Map) error {
	var ids []uint32
	for _, f := range strings.Split(os.Getenv("KEYS"), ",") {
		id, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return err
		}
		ids = append(ids, uint32(id))
	}
	stop := os.Getenv("STOP")
	last := map[uint32]uint32{}
	ops := 0
	for seq := uint32(1); !proctest.Exists(stop); seq++ {
		for _, id := range ids {
			if _, err := m.Put(hmKey(id), hmValue(id, hmSoakLiveWriter, seq, m.ValueSize())); err != nil {
				return fmt.Errorf("live writer, key %d seq %d: %w", id, seq, err)
			}
			last[id] = seq
			ops++
		}
		time.Sleep(200 * time.Microsecond) // leave the crash-looping writers the cores
	}
	for id, seq := range last {
		fmt.Printf("last%d %d\n", id, seq)
	}
	fmt.Printf("ops %d\n", ops)
	return nil
}

// hmSoakCrash puts key A (and prints "ok A" once that returned), then
// key B, in whose Put the armed crash point kills it.
func hmSoakCrash(m *Map) error {
	env := proctest.EnvInt
	lane, a, b := uint16(env("LANE")), uint32(env("A")), uint32(env("B"))
	if _, err := m.Put(hmKey(a), hmValue(a, lane, uint32(env("SEQA")), m.ValueSize())); err != nil {
		return err
	}
	fmt.Printf("ok %d\n", a)
	if _, err := m.Put(hmKey(b), hmValue(b, lane, uint32(env("SEQB")), m.ValueSize())); err != nil {
		return err
	}
	return errors.New("survived the armed crash point")
}

// hmSoakPoints are where the crash-looping writers die: in an insert of
// an absent key, in an update of a present one, or holding the key's home
// lock.
var (
	hmSoakInsertPoints = []string{crashHashmapInsertAfterClaim, crashHashmapInsertAfterKey, crashHashmapInsertAfterValue, crashHashmapInsertAfterPublish}
	hmSoakUpdatePoints = []string{crashHashmapUpdateAfterLock, crashHashmapUpdateAfterWrite, crashHashmapUpdateAfterPublish}
)

// hmSoakLane runs n crash-looping writers one after another on the lane's
// keys and keeps the model of those keys (nil: absent).
type hmSoakLane struct {
	id    int
	keys  []uint32
	model map[uint32][]byte
	rng   *rand.Rand
	seq   uint32
}

func (l *hmSoakLane) run(t *testing.T, v *Map, path string, n int, check func() error) error {
	for i := 0; i < n; i++ {
		b := l.keys[l.rng.IntN(len(l.keys))]
		a := l.keys[l.rng.IntN(len(l.keys))]
		for a == b {
			a = l.keys[l.rng.IntN(len(l.keys))]
		}
		insertB, insertA := l.model[b] == nil, l.model[a] == nil
		points := hmSoakUpdatePoints
		if insertB {
			points = hmSoakInsertPoints
		}
		point := crashHashmapPutAfterHomeLock
		if l.rng.IntN(len(points)+1) > 0 {
			point = points[l.rng.IntN(len(points))]
		}
		// The crash point's passes before B's Put: A's Put passes it
		// once if it is an insert and A an insert, or an update and A
		// an update, or the home lock's.
		after := 1
		switch {
		case point == crashHashmapPutAfterHomeLock,
			insertA && strings.HasPrefix(point, "hashmap.insert."),
			!insertA && strings.HasPrefix(point, "hashmap.update."):
			after = 2
		}
		l.seq += 2
		va, vb := hmValue(a, uint16(l.id), l.seq, hmSoakValueSize), hmValue(b, uint16(l.id), l.seq+1, hmSoakValueSize)
		c := proctest.StartTimeout(t, time.Minute, hmHelper.Test, hmHelper.Prefix+"soak-crash", append(proctest.Arm(point, after),
			proctest.PathArg(path), fmt.Sprintf("LANE=%d", l.id), fmt.Sprintf("A=%d", a), fmt.Sprintf("SEQA=%d", l.seq),
			fmt.Sprintf("B=%d", b), fmt.Sprintf("SEQB=%d", l.seq+1))...)
		if !c.DiedAt(point) {
			out, errOut := c.Output()
			return fmt.Errorf("lane %d writer %d (key %d at %s, pass %d) did not die there: %v\nstdout:\n%s\nstderr:\n%s", l.id, i, b, point, after, c.Wait(), out, errOut)
		}
		if oks := c.Log().Ints("ok"); len(oks) != 1 || oks[0] != int(a) {
			return fmt.Errorf("lane %d writer %d acknowledged %v, want key %d", l.id, i, oks, a)
		}
		l.model[a] = va
		buf := make([]byte, hmSoakValueSize)
		get := func(k uint32) ([]byte, error) {
			n, err := v.Get(hmKey(k), buf)
			switch {
			case errors.Is(err, transport.ErrNotFound):
				return nil, nil
			case err != nil:
				return nil, err
			}
			return append([]byte(nil), buf[:n]...), nil
		}
		got, err := get(a)
		if err != nil || !bytes.Equal(got, va) {
			return fmt.Errorf("lane %d writer %d: key %d, whose Put returned, reads %s, %v", l.id, i, a, hmShow(string(got)), err)
		}
		got, err = get(b)
		switch {
		case err != nil:
			return fmt.Errorf("lane %d writer %d: key %d: %w", l.id, i, b, err)
		case bytes.Equal(got, l.model[b]):
		case bytes.Equal(got, vb) && (point == crashHashmapInsertAfterPublish || point == crashHashmapUpdateAfterPublish):
			l.model[b] = vb // killed after its publish: the Put took effect
		default:
			return fmt.Errorf("lane %d writer %d killed at %s in a Put of key %d: it reads %s, want %s", l.id, i, point, b, hmShow(string(got)), hmShow(string(l.model[b])))
		}
		if check != nil && i%25 == 24 {
			if err := check(); err != nil {
				return fmt.Errorf("after lane %d writer %d: %w", l.id, i, err)
			}
		}
	}
	return nil
}

func TestCrashLoopingWritersNeverExhaustTheTableNorLoseWrites(t *testing.T) {
	loops := proctest.SoakLoops(t) // scripts/soak.sh runs 3000
	rng := proctest.SeededRand(t, "SHMKIT_SOAK_SEED")
	m := newHashMap(t, Config{Capacity: 64, KeySize: 16, ValueSize: hmSoakValueSize, Participants: 4})
	path := m.Path()
	lanes := make([]*hmSoakLane, hmSoakLanes)
	homes := map[uint64]bool{}
	for i := range lanes {
		l := &hmSoakLane{id: i + 1, model: map[uint32][]byte{}, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))}
		for k := 0; k < hmSoakLaneKeys; k++ {
			id := uint32(i*hmSoakLaneKeys + k)
			l.keys = append(l.keys, id)
			homes[layout.HashMapHash(hmKey(id))&m.mask] = true
		}
		lanes[i] = l
	}
	// The live writer's keys share home locks (and so probe sequences)
	// with the lanes' keys: it meets what the dead writers leave.
	var liveKeys []string
	var liveIDs []uint32
	for id := uint32(1000); len(liveIDs) < hmSoakLiveKeys; id++ {
		if homes[layout.HashMapHash(hmKey(id))&m.mask] {
			liveIDs = append(liveIDs, id)
			liveKeys = append(liveKeys, strconv.Itoa(int(id)))
		}
	}
	m.Close() // the table is the live writer's and the crash-looping writers'
	v, err := OpenForRepair(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	stop := path + ".stop"
	t.Cleanup(func() { os.Remove(stop) })
	live := proctest.StartTimeout(t, time.Duration(loops)*time.Second+2*time.Minute, hmHelper.Test, hmHelper.Prefix+"soak-live",
		proctest.PathArg(path), "KEYS="+strings.Join(liveKeys, ","), "STOP="+stop)

	// While they run, Check may find what dead writers left (and judge a
	// writer being killed undecided for a moment), never a corrupt word.
	checkLive := func() error {
		for _, f := range v.Check().Findings {
			switch f.Problem {
			case check.ProblemOrphanedInsert, check.ProblemOrphanedLock, check.ProblemOrphanedHome, check.ProblemDeadParticipant, check.ProblemUnknownLiveness:
			default:
				return fmt.Errorf("Check with a live writer and dead ones: %s at %s: %s", f.Problem, f.Location, f.Detail)
			}
		}
		return nil
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(lanes))
	for i, l := range lanes {
		n := loops / len(lanes)
		if i < loops%len(lanes) {
			n++
		}
		chk := checkLive
		if i > 0 {
			chk = nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.run(t, v, path, n, chk)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live.MustSucceed(t)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c := v.Counters()
	t.Logf("%d crash-looping writers in %v (%v each, %d at a time); the live writer's puts: %v; counters before the final repair %+v",
		loops, took.Round(time.Millisecond), (took / time.Duration(loops)).Round(100*time.Microsecond), len(lanes), live.Log()["ops"], c)
	if c.Repairs == 0 {
		t.Fatalf("no attach ever repaired: counters %+v", c)
	}

	rep, err := v.Repair()
	if err != nil {
		t.Fatal(err)
	}
	s := v.Scan()
	if s.Problems != 0 || len(s.Buckets) != 0 || len(s.HomeLocks) != 0 {
		t.Fatalf("after the repair: %+v (repair %+v)", s, rep)
	}
	for _, p := range s.Peers {
		if p.State != "free" {
			t.Fatalf("entry %d left %s after the repair: %s", p.Index, p.State, p.Reason)
		}
	}
	if rep := v.Check(); !rep.Clean() {
		t.Fatalf("Check after the repair: %+v", rep.Findings)
	}
	// Every acknowledged write holds.
	want := map[string][]byte{}
	for _, l := range lanes {
		for k, val := range l.model {
			if val != nil {
				want[string(hmKey(k))] = val
			}
		}
	}
	lastLog := live.Log()
	for _, id := range liveIDs {
		seqs := lastLog[fmt.Sprintf("last%d", id)]
		if len(seqs) != 1 {
			t.Fatalf("the live writer reported %v for key %d", seqs, id)
		}
		want[string(hmKey(id))] = hmValue(id, hmSoakLiveWriter, uint32(seqs[0]), hmSoakValueSize)
	}
	seen := map[string]bool{}
	if err := v.Range(func(k, val []byte) bool {
		if seen[string(k)] {
			t.Errorf("key %s in two buckets", k)
		}
		seen[string(k)] = true
		if !bytes.Equal(val, want[string(k)]) {
			t.Errorf("key %s reads %s, want %s", k, hmShow(string(val)), hmShow(string(want[string(k)])))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) || v.Len() != len(want) {
		t.Fatalf("Range saw %d keys, Len %d, want %d", len(seen), v.Len(), len(want))
	}
}
