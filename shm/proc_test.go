package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Roles for TestProcHelperProcess children.
const (
	procRoleSleep      = "proc-sleep"       // sleep until killed
	procRoleLeaderExit = "proc-leader-exit" // main thread exits alone, the process lives on (see init below)
)

const procHelper = "TestProcHelperProcess"

// init implements procRoleLeaderExit. It has to run on the main thread, which
// only init functions do in a test binary: runtime.main keeps the main
// goroutine on the main thread until the inits are done. The thread calls
// exit(2) (not exit_group), so the thread-group leader becomes a zombie while
// the process goes on in its other threads, as a C program whose main calls
// pthread_exit does. The runtime treats the vanished thread as stuck in a
// system call and hands its P to another thread.
func init() {
	if os.Getenv(proctest.RoleEnv) != procRoleLeaderExit {
		return
	}
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
	syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
	panic("exit(2) returned")
}

// TestProcHelperProcess is the body of the child processes the proc tests
// start; in the test process itself it returns at once.
func TestProcHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok {
		return
	}
	switch role {
	case procRoleSleep:
		for {
			time.Sleep(time.Hour)
		}
	default:
		fmt.Fprintf(os.Stderr, "TestProcHelperProcess: unknown role %q\n", role)
		os.Exit(2)
	}
}

// procRawStat reads /proc/<pid>/stat without going through the code under
// test; ok is false if it cannot be read or parsed.
func procRawStat(pid int) (procTask, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procTask{}, false
	}
	t, err := parseStatFields(b)
	return t, err == nil
}

// procWaitFor polls cond every few milliseconds for up to 10 s.
func procWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func mustLookupAlive(t *testing.T, pid int) ProcessID {
	t.Helper()
	id, st, err := LookupProcess(int32(pid))
	if err != nil || st != ProcAlive {
		t.Fatalf("LookupProcess(%d) = %v, %v, %v; want alive", pid, id, st, err)
	}
	if id.PID != int32(pid) || id.Start == 0 {
		t.Fatalf("LookupProcess(%d) = %v", pid, id)
	}
	return id
}

func TestProcSelf(t *testing.T) {
	self := Self()
	id := mustLookupAlive(t, os.Getpid())
	if self != id {
		t.Fatalf("Self() = %v, LookupProcess(getpid) = %v", self, id)
	}
	if Self() != self {
		t.Fatal("Self changed between calls")
	}
	st, err := self.Status()
	if err != nil || st != ProcAlive || st.Dead() {
		t.Fatalf("Self().Status() = %v, %v; want alive", st, err)
	}
	want := fmt.Sprintf("pid %d (start %d)", self.PID, self.Start)
	if got := self.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if self.IsZero() || !(ProcessID{}).IsZero() {
		t.Fatal("IsZero wrong")
	}
}

func TestProcStateStrings(t *testing.T) {
	for _, c := range []struct {
		s    ProcState
		str  string
		dead bool
	}{
		{0, "unknown", false},
		{ProcAlive, "alive", false},
		{ProcGone, "gone", true},
		{ProcZombie, "zombie", true},
		{ProcReused, "pid reused", true},
		{99, "ProcState(99)", false},
	} {
		if c.s.String() != c.str || c.s.Dead() != c.dead {
			t.Errorf("%d: String()=%q Dead()=%v; want %q %v", c.s, c.s.String(), c.s.Dead(), c.str, c.dead)
		}
	}
}

func TestProcChildKilled(t *testing.T) {
	child := proctest.Start(t, procHelper, procRoleSleep)
	id := mustLookupAlive(t, child.PID())
	if st, err := id.Status(); err != nil || st != ProcAlive {
		t.Fatalf("live child: Status() = %v, %v", st, err)
	}
	child.Kill()
	if err := child.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child.Wait() = %v, want signal: killed", err)
	}
	st, err := id.Status()
	if err != nil || (st != ProcGone && st != ProcReused) {
		t.Fatalf("reaped child: Status() = %v, %v; want gone (or pid reused)", st, err)
	}
	if !st.Dead() {
		t.Fatalf("%v is not Dead", st)
	}
	// Whoever holds the pid now, if anyone, is not the child.
	now, st2, err := LookupProcess(id.PID)
	if err != nil {
		t.Fatal(err)
	}
	if st2 == ProcGone && !now.IsZero() || st2 != ProcGone && now.Start == id.Start {
		t.Fatalf("LookupProcess after reap = %v, %v", now, st2)
	}
}

