package hashmap

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Crash-safety and multi-process tests of the hash map. A real child
// process runs a fixed script of puts and deletes and SIGKILLs itself at a
// named step (SHMKIT_CRASHPOINT, the Nth time with SHMKIT_CRASHPOINT_AFTER);
// the parent then checks that no torn value is readable, scans (finding
// the dead writer's bucket and home lock), repairs (or lets its own writes
// heal the map), and asserts that every acknowledged write holds, the
// interrupted one either happened entirely or not at all, no key is in two
// buckets, and the map works afterwards.

var hmHelper = proctest.Helper{Test: "TestHashMapHelperProcess", Prefix: "hashmap-"}

// hmOp is one step of the children's script.
type hmOp struct {
	del bool
	key uint32
}

// hmScript: updates of keys 0, 2, 4, inserts of 10, 11, 12 and deletes of
// 1, 3, 5, interleaved so that the second pass of every crash point falls
// on a different step. Step j writes hmValue(key, 1, j+1).
var hmScript = []hmOp{
	{key: 0}, {key: 10}, {del: true, key: 1},
	{key: 2}, {key: 11}, {del: true, key: 3},
	{key: 4}, {key: 12}, {del: true, key: 5},
}

const (
	hmCrashValueSize = 200
	hmPreloaded      = 6 // keys 0..5 hold hmValue(k, 0, 0) before a script runs
)

// TestHashMapHelperProcess is the child side. Roles:
//
//	script          run hmScript, print "ok J" after step J returns
//	repair          run Repair
//	attach-put      attach (in a full table: after the repair the attach
//	                runs to free dead entries), put KEY
//	                with hmValue(KEY, 9, SEQ), print "ok"
//	attach          attach and exit without Close
//	stress-writer   OPS random puts and deletes on KEYS keys as writer
//	                WRITER; print "last K VALUE-HEX|absent" for each key
//	race-insert     once key "go" appears, put keys 0..KEYS-1 in order,
//	                print "ok K" for each one this process inserted
//	stress-reader   Get and Range until key "stop" appears, checking
//	                every value; print "reads N"
//
// Other test files add roles to hmRoles (run on an attached handle) and
// hmUnattachedRoles (given the path; they open the map themselves).
func TestHashMapHelperProcess(t *testing.T) { hmHelper.Serve(hashMapChild) }

var (
	hmRoles           = map[string]func(m *Map) error{}
	hmUnattachedRoles = map[string]func(path string) error{}
)

