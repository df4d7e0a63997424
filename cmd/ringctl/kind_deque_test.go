package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

func dequeInspectJSON(t *testing.T, path string) dequeInspectReport {
	t.Helper()
	var rep dequeInspectReport
	r := run(t, "", "inspect", path, "--json", "--slots")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %+v", err, r)
	}
	return rep
}

func repairJSON(t *testing.T, args ...string) (repairReport, result) {
	t.Helper()
	r := run(t, "", append(append([]string{"repair"}, args...), "--json")...)
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %+v", err, r)
	}
	return rep, r
}

// TestDequeRepairApply: repair --apply on the dead owner's and the dead
// thief's deques makes a backup, does what the plan said, leaves the deque
// ownerless (never adopts), and the messages all come out.
func TestDequeRepairApply(t *testing.T) {
	dir := fixtureDir(t)
	owner := filepath.Join(dir, "deque-deadowner.shm")
	before, _ := os.ReadFile(owner)
	rep, r := repairJSON(t, owner, "--apply")
	res := rep.Result
	if r.code != 0 || !rep.Applied || rep.ToRepair != 3 || res == nil || res.Counts["roll_back"] != 1 || res.Counts["return"] != 0 ||
		res.Counts["free_owner"] != 1 || res.Counts["count_in"] != 0 ||
		len(res.DeadParticipants) != 1 || res.DeadParticipants[0].PID != deadPID || len(res.Problems) != 0 {
		t.Fatalf("%+v", r)
	}
	if !regexp.MustCompile(`/deque-deadowner\.shm\.bak-\d{8}T\d{6}Z-[0-9a-f]{16}$`).MatchString(rep.Backup) {
		t.Fatalf("backup %q", rep.Backup)
	}
	if saved, err := os.ReadFile(rep.Backup); err != nil || !bytes.Equal(saved, before) {
		t.Fatalf("backup differs from the file before repair: %v", err)
	}
	if got := dequeInspectJSON(t, owner); got.Owner != nil || got.Bottom != 4 || got.Problems != 0 || len(got.Participants) != 0 {
		t.Fatalf("after repair: %+v", got)
	}
	if r := run(t, "", "repair", owner, "--apply"); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("second repair: %+v", r)
	}
	if m, _ := filepath.Glob(owner + ".bak-*"); len(m) != 1 {
		t.Fatalf("a repair with nothing to do made a backup: %v", m)
	}
	// The rolled-back pop is in place; the returned "two" comes once the
	// deque is otherwise empty.
	if r := run(t, "", "drain", owner); r.code != 0 || r.stdout != "three\nfour\ntwo\n" {
		t.Fatalf("%+v", r)
	}

	thief := filepath.Join(dir, "deque-deadthief.shm")
	rep, r = repairJSON(t, thief, "--apply", "--no-backup")
	if res := rep.Result; r.code != 0 || rep.Backup != "" || res.Counts["return"] != 1 || res.Counts["free_owner"] != 0 || len(res.DeadParticipants) != 1 {
		t.Fatalf("%+v", r)
	}
	if got := dequeInspectJSON(t, thief); got.States.Returned != 2 || got.Counters.Pending != 2 || got.Problems != 0 {
		t.Fatalf("after repair: %+v", got)
	}
	if r := run(t, "", "drain", thief, "--format", "json"); r.code != 0 || r.stdout !=
		`{"pos":3,"len":4,"deliveries":1,"data_hex":"666f7572"}`+"\n"+
			`{"pos":1,"len":3,"deliveries":2,"data_hex":"74776f"}`+"\n"+
			`{"pos":2,"len":5,"deliveries":2,"data_hex":"7468726565"}`+"\n" {
		t.Fatalf("%+v", r)
	}
	for _, p := range []string{owner, thief} {
		if r := run(t, "", "verify", p); r.code != 0 {
			t.Fatalf("%+v", r)
		}
	}
}