func TestProcZombie(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+procHelper+"$", "-test.count=1", "-test.timeout=60s")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, proctest.RoleEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, proctest.RoleEnv+"="+procRoleSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	pid := cmd.Process.Pid
	id := mustLookupAlive(t, pid)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	procWaitFor(t, "state Z", func() bool {
		task, ok := procRawStat(pid)
		return ok && task.state == 'Z'
	})
	// The leader shows Z before the kernel has released the other threads;
	// Status says alive until then (erring safely), then zombie.
	procWaitFor(t, "Status() == zombie", func() bool {
		st, err := id.Status()
		if err != nil || (st != ProcAlive && st != ProcZombie) {
			t.Fatalf("dying child: Status() = %v, %v", st, err)
		}
		return st == ProcZombie
	})
	if st, _ := id.Status(); !st.Dead() {
		t.Fatalf("%v is not Dead", st)
	}
	// kill(pid, 0) still succeeds for a zombie: that is why it cannot
	// prove death.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v", err)
	}
	if got, st, err := LookupProcess(int32(pid)); err != nil || st != ProcZombie || got != id {
		t.Fatalf("LookupProcess(zombie) = %v, %v, %v", got, st, err)
	}
	// A zombie holder proves the recorded process dead even when its start
	// time is unknown.
	if st, err := (ProcessID{PID: int32(pid)}).Status(); err != nil || st != ProcZombie {
		t.Fatalf("start-less ID of zombie: Status() = %v, %v", st, err)
	}
	reaped = true
	cmd.Wait()
	if st, err := id.Status(); err != nil || (st != ProcGone && st != ProcReused) {
		t.Fatalf("reaped zombie: Status() = %v, %v", st, err)
	}
}

