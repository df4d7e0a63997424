package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// newRing creates a ring with the binary and returns its path.
func newRing(t *testing.T, capacity int, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring")
	r := run(t, "", append([]string{"create", path, "--capacity", fmt.Sprint(capacity)}, extra...)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created "+path+": ") {
		t.Fatalf("create: %+v", r)
	}
	return path
}

func TestCreate(t *testing.T) {
	path := newRing(t, 16, "--slot-size", "128", "--participants", "8", "--delivery-limit", "3")
	rep := inspectJSON(t, path)
	want := geometryJSON{Capacity: 16, SlotSize: 128, PayloadMax: 120, Participants: 8, DeliveryLimit: 3}
	if rep.Geometry != want || rep.Creator.PID == 0 || rep.States.Free != 16 {
		t.Fatalf("%+v", rep)
	}
	expectLine(t, run(t, "", "create", path, "--capacity", "16"), 1, "file already exists")
	expectLine(t, run(t, "", "create", path+"2"), 2, "--capacity is required")
	expectLine(t, run(t, "", "create", path+"2", "--capacity", "8", "--slot-size", "100"), 2, "slot size 100")
	expectLine(t, run(t, "", "create", path+"2", "--capacity", "8", "--mode", "9"), 2, "octal")

	// A wider mode is refused on open unless --allow-mode admits it.
	wide := path + "-wide"
	if r := run(t, "", "create", wide, "--capacity", "8", "--mode", "0640"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	expectLine(t, run(t, "", "inspect", wide), 3, "mode grants more access than allowed")
	if r := run(t, "", "inspect", "--allow-mode", "0640", wide); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "inspect", wide, "--allow-mode", "0640"); r.code != 0 {
		t.Fatalf("--allow-mode after PATH: %+v", r)
	}
}

func TestPushDrainFormats(t *testing.T) {
	path := newRing(t, 16)
	if r := run(t, "alpha\n\nbeta gamma\nlast-without-newline", "push", path); r.code != 0 || r.stdout != "pushed 4 messages\n" {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "push", path, "--hex", "00ff 41"); r.code != 0 || r.stdout != "pushed 1 message\n" {
		t.Fatalf("%+v", r)
	}
	file := filepath.Join(t.TempDir(), "msg")
	os.WriteFile(file, []byte("from a file\n"), 0o600)
	if r := run(t, "", "push", "--file", file, path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	r := run(t, "", "drain", path, "--max", "2")
	if r.code != 0 || r.stdout != "alpha\n\n" {
		t.Fatalf("%+v", r)
	}
	r = run(t, "", "drain", path, "--encoding", "hex", "--max", "1")
	if r.code != 0 || r.stdout != "626574612067616d6d61\n" {
		t.Fatalf("%+v", r)
	}
	r = run(t, "", "drain", path, "--json")
	want := `{"pos":3,"len":20,"deliveries":1,"data_hex":"6c6173742d776974686f75742d6e65776c696e65"}` + "\n" +
		`{"pos":4,"len":3,"deliveries":1,"data_hex":"00ff41"}` + "\n" +
		`{"pos":5,"len":12,"deliveries":1,"data_hex":"66726f6d20612066696c650a"}` + "\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("%+v\nwant %s", r, want)
	}
	// Empty from the start: exit 0, nothing printed.
	if r := run(t, "", "drain", path); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	expectLine(t, run(t, "", "drain", path, "--format", "xml"), 2, "--format")
}