func hashMapChild(role string) error {
	if run, ok := hmUnattachedRoles[role]; ok {
		return run(proctest.EnvPath())
	}
	m, err := Open(proctest.EnvPath())
	if err != nil {
		return err
	}
	if run, ok := hmRoles[role]; ok {
		if err := run(m); err != nil {
			return err
		}
		return m.Close()
	}
	if role == "attach" {
		return nil // keep the entry: exit without Close
	}
	env := proctest.EnvInt
	vs := m.ValueSize()
	switch role {
	case "script":
		for j, op := range hmScript {
			if op.del {
				err = m.Delete(hmKey(op.key))
			} else {
				_, err = m.Put(hmKey(op.key), hmValue(op.key, 1, uint32(j+1), vs))
			}
			if err != nil {
				return fmt.Errorf("step %d: %w", j, err)
			}
			fmt.Printf("ok %d\n", j)
		}
	case "repair":
		if _, err := m.Repair(); err != nil {
			return err
		}
	case "attach-put":
		k := uint32(env("KEY"))
		if _, err := m.Put(hmKey(k), hmValue(k, 9, uint32(env("SEQ")), vs)); err != nil {
			return err
		}
		fmt.Println("ok 0")
	case "stress-writer":
		writer, ops, keys := env("WRITER"), env("OPS"), uint32(env("KEYS"))
		if err := hmAwaitKey(m, "go"); err != nil {
			return err
		}
		start := time.Now()
		last := map[uint32]string{}
		x := uint32(writer)*2654435761 + 1
		for i := 0; i < ops; i++ {
			x = x*1664525 + 1013904223
			k := (x >> 8) % keys
			if x>>28 < 4 { // a quarter of the ops
				if err := m.Delete(hmKey(k)); err != nil && err != transport.ErrNotFound {
					return err
				}
				last[k] = "absent"
				continue
			}
			v := hmValue(k, uint16(writer), uint32(i), vs)
			if _, err := m.Put(hmKey(k), v); err != nil {
				return err
			}
			last[k] = hex.EncodeToString(v)
		}
		for k, v := range last {
			fmt.Printf("last %d %s\n", k, v)
		}
		fmt.Printf("took %v\n", time.Since(start))
	case "race-insert":
		if err := hmAwaitKey(m, "go"); err != nil {
			return err
		}
		value := make([]byte, vs)
		for k := 0; k < env("KEYS"); k++ {
			ins, err := m.Put(hmKey(uint32(k)), value)
			if err != nil {
				return err
			}
			if ins {
				fmt.Printf("ok %d\n", k)
			}
		}
	case "stress-reader":
		keys := uint32(env("KEYS"))
		buf := make([]byte, vs)
		reads := 0
		for {
			for k := uint32(0); k < keys; k++ {
				n, err := m.Get(hmKey(k), buf)
				if err == transport.ErrNotFound {
					continue
				}
				if err != nil {
					return err
				}
				if err := hmCheckKeyValue(k, buf[:n]); err != nil {
					return err
				}
				reads++
			}
			var bad error
			if err := m.Range(func(key, v []byte) bool {
				if string(key) == "stop" || string(key) == "go" {
					return true
				}
				k, err := hmParseKey(key)
				if err == nil {
					err = hmCheckKeyValue(k, v)
				}
				bad = err
				return err == nil
			}); err != nil {
				return err
			}
			if bad != nil {
				return bad
			}
			if _, err := m.Get([]byte("stop"), buf); err == nil {
				break
			}
		}
		fmt.Printf("reads %d\n", reads)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return m.Close()
}

// hmAwaitKey waits for the parent to put key: the start line of a race.
func hmAwaitKey(m *Map, key string) error {
	buf := make([]byte, m.ValueSize())
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if _, err := m.Get([]byte(key), buf); err != transport.ErrNotFound {
			return err
		}
	}
	return fmt.Errorf("no %q key within 30s", key)
}

func hmParseKey(key []byte) (uint32, error) {
	var k uint32
	if _, err := fmt.Sscanf(string(key), "key-%d", &k); err != nil {
		return 0, fmt.Errorf("unexpected key %q", key)
	}
	return k, nil
}

func hmCheckKeyValue(k uint32, v []byte) error {
	gk, _, _, err := hmCheckValue(v)
	if err == nil && gk != k {
		err = fmt.Errorf("key %d holds a value of key %d", k, gk)
	}
	return err
}

// hmRunCrashChild runs a child armed to die at point (the after-th time it
// gets there), insists that it did, and returns its "ok" steps.
func hmRunCrashChild(t *testing.T, path, role, point string, after int, env ...string) []int {
	t.Helper()
	return hmHelper.RunToCrash(t, role, point, after, append(env, proctest.PathArg(path))...).Log().Ints("ok")
}

func hmRunChild(t *testing.T, path, role string, env ...string) *proctest.Child {
	t.Helper()
	return hmHelper.Run(t, role, append(env, proctest.PathArg(path))...)
}

// hmModel is what the map must hold: key -> value ("" = absent).
type hmModel map[uint32]string