// TestProcLeaderExited: a process whose main thread has exited alone shows
// state Z on its leader but is alive; Status must not call it dead.
func TestProcLeaderExited(t *testing.T) {
	child := proctest.Start(t, procHelper, procRoleLeaderExit)
	pid := child.PID()
	id := mustLookupAlive(t, pid)
	procWaitFor(t, "leader in state Z", func() bool {
		select {
		case <-child.Done():
			out, errOut := child.Output()
			t.Fatalf("child exited: %v\n%s%s", child.Wait(), out, errOut)
		default:
		}
		task, ok := procRawStat(pid)
		return ok && task.state == 'Z'
	})
	task, _ := procRawStat(pid)
	if task.threads <= 1 {
		t.Fatalf("leader Z with %d threads; the child should still run", task.threads)
	}
	for i := 0; i < 3; i++ {
		if st, err := id.Status(); err != nil || st != ProcAlive {
			t.Fatalf("Status() = %v, %v; want alive (threads still run)", st, err)
		}
		if got, st, err := LookupProcess(int32(pid)); err != nil || st != ProcAlive || got != id {
			t.Fatalf("LookupProcess = %v, %v, %v", got, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	child.Kill()
	child.Wait()
	if st, err := id.Status(); err != nil || (st != ProcGone && st != ProcReused) {
		t.Fatalf("reaped: Status() = %v, %v", st, err)
	}
}

func TestProcReusedStart(t *testing.T) {
	child := proctest.Start(t, procHelper, procRoleSleep)
	id := mustLookupAlive(t, child.PID())
	for _, other := range []ProcessID{{id.PID, id.Start + 1}, {id.PID, id.Start - 1}} {
		if st, err := other.Status(); err != nil || st != ProcReused || !st.Dead() {
			t.Fatalf("%v (real %v): Status() = %v, %v; want pid reused", other, id, st, err)
		}
	}
	if st, err := id.Status(); err != nil || st != ProcAlive {
		t.Fatalf("real %v: Status() = %v, %v", id, st, err)
	}
}

// TestProcRecycledPID really recycles a pid through ns_last_pid (root only).
func TestProcRecycledPID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write /proc/sys/kernel/ns_last_pid")
	}
	f, err := os.OpenFile("/proc/sys/kernel/ns_last_pid", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("ns_last_pid: %v", err)
	}
	defer f.Close()
	for attempt := 0; attempt < 20; attempt++ {
		a := proctest.Start(t, procHelper, procRoleSleep)
		idA := mustLookupAlive(t, a.PID())
		// Start times have 10 ms resolution: let B start in a later tick,
		// or A and B would be indistinguishable (see ProcessID).
		time.Sleep(25 * time.Millisecond)
		a.Kill()
		a.Wait()
		if _, err := f.WriteAt([]byte(strconv.Itoa(int(idA.PID)-1)), 0); err != nil {
			t.Skipf("write ns_last_pid: %v", err)
		}
		b := proctest.Start(t, procHelper, procRoleSleep)
		if b.PID() != int(idA.PID) {
			b.Kill() // another fork took the pid first; try again
			continue
		}
		idB := mustLookupAlive(t, b.PID())
		if idB.Start == idA.Start {
			t.Fatalf("A %v and B %v share a start time", idA, idB)
		}
		if st, err := idA.Status(); err != nil || st != ProcReused {
			t.Fatalf("A %v after B %v took its pid: Status() = %v, %v; want pid reused", idA, idB, st, err)
		}
		if st, err := idB.Status(); err != nil || st != ProcAlive {
			t.Fatalf("B %v: Status() = %v, %v", idB, st, err)
		}
		t.Logf("A %v, B %v (attempt %d)", idA, idB, attempt+1)
		return
	}
	t.Skip("never got the recycled pid: other forks raced")
}

// TestProcThreadID: /proc/<tid> resolves for non-leader threads too; a tid is
// not a process.
func TestProcThreadID(t *testing.T) {
	// Make sure this process has threads besides the leader.
	done := make(chan struct{})
	defer close(done)
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(started)
		<-done
	}()
	<-started
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == self {
			continue
		}
		task, ok := procRawStat(tid)
		if !ok {
			continue // thread exited meanwhile
		}
		if got, st, err := LookupProcess(int32(tid)); err != nil || st != ProcGone || !got.IsZero() {
			t.Fatalf("LookupProcess(tid %d) = %v, %v, %v; want gone", tid, got, st, err)
		}
		// Even with the thread's own start time, a tid is never the
		// leader we recorded.
		if st, err := (ProcessID{int32(tid), task.start}).Status(); err != nil || st != ProcReused {
			t.Fatalf("Status(tid %d, start %d) = %v, %v; want pid reused", tid, task.start, st, err)
		}
		return
	}
	t.Fatal("no non-leader thread found")
}

func TestProcNonexistentPID(t *testing.T) {
	// A free pid near the top of the range: nothing is allocated there
	// unless pids are about to wrap.
	pidMax := 32768
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pidMax = n
		}
	}
	free := 0
	for pid := pidMax - 1; pid > pidMax-1000; pid-- {
		if _, err := os.Lstat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) &&
			syscall.Kill(pid, 0) == syscall.ESRCH {
			free = pid
			break
		}
	}
	if free == 0 {
		t.Skip("no free pid found")
	}
	if id, st, err := LookupProcess(int32(free)); err != nil || st != ProcGone || !id.IsZero() {
		t.Fatalf("LookupProcess(%d) = %v, %v, %v; want gone", free, id, st, err)
	}
	for _, id := range []ProcessID{{int32(free), 12345}, {int32(free), 0}} {
		if st, err := id.Status(); err != nil || st != ProcGone {
			t.Fatalf("%v: Status() = %v, %v; want gone", id, st, err)
		}
	}
}