// TestDequeLiveOwner: with this process as the deque's live owner, the
// inspectors say so, drain steals alongside it, and the owner still pops.
func TestDequeLiveOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deque")
	d, err := transport.CreateDeque(path, transport.DequeConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, m := range []string{"a", "b", "c"} {
		if err := d.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	rep := dequeInspectJSON(t, path)
	if o := rep.Owner; o == nil || !o.Alive || o.PID != int32(os.Getpid()) || o.Participant != 0 || rep.Len != 3 || rep.Problems != 0 {
		t.Fatalf("%+v %+v", rep, rep.Owner)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "repair", path); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "drain", path, "--max", "2"); r.code != 0 || r.stdout != "a\nb\n" {
		t.Fatalf("%+v", r)
	}
	buf := make([]byte, d.MaxPayload())
	if n, err := d.TryPop(buf); err != nil || string(buf[:n]) != "c" {
		t.Fatalf("owner pop: %q %v", buf[:n], err)
	}
	r := run(t, "", "watch", path, "--count", "1")
	if r.code != 0 || !regexp.MustCompile(`^\S+ len=0/8 top=2 bottom=2 push/s=- take/s=- leased=0 returned=0 orphaned=0 owner=alive full_hits=0 empty_hits=0 alive=1 dead=0 unknown=0 repairer=free\n$`).MatchString(r.stdout) {
		t.Fatalf("%+v", r)
	}
	if rep := dequeInspectJSON(t, path); rep.Counters.Claimed != 2 || rep.Counters.Acked != 2 || rep.Counters.OwnerPopped != 1 || len(rep.Participants) != 1 {
		t.Fatalf("%+v", rep)
	}
}

// TestDequePoisonAndShortHint: drain --poisoned takes a deque's poison;
// a returned message the pending hint does not count is found by verify,
// taken by a plain drain (TakeReturned: no position or delivery count),
// and the hint raised by repair.
func TestDequePoisonAndShortHint(t *testing.T) {
	dir := fixtureDir(t)
	poison := filepath.Join(dir, "deque-poison.shm")
	r := run(t, "", "drain", poison, "--poisoned", "--format", "json")
	if r.code != 0 || r.stdout != `{"pos":null,"len":3,"deliveries":5,"data_hex":"74776f"}`+"\n" {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "verify", poison); r.code != 0 {
		t.Fatalf("%+v", r)
	}

	b, err := os.ReadFile(filepath.Join(dir, "deque.shm"))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(b[layout.HeaderSize+layout.DequeOffPending:], 0)
	short, short2 := filepath.Join(dir, "short.shm"), filepath.Join(dir, "short2.shm")
	for _, p := range []string{short, short2} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	expectLine(t, run(t, "", "verify", short), 1, "1 problem found")
	r = run(t, "", "drain", short, "--format", "json")
	if r.code != 0 || r.stdout != `{"pos":2,"len":5,"deliveries":1,"data_hex":"7468726565"}`+"\n"+
		`{"pos":3,"len":4,"deliveries":1,"data_hex":"666f7572"}`+"\n"+
		`{"pos":null,"len":3,"deliveries":null,"data_hex":"74776f"}`+"\n" {
		t.Fatalf("%+v", r)
	}
	rep, r := repairJSON(t, short2, "--apply", "--no-backup")
	if r.code != 0 || rep.ToRepair != 1 || rep.Plan[0].Action != string(check.ActionRaiseHint) {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "verify", short2); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "drain", short2); r.code != 0 || r.stdout != "three\nfour\ntwo\n" {
		t.Fatalf("%+v", r)
	}
}

func TestRenderDequeWatch(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := dequeSample{At: t0, Owner: "alive", Len: 2, Counters: transport.DequeCounters{Top: 10, Bottom: 12, Pushed: 12, Stolen: 4, Acked: 6}}
	cur := dequeSample{At: t0.Add(2 * time.Second), Owner: "dead", Len: 6, Leased: 1, Returned: 2, Orphaned: 1, Peers: peerCounts{Dead: 1, Repairer: "dead"},
		Counters: transport.DequeCounters{Top: 14, Bottom: 20, Pushed: 22, Stolen: 6, OwnerPopped: 2, Acked: 8, FullHits: 3, EmptyHits: 7}}
	if got := renderDequeWatch("/dev/shm/x", 64, time.Second, &prev, cur, false); got != "2026-01-02T03:04:07Z len=6/64 top=14 bottom=20 push/s=5.0 take/s=3.0 leased=1 returned=2 orphaned=1 owner=dead full_hits=3 empty_hits=7 alive=0 dead=1 unknown=0 repairer=dead\n" {
		t.Fatalf("%q", got)
	}
	if got := renderDequeWatch("/dev/shm/x", 64, time.Second, &prev, cur, true); !strings.Contains(got, "│ 6/64 │ 14  │ 20     │ 5.0    │ 3.0    │") {
		t.Fatalf("%s", got)
	}
}