// hmPreload fills keys 0..hmPreloaded-1 and returns the model.
func hmPreload(t *testing.T, m *Map) hmModel {
	t.Helper()
	model := hmModel{}
	for k := uint32(0); k < hmPreloaded; k++ {
		v := hmValue(k, 0, 0, m.ValueSize())
		if _, err := m.Put(hmKey(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = string(v)
	}
	return model
}

// apply returns the model after script step j.
func (md hmModel) apply(j, vs int) hmModel {
	out := hmModel{}
	for k, v := range md {
		out[k] = v
	}
	op := hmScript[j]
	if op.del {
		delete(out, op.key)
	} else {
		out[op.key] = string(hmValue(op.key, 1, uint32(j+1), vs))
	}
	return out
}

// hmCheckReadable: every key of the universe reads as absent or as an
// intact value of its own that one of the allowed models has.
func hmCheckReadable(t *testing.T, m *Map, allowed ...hmModel) {
	t.Helper()
	buf := make([]byte, m.ValueSize())
	for k := uint32(0); k < 16; k++ {
		n, err := m.Get(hmKey(k), buf)
		got := ""
		switch {
		case err == nil:
			if cerr := hmCheckKeyValue(k, buf[:n]); cerr != nil {
				t.Fatalf("key %d: %v", k, cerr)
			}
			got = string(buf[:n])
		case err != transport.ErrNotFound:
			t.Fatalf("key %d: %v", k, err)
		}
		ok := false
		for _, md := range allowed {
			ok = ok || md[k] == got
		}
		if !ok {
			t.Fatalf("key %d reads %s, which no allowed state has", k, hmShow(got))
		}
	}
}

func hmShow(v string) string {
	if v == "" {
		return "absent"
	}
	k, w, s, err := hmCheckValue([]byte(v))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("value(key %d, writer %d, seq %d)", k, w, s)
}

// hmCheckExact: the map holds exactly model, Range reports each key once,
// and Len agrees.
func hmCheckExact(t *testing.T, m *Map, model hmModel) {
	t.Helper()
	hmCheckReadable(t, m, model)
	seen := map[uint32]bool{}
	if err := m.Range(func(key, v []byte) bool {
		k, err := hmParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if seen[k] {
			t.Fatalf("Range reported key %d twice", k)
		}
		seen[k] = true
		if model[k] != string(v) {
			t.Fatalf("Range: key %d = %s, want %s", k, hmShow(string(v)), hmShow(model[k]))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(model) || m.Len() != len(model) {
		t.Fatalf("Range saw %d keys, Len %d, model %d", len(seen), m.Len(), len(model))
	}
}

// hmCheckUsable proves the map still inserts, updates and deletes, and
// that no problem is left.
func hmCheckUsable(t *testing.T, m *Map, model hmModel) {
	t.Helper()
	vs := m.ValueSize()
	for k := range model {
		v := hmValue(k, 7, 1000+k, vs)
		if ins, err := m.Put(hmKey(k), v); err != nil || ins {
			t.Fatalf("update of key %d after recovery: %v %v", k, ins, err)
		}
		model[k] = string(v)
	}
	v := hmValue(15, 7, 1, vs)
	if ins, err := m.Put(hmKey(15), v); err != nil || !ins {
		t.Fatalf("insert after recovery: %v %v", ins, err)
	}
	model[15] = string(v)
	hmCheckExact(t, m, model)
	if err := m.Delete(hmKey(15)); err != nil {
		t.Fatal(err)
	}
	delete(model, 15)
	hmCheckExact(t, m, model)
	s := m.Scan()
	if s.Problems != 0 || len(s.HomeLocks) != 0 || len(s.Buckets) != 0 {
		t.Fatalf("scan after recovery: %+v", s)
	}
	for _, p := range s.Peers {
		if p.State != "free" && !p.Self {
			t.Fatalf("participant %d left %s (%s)", p.Index, p.State, p.Reason)
		}
	}
}

func hmCountProblem(s ScanReport, p Problem) (buckets, homes int) {
	for _, b := range s.Buckets {
		if b.Problem == p {
			buckets++
		}
	}
	for _, h := range s.HomeLocks {
		if h.Problem == p {
			homes++
		}
	}
	return buckets, homes
}

func hmCrashMap(t *testing.T, participants uint32) *Map {
	t.Helper()
	return newHashMap(t, Config{Capacity: 32, KeySize: 16, ValueSize: hmCrashValueSize, Participants: participants})
}

// TestHashMapCrashWriter kills a writer at every crash point of Put and
// Delete, the second time it passes it, then recovers two ways: by Repair,
// and by the parent's own write of the interrupted key (which must take
// over the dead writer's home lock and roll back its bucket by itself).
func TestHashMapCrashWriter(t *testing.T) {
	points := []struct {
		point   string
		step    int     // the script step in flight at the kill
		applied bool    // whether that step took effect
		bucket  Problem // the bucket problem Scan must find (OK: none)
	}{
		{crashHashmapPutAfterHomeLock, 1, false, OK},
		{crashHashmapInsertAfterClaim, 4, false, OrphanedInsert},
		{crashHashmapInsertAfterKey, 4, false, OrphanedInsert},
		{crashHashmapInsertAfterValue, 4, false, OrphanedInsert},
		{crashHashmapInsertAfterPublish, 4, true, OK},
		{crashHashmapUpdateAfterLock, 3, false, OrphanedLock},
		{crashHashmapUpdateAfterWrite, 3, false, OrphanedLock},
		{crashHashmapUpdateAfterPublish, 3, true, OK},
		{crashHashmapDeleteAfterHomeLock, 5, false, OK},
		{crashHashmapDeleteAfterLock, 5, false, OrphanedLock},
		{crashHashmapDeleteAfterPublish, 5, true, OK},
	}
	for _, tc := range points {
		t.Run(tc.point, func(t *testing.T) {
			for _, heal := range []bool{false, true} {
				m := hmCrashMap(t, 4)
				vs := m.ValueSize()
				model := hmPreload(t, m)
				oks := hmRunCrashChild(t, m.Path(), "script", tc.point, 2)
				if len(oks) != tc.step {
					t.Fatalf("child acknowledged steps %v, want %d steps before dying", oks, tc.step)
				}
				for j := 0; j < tc.step; j++ {
					model = model.apply(j, vs)
				}
				after := model.apply(tc.step, vs)
				want := model
				if tc.applied {
					want = after
				}
				// Before any recovery: nothing torn, the interrupted step
				// either done or not.
				hmCheckReadable(t, m, want)
				s := m.Scan()
				buckets, _ := hmCountProblem(s, tc.bucket)
				_, homes := hmCountProblem(s, OrphanedHome)
				if (tc.bucket != OK && buckets != 1) || homes != 1 || s.Corrupt != 0 {
					t.Fatalf("scan: want one %v bucket and one orphaned home lock: %+v", tc.bucket, s)
				}
				for _, b := range s.Buckets {
					if b.Alive || b.OwnerID.PID == 0 {
						t.Fatalf("scan reports a dead writer's bucket as %+v", b)
					}
				}
				op := hmScript[tc.step]
				if heal {
					// Our own write of the same key meets the dead
					// writer's home lock and bucket first.
					before := m.Counters()
					if op.del {
						if err := m.Delete(hmKey(op.key)); err != nil && !(tc.applied && err == transport.ErrNotFound) {
							t.Fatalf("delete after the kill: %v", err)
						}
						delete(want, op.key)
					} else {
						v := hmValue(op.key, 8, 1, vs)
						if _, err := m.Put(hmKey(op.key), v); err != nil {
							t.Fatalf("put after the kill: %v", err)
						}
						want[op.key] = string(v)
					}
					c := m.Counters()
					if c.HomeTakeovers != before.HomeTakeovers+1 {
						t.Fatalf("home lock not taken over: %+v", c)
					}
					if tc.bucket == OrphanedLock && c.RolledBack != before.RolledBack+1 {
						t.Fatalf("locked bucket not rolled back inline: %+v", c)
					}
					hmCheckExact(t, m, want)
				}
				rep, err := m.Repair()
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.DeadPeers) != 1 || rep.Corrupt != 0 {
					t.Fatalf("repair report %+v", rep)
				}
				if !heal {
					inserts, locks := 0, 0
					switch tc.bucket {
					case OrphanedInsert:
						inserts = 1
					case OrphanedLock:
						locks = 1
					}
					if rep.Count(check.ActionTombstone) != inserts || rep.Count(check.ActionUnlock) != locks || rep.Count(check.ActionReleaseHome) != 1 {
						t.Fatalf("repair report %+v", rep)
					}
				}
				if again, err := m.Repair(); err != nil || again.Changed() {
					t.Fatalf("second repair: %+v %v", again, err)
				}
				hmCheckExact(t, m, want)
				hmCheckUsable(t, m, want)
			}
		})
	}
}

// TestHashMapCrashRepairer: a repairer dies holding the repair role,
// before or after rolling back a dead writer's bucket. The next Repair
// takes the role over on proof of death and finishes.
func TestHashMapCrashRepairer(t *testing.T) {
	for _, point := range []string{crashHashmapRepairAfterMark, crashHashmapRepairAfterRollback} {
		t.Run(point, func(t *testing.T) {
			m := hmCrashMap(t, 4)
			model := hmPreload(t, m)
			if oks := hmRunCrashChild(t, m.Path(), "script", crashHashmapUpdateAfterWrite, 1); len(oks) != 0 {
				t.Fatalf("child acknowledged %v", oks)
			}
			hmRunCrashChild(t, m.Path(), "repair", point, 1)
			if m.tab.RepairLock().Load() == 0 {
				t.Fatal("dead repairer did not hold the repair role")
			}
			hmCheckReadable(t, m, model)
			ro, err := OpenReadOnly(m.Path())
			if err != nil {
				t.Fatal(err)
			}
			// Killed before rolling back, the repairer left both the
			// bucket and the home lock; after, perhaps the home lock.
			s := ro.Scan()
			ro.Close()
			if buckets, _ := hmCountProblem(s, OrphanedLock); (point == crashHashmapRepairAfterMark) != (buckets == 1) {
				t.Fatalf("read-only scan: %+v", s)
			}
			rep, err := m.Repair()
			if err != nil {
				t.Fatal(err)
			}
			wantLocks := 1
			if point == crashHashmapRepairAfterRollback {
				wantLocks = 0 // the dead repairer had rolled it back
			}
			if len(rep.DeadPeers) != 2 || rep.Count(check.ActionUnlock) != wantLocks {
				t.Fatalf("repair report %+v", rep)
			}
			hmCheckExact(t, m, model)
			hmCheckUsable(t, m, model)
		})
	}
}

// TestHashMapCrashReclaim: in a table with no free entry, a process that
// attaches runs a repair as the table's repairer entry, which rolls back
// what a writer proven dead left and frees its entry, and then takes that
// entry, with no attached process calling Repair; a process killed while
// claiming an entry (its lock taken, the entry not yet active) is proven
// dead by its released lock and its entry freed likewise.
func TestHashMapCrashReclaim(t *testing.T) {
	m := hmCrashMap(t, 2) // the parent and one more
	model := hmPreload(t, m)
	hmRunCrashChild(t, m.Path(), "script", crashHashmapUpdateAfterWrite, 1)
	if s := m.Scan(); s.Problems != 2 {
		t.Fatalf("scan before the attach: %+v", s)
	}
	hmRunChild(t, m.Path(), "attach-put", "KEY=0", "SEQ=77")
	model[0] = string(hmValue(0, 9, 77, m.ValueSize()))
	if c := m.Counters(); c.RolledBack != 1 || c.HomeTakeovers != 1 {
		t.Fatalf("counters after the attach: %+v", c)
	}
	hmCheckExact(t, m, model)

	hmRunCrashChild(t, m.Path(), "attach", peers.CrashPeersAttachAfterClaimEntry, 1)
	o, err := Open(m.Path())
	if err != nil {
		t.Fatalf("attach with a dead claimer in a full table: %v", err)
	}
	o.Close()
	hmCheckUsable(t, m, model)
}

// TestHashMapDeadParticipantsNeverExhaustTable: processes that attach and
// die without closing never use up the table.
func TestHashMapDeadParticipantsNeverExhaustTable(t *testing.T) {
	m := hmCrashMap(t, 2)
	model := hmPreload(t, m)
	for i := 0; i < 3; i++ {
		hmRunChild(t, m.Path(), "attach")
	}
	if rep, err := m.Repair(); err != nil || len(rep.DeadPeers) != 1 {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	hmCheckUsable(t, m, model)
}

// TestHashMapMultiProcess: two writer processes put and delete the same
// small set of keys (racing to insert the same keys) while a reader
// process and the parent read them. Nothing read is torn; afterwards no key
// is in two buckets and each key's value is the last write of one writer.
func TestHashMapMultiProcess(t *testing.T) {
	const keys = 16
	ops := 20000
	if proctest.RaceEnabled {
		ops = 4000
	}
	m := newHashMap(t, Config{Capacity: 64, KeySize: 16, ValueSize: 512, Participants: 8})
	env := []string{proctest.PathArg(m.Path()), "KEYS=" + strconv.Itoa(keys), "OPS=" + strconv.Itoa(ops)}
	reader := hmHelper.Start(t, "stress-reader", env...)
	w1 := hmHelper.Start(t, "stress-writer", append(env, "WRITER=1")...)
	w2 := hmHelper.Start(t, "stress-writer", append(env, "WRITER=2")...)
	// Both writers wait for this key, so their runs overlap.
	time.Sleep(20 * time.Millisecond)
	if _, err := m.Put([]byte("go"), nil); err != nil {
		t.Fatal(err)
	}
	// The parent reads too until both writers are done.
	done := make(chan struct{})
	go func() {
		w1.Wait()
		w2.Wait()
		close(done)
	}()
	buf := make([]byte, m.ValueSize())
	reads := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for k := uint32(0); k < keys; k++ {
			n, err := m.Get(hmKey(k), buf)
			if err == transport.ErrNotFound {
				continue
			}
			if err == nil {
				err = hmCheckKeyValue(k, buf[:n])
			}
			if err != nil {
				t.Fatal(err)
			}
			reads++
		}
		time.Sleep(50 * time.Microsecond) // leave the children the cores
	}
	w1.MustSucceed(t)
	w2.MustSucceed(t)
	if _, err := m.Put([]byte("stop"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	reader.MustSucceed(t)
	for _, k := range []string{"stop", "go"} {
		if err := m.Delete([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	lasts := map[uint32][]string{}
	for _, c := range []*proctest.Child{w1, w2} {
		out, _ := c.Output()
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "last" {
				continue
			}
			k, _ := strconv.Atoi(f[1])
			v := ""
			if f[2] != "absent" {
				b, err := hex.DecodeString(f[2])
				if err != nil {
					t.Fatal(err)
				}
				v = string(b)
			}
			lasts[uint32(k)] = append(lasts[uint32(k)], v)
		}
	}
	model := hmModel{}
	seen := map[uint32]bool{}
	if err := m.Range(func(key, v []byte) bool {
		k, err := hmParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if seen[k] {
			t.Fatalf("key %d in two buckets", k)
		}
		seen[k] = true
		model[k] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for k := uint32(0); k < keys; k++ {
		ok := false
		for _, l := range lasts[k] {
			ok = ok || l == model[k]
		}
		if !ok {
			t.Errorf("key %d ends as %s, not the last write of either writer", k, hmShow(model[k]))
		}
	}
	out, _ := reader.Output()
	o1, _ := w1.Output()
	o2, _ := w2.Output()
	took := func(o string) string { return o[strings.LastIndex(o, "took"):] }
	t.Logf("parent reads %d, reader: %s, writers %s, %s, counters %+v", reads, strings.TrimSpace(out),
		strings.TrimSpace(took(o1)), strings.TrimSpace(took(o2)), m.Counters())
	if s := m.Scan(); s.Problems != 0 || len(s.HomeLocks) != 0 || m.Len() != len(model) {
		t.Fatalf("after the run: %+v, Len %d, keys %d", s, m.Len(), len(model))
	}
}

// TestHashMapMultiProcessInsertRace: three processes start together and
// put the same absent keys in the same order, with values large enough
// that inserts overlap. Each key is inserted by exactly one of them and
// ends up in exactly one bucket: the home lock serialises writers across
// processes.
func TestHashMapMultiProcessInsertRace(t *testing.T) {
	keys := 3000
	if proctest.RaceEnabled {
		keys = 1000
	}
	m := newHashMap(t, Config{Capacity: 4096, KeySize: 16, ValueSize: 8 << 10, Participants: 8})
	env := []string{proctest.PathArg(m.Path()), "KEYS=" + strconv.Itoa(keys)}
	var children []*proctest.Child
	for i := 0; i < 3; i++ {
		children = append(children, hmHelper.Start(t, "race-insert", env...))
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := m.Put([]byte("go"), nil); err != nil {
		t.Fatal(err)
	}
	count := make([]int, keys)
	for _, c := range children {
		c.MustSucceed(t)
		for _, k := range c.Log().Ints("ok") {
			count[k]++
		}
	}
	buckets := map[string]int{}
	m.Range(func(k, v []byte) bool { buckets[string(k)]++; return true })
	for k, n := range count {
		if n != 1 || buckets[string(hmKey(uint32(k)))] != 1 {
			t.Errorf("key %d inserted by %d processes, in %d buckets", k, n, buckets[string(hmKey(uint32(k)))])
		}
	}
	if m.Len() != keys+1 {
		t.Fatalf("Len %d, want %d", m.Len(), keys+1)
	}
}