func TestPushSeqAndLimits(t *testing.T) {
	path := newRing(t, 8)
	if r := run(t, "", "push", path, "--seq", "-2:2"); r.code != 0 || r.stdout != "pushed 5 messages\n" {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "drain", path); r.stdout != "-2\n-1\n0\n1\n2\n" {
		t.Fatalf("%+v", r)
	}
	// Too large: named with its size and the limit, before anything of it is pushed.
	long := strings.Repeat("x", 57)
	r := run(t, "ok\n"+long+"\nnever\n", "push", path)
	expectLine(t, r, 1, "message 2 is 57 bytes, more than the limit of 56 bytes (slot size 64); 1 message pushed before it")
	expectLine(t, run(t, "", "push", path, "--hex", strings.Repeat("ab", 100)), 1, "message 1 is 100 bytes, more than the limit of 56")
	expectLine(t, run(t, strings.Repeat("y", 10000)+"\n", "push", path), 1, "message 1 is 10000 bytes")
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, make([]byte, 5000), 0o600)
	expectLine(t, run(t, "", "push", path, "--file", big), 1, "message 1 is 5000 bytes")
	expectLine(t, run(t, "", "push", path, "--file", big+"-missing"), 1, "no such file")
	expectLine(t, run(t, "", "push", path, "--seq", "1:100000000000000000000"), 2, "--seq")
	expectLine(t, run(t, "", "push", path, "--seq", "5:1"), 2, "A must not be greater than B")
	expectLine(t, run(t, "", "push", path, "--hex", "zz"), 2, "--hex")
	expectLine(t, run(t, "", "push", path, "--hex", "00", "--seq", "1:2"), 2, "exclude each other")
	if r := run(t, "", "drain", path); r.stdout != "ok\n" {
		t.Fatalf("only the message before the large one was pushed: %+v", r)
	}
	// Full: --timeout gives up with the count pushed.
	r = run(t, "", "push", path, "--seq", "1:10", "--timeout", "50ms")
	expectLine(t, r, 1, "full for 50ms; 8 messages were pushed")
}

