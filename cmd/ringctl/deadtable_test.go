package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// killedConsumers starts n real `ringctl drain --lease --max 1` processes
// on path, one after the other, each handling its message with a command
// that never ends, and SIGKILLs each (its whole process group) once it
// holds its lease: n entries of the participant table are left to dead
// processes, each holding a lease. It returns the positions they held.
func killedConsumers(t *testing.T, path string, n int) []string {
	t.Helper()
	started := filepath.Join(t.TempDir(), "started")
	var held []string
	for i := 0; i < n; i++ {
		cmd := exec.Command(ringctl(t), "drain", path, "--lease", "--max", "1",
			"--exec", fmt.Sprintf(`echo "$RINGCTL_POS" >> %s; exec sleep 60`, started))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for deadline := time.Now().Add(20 * time.Second); countLines(started) <= i; time.Sleep(5 * time.Millisecond) {
			select {
			case err := <-exited:
				b, _ := os.ReadFile(started)
				t.Fatalf("consumer %d ended before it held its lease: %v (started %q)", i, err, b)
			default:
			}
			if time.Now().After(deadline) {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatalf("consumer %d never held its lease", i)
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	b, _ := os.ReadFile(started)
	held = strings.Fields(string(b))
	if len(held) != n {
		t.Fatalf("held %q", held)
	}
	return held
}

// fullOfDead makes a ring of 2 participant entries holding "1" to "5",
// whose table is full of dead consumers' entries, each holding a lease
// (the scenario of issue 15: every attach used to fail with "participant
// table full", the repair tool's included).
func fullOfDead(t *testing.T) string {
	t.Helper()
	path := newRing(t, 8, "--participants", "2")
	if r := run(t, "", "push", path, "--seq", "1:5"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	killedConsumers(t, path, 2)
	rep := inspectJSON(t, path)
	if len(rep.Participants) != 2 || rep.States.Orphaned != 2 {
		t.Fatalf("want 2 dead entries and 2 orphaned leases: %+v", rep)
	}
	for _, p := range rep.Participants {
		if p.Alive || p.Unknown || p.Lock != "released" || p.Repairer || p.State != "active" {
			t.Fatalf("participant %+v: want proven dead, its entry lock released", p)
		}
	}
	return path
}

// drained takes every message of path with ringctl drain, sorted.
func drained(t *testing.T, path string) []string {
	t.Helper()
	r := run(t, "", "drain", path)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("drain: %+v", r)
	}
	got := strings.Fields(r.stdout)
	sort.Slice(got, func(i, j int) bool { a, _ := strconv.Atoi(got[i]); b, _ := strconv.Atoi(got[j]); return a < b })
	return got
}

func seq(a, b int) string {
	var s []string
	for i := a; i <= b; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return strings.Join(s, " ")
}

// TestRepairFullTableOfDead: repair --apply on a ring whose every entry
// is a dead consumer's, each holding a lease, takes no entry (it repairs
// as the table's repairer entry): it requeues both leases and frees both
// entries itself, which an attach before it would have done instead.
func TestRepairFullTableOfDead(t *testing.T) {
	path := fullOfDead(t)
	if r := run(t, "", "watch", path, "--count", "1"); r.code != 0 || !strings.HasSuffix(r.stdout, " leased=0 orphaned=2 full_hits=0 empty_hits=0 alive=0 dead=2 unknown=0 repairer=free\n") {
		t.Fatalf("%+v", r)
	}
	r := run(t, "", "repair", path, "--apply", "--no-backup", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if res := rep.Result; rep.ToRepair != 4 || res == nil || len(res.DeadParticipants) != 2 || res.Counts["requeue"] != 2 || len(res.Problems) != 0 {
		t.Fatalf("%s", r.stdout)
	}
	for _, d := range rep.Result.DeadParticipants {
		if d.Repairer || d.Index > 1 {
			t.Fatalf("dead participant %+v", d)
		}
	}
	if ins := inspectJSON(t, path); len(ins.Participants) != 0 || ins.States.Orphaned != 0 || ins.States.Ready != 5 || ins.Problems != 0 {
		t.Fatalf("after the repair: %+v", ins)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if got := strings.Join(drained(t, path), " "); got != seq(1, 5) {
		t.Fatalf("drained %q", got)
	}
}

// TestDrainAndPushFullTableOfDead: drain and push attach to such a ring
// (the attach repairs as the repairer entry, then takes a freed entry),
// and nothing is lost.
func TestDrainAndPushFullTableOfDead(t *testing.T) {
	path := fullOfDead(t)
	if got := strings.Join(drained(t, path), " "); got != seq(1, 5) {
		t.Fatalf("drained %q", got)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}

	path = fullOfDead(t)
	if r := run(t, "", "push", path, "--seq", "6:6"); r.code != 0 || r.stdout != "pushed 1 message\n" || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	if got := strings.Join(drained(t, path), " "); got != seq(1, 6) {
		t.Fatalf("drained %q", got)
	}
	if ins := inspectJSON(t, path); len(ins.Participants) != 0 || ins.Problems != 0 {
		t.Fatalf("%+v", ins)
	}
}

// TestRepairDequeTableOfDead: a deque of 2 entries, its owner alive (this
// process) and its other entry a thief killed holding a lease: repair
// --apply hands the lease back and frees the thief's entry without an
// entry of its own, and leaves the live owner alone.
func TestRepairDequeTableOfDead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deque")
	owner, err := transport.CreateDeque(path, transport.DequeConfig{Capacity: 8, Participants: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	for _, m := range []string{"1", "2", "3"} {
		if err := owner.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	killedConsumers(t, path, 1)
	r := run(t, "", "repair", path, "--apply", "--no-backup", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if res := rep.Result; res == nil || len(res.DeadParticipants) != 1 || res.Counts["return"] != 1 || res.Counts["free_owner"] != 0 || len(res.Problems) != 0 {
		t.Fatalf("%s", r.stdout)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if got := strings.Join(drained(t, path), " "); got != seq(1, 3) {
		t.Fatalf("drained %q", got)
	}
}

// TestRepairMapTableOfDead: a hash map of one participant entry, held by
// a dead process: repair --apply frees it itself (an attach would have
// taken it first) and leaves no entry behind.
func TestRepairMapTableOfDead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "map")
	m, err := hashmap.Create(path, hashmap.Config{Capacity: 8, KeySize: 16, ValueSize: 16, Participants: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := layout.NewHashMapLayout(layout.HashMapGeometry(8, 16, 16, 1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	e0 := layout.HeaderSize + l.ParticipantOff(0)
	gen := layout.UnpackPeer(le.Uint64(b[e0:])).Gen
	le.PutUint64(b[e0+layout.PeerOffCtl:], layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: deadPID}.Pack())
	le.PutUint64(b[e0+layout.PeerOffStart:], 987654)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "repair", path, "--apply", "--no-backup", "--json")
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if res := rep.Result; res == nil || len(res.DeadParticipants) != 1 || res.DeadParticipants[0].PID != deadPID || len(res.Problems) != 0 {
		t.Fatalf("%s", r.stdout)
	}
	var ins mapInspectReport
	r = run(t, "", "inspect", path, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &ins); err != nil || len(ins.Participants) != 0 || ins.Len != 1 || ins.Problems != 0 {
		t.Fatalf("%v %s", err, r.stdout)
	}
}

// TestUnknownLiveness: an entry whose lock nobody holds while the process
// it records (this one: same pid, start time, boot and pid namespace)
// still runs is undecided: inspect says "unknown", verify lists
// unknown_liveness with action none, its lease counts as held, and repair
// --apply changes nothing.
func TestUnknownLiveness(t *testing.T) {
	if shm.PidNamespace() == 0 {
		t.Skip("no /proc/self/ns/pid: the pid witness cannot be asked")
	}
	path := filepath.Join(t.TempDir(), "ring")
	r0, err := transport.CreateRing(path, transport.RingConfig{Capacity: 8, Participants: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r0.TryPush([]byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := r0.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ := layout.NewRingLayout(layout.RingGeometry(8, 64, 2, 5))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	self := shm.Self()
	e0 := layout.HeaderSize + l.ParticipantOff(0)
	gen := layout.UnpackPeer(le.Uint64(b[e0:])).Gen
	le.PutUint64(b[e0+layout.PeerOffCtl:], layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack())
	le.PutUint64(b[e0+layout.PeerOffStart:], self.Start)
	le.PutUint64(b[e0+layout.PeerOffBoot:], shm.BootTag())
	le.PutUint64(b[e0+layout.PeerOffPidNS:], shm.PidNamespace())
	s0 := layout.HeaderSize + l.SlotOff(0)
	le.PutUint64(b[s0:], layout.SlotWord{State: layout.SlotLeased, Deliveries: 1, Owner: 1, Length: 3}.Pack())
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	rep := inspectJSON(t, path)
	if len(rep.Participants) != 1 || rep.States.Leased != 1 || rep.States.Orphaned != 0 {
		t.Fatalf("%+v", rep)
	}
	if p := rep.Participants[0]; !p.Alive || !p.Unknown || p.Lock != "released" || p.OtherNamespace || p.PidNS != shm.PidNamespace() || !strings.HasPrefix(p.Reason, "entry lock released but ") {
		t.Fatalf("%+v", p)
	}
	if r := run(t, "", "inspect", path); r.code != 0 || !strings.Contains(r.stdout, "│ released │ unknown (entry lock released but pid "+strconv.Itoa(int(self.PID))) {
		t.Fatalf("%+v", r)
	}
	var ver verifyReport
	r := run(t, "", "verify", path, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &ver); err != nil || r.code != 1 || len(ver.Problems) != 1 ||
		ver.Problems[0].Kind != "unknown_liveness" || ver.Problems[0].Action != "none" {
		t.Fatalf("%v %+v", err, r)
	}
	before, _ := os.ReadFile(path)
	if r := run(t, "", "repair", path, "--apply", "--no-backup"); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("%+v", r)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a repair changed a file whose only finding is an undecided entry")
	}
}

// TestOtherPidNamespace: a drain --lease running as pid 1 of its own pid
// namespace (unshare, as a container sharing the directory) is shown from
// here as "pid 1 in another pid namespace", alive (it holds its entry
// lock), and nothing is repaired; once it is killed, its entry is proven
// dead by the released lock and repair --apply requeues its lease.
func TestOtherPidNamespace(t *testing.T) {
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "true").Run(); err != nil {
		t.Skipf("cannot start a process in a new pid namespace (unshare --pid --fork --mount-proc, as root): %v", err)
	}
	path := newRing(t, 8)
	run(t, "", "push", path, "--seq", "1:3")
	started := filepath.Join(t.TempDir(), "started")
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", ringctl(t), "drain", path, "--lease", "--max", "1",
		"--exec", fmt.Sprintf(`echo "$RINGCTL_POS" >> %s; exec sleep 60`, started))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	waitFor(t, func() bool { return countLines(started) == 1 })

	rep := inspectJSON(t, path)
	if len(rep.Participants) != 1 || rep.States.Leased != 1 || rep.States.Orphaned != 0 {
		t.Fatalf("%+v", rep)
	}
	if p := rep.Participants[0]; p.PID != 1 || !p.OtherNamespace || p.PidNS == 0 || p.PidNS == shm.PidNamespace() || !p.Alive || p.Unknown || p.Lock != "held" {
		t.Fatalf("%+v", p)
	}
	if r := run(t, "", "inspect", path); !strings.Contains(r.stdout, "│ 1 in another pid namespace (pid:[") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("a live participant of another pid namespace was judged: %+v", r)
	}
	if r := run(t, "", "watch", path, "--count", "1"); r.code != 0 || !strings.HasSuffix(r.stdout, " leased=1 orphaned=0 full_hits=0 empty_hits=0 alive=1 dead=0 unknown=0 repairer=free\n") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "repair", path, "--apply", "--no-backup"); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("%+v", r)
	}

	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	waitFor(t, func() bool { p := inspectJSON(t, path).Participants; return len(p) == 1 && !p[0].Alive })
	r := run(t, "", "verify", path)
	if r.code != 1 || !strings.Contains(r.stdout, "active entry of pid 1 in another pid namespace (pid:[") {
		t.Fatalf("%+v", r)
	}
	r = run(t, "", "repair", path, "--apply", "--no-backup", "--json")
	var rr repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rr); err != nil || r.code != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if res := rr.Result; len(res.DeadParticipants) != 1 || !res.DeadParticipants[0].OtherNamespace || res.DeadParticipants[0].PID != 1 || res.Counts["requeue"] != 1 {
		t.Fatalf("%s", r.stdout)
	}
	if got := strings.Join(drained(t, path), " "); got != seq(1, 3) {
		t.Fatalf("drained %q", got)
	}
}