func TestProcInvalidIDs(t *testing.T) {
	for _, pid := range []int32{0, -1, -12345} {
		if _, st, err := LookupProcess(pid); !errors.Is(err, ErrProcUnreadable) || st != 0 {
			t.Errorf("LookupProcess(%d) = %v, %v; want ErrProcUnreadable", pid, st, err)
		}
		if st, err := (ProcessID{PID: pid, Start: 1}).Status(); !errors.Is(err, ErrProcUnreadable) || st.Dead() {
			t.Errorf("Status(pid %d) = %v, %v; want ErrProcUnreadable", pid, st, err)
		}
	}
	if st, err := (ProcessID{}).Status(); !errors.Is(err, ErrProcUnreadable) || st.Dead() {
		t.Errorf("zero ProcessID: Status() = %v, %v", st, err)
	}
	// A live holder and no recorded start time: cannot tell, so no verdict.
	st, err := ProcessID{PID: int32(os.Getpid())}.Status()
	if !errors.Is(err, ErrProcUnreadable) || st.Dead() {
		t.Fatalf("start-less ID of a live pid: Status() = %v, %v; want ErrProcUnreadable", st, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("error %q does not name the pid", err)
	}
}

// procStatLine builds a stat line like the kernel's, with the given comm,
// state, num_threads and starttime.
func procStatLine(pid int, comm, state string, threads int, start uint64) string {
	return fmt.Sprintf("%d (%s) %s 1 %d %d 0 -1 4194560 3541 0 0 0 12 5 0 0 20 0 %d 0 %d 1253376000 2890 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		pid, comm, state, pid, pid, threads, start)
}

func TestParseStat(t *testing.T) {
	const start = 98765
	cases := []struct {
		name  string
		in    string
		state byte
		start uint64
		ok    bool
	}{
		{"plain", procStatLine(1234, "sleep", "S", 1, start), 'S', start, true},
		{"spaces and parens", procStatLine(1234, "a) b (c", "R", 3, start), 'R', start, true},
		{"fake fields in comm", procStatLine(1234, "x) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 7", "S", 1, start), 'S', start, true},
		{"empty comm", procStatLine(1234, "", "S", 1, start), 'S', start, true},
		{"paren comm", procStatLine(1234, ")", "S", 1, start), 'S', start, true},
		{"newline in comm", procStatLine(1234, "a\nb", "S", 1, start), 'S', start, true},
		{"zombie", procStatLine(1234, "z", "Z", 1, start), 'Z', start, true},
		{"zero start", procStatLine(1, "init", "S", 1, 0), 'S', 0, true},
		{"max start", procStatLine(1, "x", "S", 1, 1<<64-1), 'S', 1<<64 - 1, true},
		{"exactly 22 fields", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 'S', 555, true},
		{"real", "5532 (cat) R 5517 5517 2380 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 23260 3133440 379 18446744073709551615 94075361878016 94075361897897 140730141697008 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94075361913904 94075361915520 94076214620160 140730141698745 140730141698765 140730141698765 140730141700075 0\n", 'R', 23260, true},

		{"empty", "", 0, 0, false},
		{"newline only", "\n", 0, 0, false},
		{"no newline", strings.TrimSuffix(procStatLine(1234, "x", "S", 1, start), "\n"), 0, 0, false},
		{"truncated 21 fields", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18\n", 0, 0, false},
		{"truncated after paren", "7 (x)\n", 0, 0, false},
		{"truncated in comm", "7 (abc\n", 0, 0, false},
		{"garbage", "hello world\n", 0, 0, false},
		{"binary", "\x00\x01\x02)\n", 0, 0, false},
		{"no pid", " (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"pid zero", "0 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"negative pid", "-7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"pid too big", "2147483648 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"no space before paren", "7(x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"no space after paren", "7 (x)S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"long state", "7 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"digit state", "7 (x) 1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"non-numeric start", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 55a\n", 0, 0, false},
		{"negative start", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 -555\n", 0, 0, false},
		{"signed start", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 +555\n", 0, 0, false},
		{"start overflow", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 18446744073709551616\n", 0, 0, false},
		{"non-numeric threads", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 x 18 555\n", 0, 0, false},
		{"double space", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14  15 16 1 18 555\n", 0, 0, false},
		{"trailing space", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555 \n", 0, 0, false},
		{"tab separated", "7 (x) S\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n", 0, 0, false},
		{"paren after fields", "7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555 )\n", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state, start, err := parseStat([]byte(c.in))
			if !c.ok {
				if err == nil {
					t.Fatalf("parseStat(%q) = %q, %d; want error", c.in, state, start)
				}
				if !errors.Is(err, ErrProcUnreadable) {
					t.Fatalf("error %v does not wrap ErrProcUnreadable", err)
				}
				return
			}
			if err != nil || state != c.state || start != c.start {
				t.Fatalf("parseStat(%q) = %q, %d, %v; want %q, %d", c.in, state, start, err, c.state, c.start)
			}
		})
	}

	task, err := parseStatFields([]byte(procStatLine(4321, "a) b (c", "Z", 7, 42)))
	if err != nil || task != (procTask{pid: 4321, state: 'Z', threads: 7, start: 42}) {
		t.Fatalf("parseStatFields = %+v, %v", task, err)
	}
}

func TestParseStatusTgid(t *testing.T) {
	real, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		tgid int32
		ok   bool
	}{
		{string(real), int32(os.Getpid()), true},
		{"Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t77\nPid:\t78\n", 77, true},
		{"Name:\tTgid:\t5\nTgid:\t77\n", 77, true},
		{"Name:\tx\nTgid:\t77", 0, false}, // cut short
		{"Name:\tx\nPid:\t78\n", 0, false},
		{"Tgid:\t\n", 0, false},
		{"Tgid:\t0\n", 0, false},
		{"Tgid:\t-1\n", 0, false},
		{"Tgid:\t7 8\n", 0, false},
		{"", 0, false},
	} {
		got, err := parseStatusTgid([]byte(c.in))
		if c.ok != (err == nil) || got != c.tgid {
			t.Errorf("parseStatusTgid(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.tgid, c.ok)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(procStatLine(1234, "a) b (c", "S", 1, 98765)))
	f.Add([]byte("7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n"))
	f.Add([]byte("7 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18\n"))
	f.Add([]byte(""))
	f.Add([]byte(")"))
	f.Add([]byte("1 ()) ) ) )\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		state, start, err := parseStat(b)
		if !bytes.Equal(in, b) {
			t.Fatal("parseStat modified its input")
		}
		if err != nil {
			if !errors.Is(err, ErrProcUnreadable) {
				t.Fatalf("error %v does not wrap ErrProcUnreadable", err)
			}
			return
		}
		if !('A' <= state && state <= 'Z' || 'a' <= state && state <= 'z') {
			t.Fatalf("accepted state %q", state)
		}
		// The accepted input must contain the start time as a field.
		if !bytes.Contains(b, []byte(" "+strconv.FormatUint(start, 10))) {
			t.Fatalf("start %d not in %q", start, b)
		}
		parseStatusTgid(b)
	})
}

// FuzzParseStatComm: whatever the command name, the fields after it parse.
func FuzzParseStatComm(f *testing.F) {
	f.Add("sleep", uint64(98765), uint8(1))
	f.Add("a) b (c", uint64(0), uint8(0))
	f.Add(") S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 555\n7 (", uint64(1<<64-1), uint8(200))
	f.Fuzz(func(t *testing.T, comm string, start uint64, threads uint8) {
		line := procStatLine(4321, comm, "S", int(threads), start)
		task, err := parseStatFields([]byte(line))
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		if task != (procTask{pid: 4321, state: 'S', threads: uint64(threads), start: start}) {
			t.Fatalf("parse %q = %+v", line, task)
		}
	})
}

func TestBootID(t *testing.T) {
	id, err := BootID()
	if err != nil {
		t.Fatal(err)
	}
	if !isUUID(id) || len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Fatalf("BootID() = %q", id)
	}
	again, err := BootID()
	if err != nil || again != id {
		t.Fatalf("second BootID() = %q, %v; first %q", again, err, id)
	}
	for _, bad := range []string{"", "0123456789abcdef0123456789abcdef", "01234567-89ab-cdef-0123-456789abcdeg", "01234567-89ab-cdef-0123-456789abcdef0", "01234567+89ab-cdef-0123-456789abcdef"} {
		if isUUID(bad) {
			t.Errorf("isUUID(%q) = true", bad)
		}
	}
}