func TestDrainLeaseExecFailureAndPoison(t *testing.T) {
	path := newRing(t, 8, "--delivery-limit", "2")
	run(t, "", "push", path, "--seq", "1:3")
	out := filepath.Join(t.TempDir(), "handled")
	// Message 2 fails every time: released, delivered again, then set aside as poison.
	cmd := fmt.Sprintf(`x=$(cat); [ "$x" != 2 ] || exit 7; echo "$x:$RINGCTL_DELIVERIES" >> %s`, out)
	r := run(t, "", "drain", path, "--exec", cmd)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 3 || !strings.Contains(r.stderr, "command failed (exit status 7); released for redelivery") ||
		!strings.HasSuffix(r.stderr, "the command failed for 2 messages; released for redelivery\n") {
		t.Fatalf("%+v", r)
	}
	got, _ := os.ReadFile(out)
	if string(got) != "1:1\n3:1\n" {
		t.Fatalf("handled %q", got)
	}
	if rep := inspectJSON(t, path); rep.States.Poisoned != 1 || rep.Counters.Poisoned != 1 {
		t.Fatalf("%+v", rep)
	}
	expectLine(t, run(t, "", "verify", path), 1, "1 problem found")
	r = run(t, "", "drain", path, "--poisoned", "--format", "json")
	if r.code != 0 || r.stdout != `{"pos":null,"len":1,"deliveries":2,"data_hex":"32"}`+"\n" {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	expectLine(t, run(t, "", "drain", path, "--poisoned", "--lease"), 2, "--poisoned excludes")
}

// TestDrainFollowInterrupt: a following drain prints what arrives and ends
// cleanly (exit 0) on SIGINT.
func TestDrainFollowInterrupt(t *testing.T) {
	path := newRing(t, 8)
	cmd := exec.Command(ringctl(t), "drain", path, "--follow")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// While it waits, inspect shows it attached and alive.
	waitFor(t, func() bool {
		p := inspectJSON(t, path).Participants
		return len(p) == 1 && p[0].Alive && p[0].PID == int32(cmd.Process.Pid) && p[0].State == "active" &&
			p[0].Lock == "held" && !p[0].Unknown && !p[0].Repairer && !p[0].OtherNamespace && p[0].Index == 0
	})
	run(t, "", "push", path, "--seq", "1:3")
	waitFor(t, func() bool { return inspectJSON(t, path).Counters.Acked == 3 })
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err != nil || stdout.String() != "1\n2\n3\n" || stderr.String() != "" {
		t.Fatalf("%v stdout %q stderr %q", err, stdout.String(), stderr.String())
	}
	// It detached: no participant left behind.
	if rep := inspectJSON(t, path); len(rep.Participants) != 0 || rep.Counters.Acked != 3 {
		t.Fatalf("%+v", rep)
	}
}

func inspectJSON(t *testing.T, path string) inspectReport {
	t.Helper()
	var rep inspectReport
	r := run(t, "", "inspect", path, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %+v", err, r)
	}
	return rep
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

func TestRepairApply(t *testing.T) {
	dir := fixtureDir(t)
	ring, hb := filepath.Join(dir, "orphaned.shm"), filepath.Join(dir, "heartbeat.shm")
	before, _ := os.ReadFile(ring)
	r := run(t, "", "repair", ring, "--heartbeat", hb, "--apply", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	res := rep.Result
	if !rep.Applied || rep.ToRepair != 3 || res == nil || res.Counts["requeue"] != 1 || len(res.DeadParticipants) != 1 ||
		res.DeadParticipants[0].PID != deadPID || len(res.Reclaimed) != 1 || res.Reclaimed[0].Label != "worker-1" || len(res.Problems) != 0 {
		t.Fatalf("%s", r.stdout)
	}
	if !regexp.MustCompile(`/orphaned\.shm\.bak-\d{8}T\d{6}Z-[0-9a-f]{16}$`).MatchString(rep.Backup) {
		t.Fatalf("backup %q", rep.Backup)
	}
	if saved, err := os.ReadFile(rep.Backup); err != nil || !bytes.Equal(saved, before) {
		t.Fatalf("backup differs from the file before repair: %v", err)
	}
	if st, _ := os.Stat(rep.Backup); st.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v", st.Mode())
	}
	// The lease was requeued behind the rest; nothing is left to repair.
	if r := run(t, "", "drain", ring); r.stdout != "two\nthree\none\n" {
		t.Fatalf("%+v", r)
	}
	for _, args := range [][]string{{"verify", ring}, {"repair", ring, "--heartbeat", hb}, {"repair", ring, "--apply"}} {
		if r := run(t, "", args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	if m, _ := filepath.Glob(ring + ".bak-*"); len(m) != 1 {
		t.Fatalf("a repair with nothing to do made a backup: %v", m)
	}
}

func TestRepairBackupOptions(t *testing.T) {
	dir := fixtureDir(t)
	ring := filepath.Join(dir, "orphaned.shm")
	existing := filepath.Join(dir, "ring.shm")
	want, _ := os.ReadFile(existing)
	expectLine(t, run(t, "", "repair", ring, "--apply", "--backup", existing), 1, "backup file exists; refusing to overwrite it")
	if got, _ := os.ReadFile(existing); !bytes.Equal(got, want) {
		t.Fatal("the existing file was changed")
	}
	if r := run(t, "", "verify", ring); r.code != 1 {
		t.Fatalf("repaired without its backup: %+v", r)
	}
	expectLine(t, run(t, "", "repair", ring, "--apply", "--backup", "x", "--no-backup"), 2, "exclude each other")
	r := run(t, "", "repair", ring, "--apply", "--no-backup")
	if r.code != 0 || strings.Contains(r.stdout, "backup") || !strings.Contains(r.stdout, "messages requeued at the tail") {
		t.Fatalf("%+v", r)
	}
	if m, _ := filepath.Glob(ring + ".bak-*"); len(m) != 0 {
		t.Fatalf("--no-backup made %v", m)
	}
}

func TestWatchFrames(t *testing.T) {
	path := newRing(t, 8)
	run(t, "", "push", path, "--seq", "1:3")
	r := run(t, "", "watch", path, "--interval", "20ms", "--count", "3")
	line := `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ depth=3/8 push/s=%s pop/s=%s leased=0 orphaned=0 full_hits=0 empty_hits=0 alive=0 dead=0 unknown=0 repairer=free$`
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || !regexp.MustCompile(fmt.Sprintf(line, "-", "-")).MatchString(lines[0]) ||
		!regexp.MustCompile(fmt.Sprintf(line, `0\.0`, `0\.0`)).MatchString(lines[2]) {
		t.Fatalf("%+v", r)
	}
	expectLine(t, run(t, "", "watch", path, "--interval", "0s"), 2, "--interval")
}

func TestRenderWatch(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := watchSample{At: t0, Counters: transport.Counters{Head: 10, Tail: 12, Pushed: 12, Popped: 4, Acked: 6, FullHits: 1}, Peers: peerCounts{Repairer: "free"}}
	cur := watchSample{At: t0.Add(2 * time.Second), Leased: 2, Orphaned: 1, Peers: peerCounts{Alive: 2, Dead: 1, Unknown: 1, Repairer: "repairing"},
		Counters: transport.Counters{Head: 20, Tail: 25, Pushed: 25, Popped: 8, Acked: 12, FullHits: 3, EmptyHits: 7}}
	if got := renderWatch("/dev/shm/x", 64, time.Second, nil, prev, false); got != "2026-01-02T03:04:05Z depth=2/64 push/s=- pop/s=- leased=0 orphaned=0 full_hits=1 empty_hits=0 alive=0 dead=0 unknown=0 repairer=free\n" {
		t.Fatalf("%q", got)
	}
	if got := renderWatch("/dev/shm/x", 64, time.Second, &prev, cur, false); got != "2026-01-02T03:04:07Z depth=5/64 push/s=6.5 pop/s=5.0 leased=2 orphaned=1 full_hits=3 empty_hits=7 alive=2 dead=1 unknown=1 repairer=repairing\n" {
		t.Fatalf("%q", got)
	}
	got := renderWatch("/dev/shm/x", 64, time.Second, &prev, cur, true)
	for _, want := range []string{"ringctl watch /dev/shm/x", "(Ctrl-C to quit)", "│ depth │ push/s │ pop/s │", "│ 5/64  │ 6.5    │ 5.0   │ 2      │ 1        │ 3         │ 7          │"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %q in\n%s", want, got)
		}
	}
}

// TestTruncatedUnderMapping: an inspector whose file is cut short after it
// was mapped gets an error naming the file (exit 3), not a crash.
func TestTruncatedUnderMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	w, err := transport.CreateRing(path, transport.RingConfig{Capacity: 1024})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := transport.OpenRingReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	err = guard(path, func() error {
		_, err := ringView{r}.inspect(path, true, check.Report{})
		return err
	})
	if cliutil.Code(err) != cliutil.ExitUnusable || !strings.HasPrefix(err.Error(), path+": memory fault on the mapping: file shorter than its header declares") {
		t.Fatalf("%v (code %d)", err, cliutil.Code(err))
	}
}

// TestBareName: a name without a slash is a file in /dev/shm.
func TestBareName(t *testing.T) {
	name := fmt.Sprintf("ringctl-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", name)) })
	r := run(t, "", "create", name, "--capacity", "4")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created /dev/shm/"+name+": ") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "inspect", name, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"path": "/dev/shm/`+name+`"`) {
		t.Fatalf("%+v", r)
	}
	expectLine(t, run(t, "", "verify", name+"-missing"), 3, "/dev/shm/"+name+"-missing: file does not exist")
}

// TestHelpAfterPath: --help works after the path too.
func TestHelpAfterPath(t *testing.T) {
	r := run(t, "", "drain", "x", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--exec") {
		t.Fatalf("%+v", r)
	}
}
