package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrProcUnreadable means a process's liveness could be proven neither way:
// /proc could not be read or parsed, or the answer was ambiguous. It is never
// evidence of death; a caller that gets it must keep treating the process as
// alive and must not repair its work.
var ErrProcUnreadable = errors.New("shm: process status unreadable")

// ProcessID names one process for the life of one boot: a pid alone is
// recycled (pid_max is 32768 here), so a pid found in shared memory would
// otherwise prove nothing about the process that wrote it.
//
// Start is the process's start time, field 22 of /proc/<pid>/stat, in clock
// ticks (USER_HZ, normally 100 per second) since boot. Exec keeps it (the
// kernel carries it over even when a non-leader thread execs), so a process
// has one ProcessID for its whole life.
//
// Limits, all of which a caller comparing ProcessIDs across processes must
// respect:
//   - Resolution is one tick: a pid reused within the tick in which its
//     previous holder started looks like the same process. Natural reuse
//     needs pid_max forks in 10 ms; forcing it needs CAP_SYS_ADMIN or
//     CAP_CHECKPOINT_RESTORE (ns_last_pid, clone3 set_tid).
//   - Pids and start times are only comparable between processes that share
//     a pid namespace and a time namespace (the boottime offset of a time
//     namespace shifts field 22), and only within one boot (see BootID).
//   - Start 0 means "unknown" (see Self); such an ID can be proven dead only
//     when its pid is free or held by a zombie, never proven alive.
type ProcessID struct {
	PID   int32
	Start uint64 // start time, field 22 of /proc/<pid>/stat, in clock ticks since boot
}

// IsZero reports whether p is the zero ProcessID, which shared-memory records
// use for "no owner"; it names no process and Status refuses it.
func (p ProcessID) IsZero() bool { return p == ProcessID{} }

// String formats p for logs and error messages, keeping the start time next
// to the pid because the pid alone is ambiguous.
func (p ProcessID) String() string {
	return "pid " + strconv.FormatInt(int64(p.PID), 10) + " (start " + strconv.FormatUint(p.Start, 10) + ")"
}

// ProcState is the verdict of a liveness check. Only the Dead states permit
// repairing a process's work; ProcAlive and any error do not.
type ProcState uint8

const (
	// ProcAlive: the process is running, sleeping, stopped, traced...:
	// anything but exited.
	ProcAlive ProcState = iota + 1
	// ProcGone: no process has the pid (no /proc entry and kill(pid, 0)
	// fails with ESRCH).
	ProcGone
	// ProcZombie: the process has exited but is not reaped yet (state Z or
	// X). It still answers kill(pid, 0), which is why kill alone cannot
	// prove death.
	ProcZombie
	// ProcReused: the pid is held by a different process (another start
	// time, or a thread of another process), so the recorded one is dead.
	ProcReused
)

// String returns the verdict as used in log lines and test failures.
func (s ProcState) String() string {
	switch s {
	case 0:
		return "unknown"
	case ProcAlive:
		return "alive"
	case ProcGone:
		return "gone"
	case ProcZombie:
		return "zombie"
	case ProcReused:
		return "pid reused"
	}
	return "ProcState(" + strconv.Itoa(int(s)) + ")"
}

// Dead reports whether s proves the process is dead, so that its work may be
// repaired: the zero ProcState (returned with errors) and ProcAlive do not.
func (s ProcState) Dead() bool {
	return s == ProcGone || s == ProcZombie || s == ProcReused
}

var (
	selfOnce sync.Once
	selfID   ProcessID
)

// Self returns this process's ProcessID, for stamping the records it owns in
// shared memory. It is computed once and never fails: if /proc cannot be read
// it returns the pid with Start 0 ("unknown"). Other processes can then prove
// this process dead only once its pid is free or a zombie, never while some
// process holds the pid, so an unknown start can delay repair but never cause
// a live process's work to be taken.
func Self() ProcessID {
	selfOnce.Do(func() {
		pid := int32(os.Getpid())
		selfID = ProcessID{PID: pid}
		id, st, err := LookupProcess(pid)
		if err == nil && st == ProcAlive && id.PID == pid {
			selfID = id
		}
	})
	return selfID
}

// LookupProcess returns the identity and state of the process that holds pid
// now, to be recorded and checked later with Status.
//
// If no process has the pid (including when pid is only the id of a non-leader
// thread of another process: /proc answers for those too), it returns the zero
// ProcessID and ProcGone. A zombie is returned with ProcZombie. err != nil
// (wrapping ErrProcUnreadable) when /proc cannot tell; the state is then 0.
func LookupProcess(pid int32) (ProcessID, ProcState, error) {
	pr, gone, err := openProbe(pid)
	if err != nil {
		return ProcessID{}, 0, err
	}
	if gone {
		return ProcessID{}, ProcGone, nil
	}
	defer pr.close()
	leader, gone, err := pr.isLeader()
	if err != nil {
		return ProcessID{}, 0, err
	}
	if gone || !leader {
		return ProcessID{}, ProcGone, nil
	}
	id := ProcessID{PID: pid, Start: pr.task.start}
	if pr.task.exited() {
		return id, ProcZombie, nil
	}
	return id, ProcAlive, nil
}

// Status reports whether the process p names is still alive. It is the proof
// of death required before another process's work is repaired, so it answers
// a Dead state only when that is certain:
//   - ProcGone: no process holds p.PID;
//   - ProcReused: p.PID is held by a process with another start time, or by a
//     non-leader thread (the recorded process, a thread-group leader, is dead);
//   - ProcZombie: the holder has exited (state Z/X) with no thread left.
//
// A leader in state Z whose other threads still run (it called pthread_exit)
// is alive, and is reported so. err != nil (wrapping ErrProcUnreadable) only
// when liveness cannot be proven either way, for example /proc/<pid>/stat is
// unreadable for a reason other than ENOENT/ESRCH (hidepid, another pid
// namespace's /proc) or unparsable, or p.Start is 0 and the holder is alive:
// callers must then treat the process as alive.
func (p ProcessID) Status() (ProcState, error) {
	pr, gone, err := openProbe(p.PID)
	if err != nil {
		return 0, err
	}
	if gone {
		return ProcGone, nil
	}
	defer pr.close()
	t := pr.task
	if p.Start != 0 && t.start != p.Start {
		return ProcReused, nil
	}
	if t.exited() {
		// Either this is p, exited, or (Start unknown) a later holder of the
		// pid; a pid has one holder at a time, so p is dead in both cases.
		return ProcZombie, nil
	}
	if p.Start == 0 {
		return 0, unreadable(p.PID, errors.New("recorded start time unknown and the pid is held by a live process"))
	}
	leader, gone, err := pr.isLeader()
	if err != nil {
		return 0, err
	}
	if gone {
		return ProcGone, nil
	}
	if !leader {
		return ProcReused, nil
	}
	return ProcAlive, nil
}

var bootID atomic.Pointer[string]

// BootID returns this boot's random id (/proc/sys/kernel/random/boot_id). A
// ProcessID means nothing after a reboot, while a file-backed region can
// outlive one: stamp the boot id next to recorded ProcessIDs and treat every
// recorded process as dead when it differs. The value is cached after the
// first success.
func BootID() (string, error) {
	if p := bootID.Load(); p != nil {
		return *p, nil
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("shm: boot id: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if !isUUID(s) {
		return "", fmt.Errorf("shm: boot id: malformed %q", s)
	}
	bootID.Store(&s)
	return s, nil
}

// isUUID reports whether s has the textual form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
// (lower- or upper-case hex).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func unreadable(pid int32, err error) error {
	return fmt.Errorf("%w: pid %d: %v", ErrProcUnreadable, pid, err)
}

// procTask is what Status needs from /proc/<pid>/stat.
type procTask struct {
	pid     int32  // field 1
	state   byte   // field 3
	threads uint64 // field 20, num_threads
	start   uint64 // field 22, starttime
}

// exited reports whether the task is a finished process. A leader that
// exited alone stays in state Z while its other threads run; they still count
// in num_threads until released, so a Z with more than one thread is treated
// as alive (during an exit_group this also covers the brief window in which
// the leader is Z and the others are not yet released: alive errs safely).
func (t procTask) exited() bool {
	return (t.state == 'Z' || t.state == 'X') && t.threads <= 1
}

// procProbe holds /proc/<pid> open so that every file read through it
// describes the same task: the directory pins the kernel's struct pid, so if
// the task dies and the pid is recycled between two reads, the second read
// fails (ENOENT/ESRCH) instead of describing the new holder.
type procProbe struct {
	pid   int32
	dirfd int
	task  procTask
}

func (pr *procProbe) close() { unix.Close(pr.dirfd) }

// openProbe opens /proc/<pid> and reads its stat. gone is true when no task
// has the pid (which then also holds for any process recorded with it).
func openProbe(pid int32) (pr procProbe, gone bool, err error) {
	if pid <= 0 {
		return pr, false, unreadable(pid, errors.New("not a process id"))
	}
	if err := checkProcMount(); err != nil {
		// This /proc cannot be trusted about pid, but kill can still prove
		// the pid free.
		if killSaysNoSuchPID(pid) {
			return pr, true, nil
		}
		return pr, false, unreadable(pid, err)
	}
	path := "/proc/" + strconv.FormatInt(int64(pid), 10)
	dirfd, err := openRetry(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		if err == unix.ENOENT || err == unix.ESRCH {
			// Absent from /proc. With hidepid=2 (invisible) other users'
			// processes are absent too, so confirm with kill, which
			// answers EPERM (not ESRCH) for a live process we may not see.
			if killSaysNoSuchPID(pid) {
				return pr, true, nil
			}
			return pr, false, unreadable(pid, fmt.Errorf("%s absent but kill(%d, 0) finds it (hidepid?)", path, pid))
		}
		return pr, false, unreadable(pid, fmt.Errorf("open %s: %w", path, err))
	}
	var buf [4096]byte
	n, full, err := readFileAt(dirfd, "stat", buf[:])
	if err != nil {
		unix.Close(dirfd)
		if err == unix.ENOENT || err == unix.ESRCH {
			// The task held by dirfd was reaped after we opened it.
			return pr, true, nil
		}
		return pr, false, unreadable(pid, fmt.Errorf("read %s/stat: %w", path, err))
	}
	if full {
		unix.Close(dirfd)
		return pr, false, unreadable(pid, fmt.Errorf("%s/stat longer than %d bytes", path, len(buf)))
	}
	t, err := parseStatFields(buf[:n])
	if err != nil {
		unix.Close(dirfd)
		return pr, false, unreadable(pid, fmt.Errorf("%s/stat: %v", path, err))
	}
	if t.pid != pid {
		unix.Close(dirfd)
		return pr, false, unreadable(pid, fmt.Errorf("%s/stat names pid %d", path, t.pid))
	}
	return procProbe{pid: pid, dirfd: dirfd, task: t}, false, nil
}

// isLeader reports whether the probed task is a thread-group leader (a
// process) rather than a non-leader thread, whose tid /proc also resolves.
// It reads /proc/<pid>/status, so it is only called when the answer matters.
// gone is true when the probed task was reaped since the stat read.
func (pr *procProbe) isLeader() (leader, gone bool, err error) {
	var buf [4096]byte
	n, _, err := readFileAt(pr.dirfd, "status", buf[:])
	if err != nil {
		if err == unix.ENOENT || err == unix.ESRCH {
			return false, true, nil
		}
		return false, false, unreadable(pr.pid, fmt.Errorf("read /proc/%d/status: %w", pr.pid, err))
	}
	// A full buffer is fine: Tgid is on line 4 and must end in a newline.
	tgid, err := parseStatusTgid(buf[:n])
	if err != nil {
		return false, false, unreadable(pr.pid, fmt.Errorf("/proc/%d/status: %v", pr.pid, err))
	}
	return tgid == pr.pid, false, nil
}

var procMountOK atomic.Bool

// checkProcMount verifies that /proc belongs to this process's pid namespace
// (readlink /proc/self == getpid): otherwise /proc/<pid> describes some other
// process, and its start time would "prove" a live process dead. Success is
// cached.
func checkProcMount() error {
	if procMountOK.Load() {
		return nil
	}
	var buf [32]byte
	n, err := unix.Readlink("/proc/self", buf[:])
	if err != nil {
		return fmt.Errorf("readlink /proc/self: %w", err)
	}
	if want := strconv.Itoa(os.Getpid()); string(buf[:n]) != want {
		return fmt.Errorf("/proc/self is %q, not %s: /proc is another pid namespace's", buf[:n], want)
	}
	procMountOK.Store(true)
	return nil
}

// killSaysNoSuchPID reports whether kill(pid, 0) proves that no process has
// pid. EPERM means one exists under another user; success includes zombies.
func killSaysNoSuchPID(pid int32) bool {
	return unix.Kill(int(pid), 0) == unix.ESRCH
}

func openRetry(dirfd int, path string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readFileAt reads dirfd/name into buf until EOF. full is true when buf
// filled up before EOF (the content was cut short).
func readFileAt(dirfd int, name string, buf []byte) (n int, full bool, err error) {
	fd, err := openRetry(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return 0, false, err
	}
	defer unix.Close(fd)
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, false, err
		}
		if m <= 0 {
			return n, false, nil
		}
		n += m
	}
	// Full: see whether anything is left.
	var one [1]byte
	for {
		m, err := unix.Read(fd, one[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, false, err
		}
		return n, m > 0, nil
	}
}

// parseStat parses the contents of /proc/<pid>/stat and returns field 3
// (state) and field 22 (starttime). Errors wrap ErrProcUnreadable.
func parseStat(b []byte) (state byte, start uint64, err error) {
	t, err := parseStatFields(b)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrProcUnreadable, err)
	}
	return t.state, t.start, nil
}

// parseStatFields parses a /proc/<pid>/stat line strictly: the kernel prints
// "pid (comm) state f4 ... f52\n" with single spaces. comm (field 2) is any
// bytes the process chose, including spaces, parentheses and newlines, so it
// is delimited by the first "(" and the LAST ")": no later field can contain
// ')'. Fields are counted after that ')'.
func parseStatFields(b []byte) (procTask, error) {
	var t procTask
	if len(b) == 0 {
		return t, errors.New("empty")
	}
	if b[len(b)-1] != '\n' {
		return t, errors.New("no trailing newline (truncated?)")
	}
	b = b[:len(b)-1]
	sp := bytes.IndexByte(b, ' ')
	if sp <= 0 || sp+1 >= len(b) || b[sp+1] != '(' {
		return t, errors.New(`no "pid (" prefix`)
	}
	pid, ok := parseDecimal(b[:sp])
	if !ok || pid == 0 || pid > 1<<31-1 {
		return t, fmt.Errorf("bad pid %q", b[:sp])
	}
	t.pid = int32(pid)
	closeParen := bytes.LastIndexByte(b, ')')
	if closeParen < sp+1 {
		return t, errors.New(`no ")" closing the command name`)
	}
	rest := b[closeParen+1:]
	if len(rest) == 0 || rest[0] != ' ' {
		return t, errors.New(`no fields after ")"`)
	}
	rest = rest[1:]
	// Token i after ')' is field i+3.
	const (
		stateTok   = 0  // field 3
		threadsTok = 17 // field 20
		startTok   = 19 // field 22
	)
	for i := 0; i <= startTok; i++ {
		if len(rest) == 0 {
			return t, fmt.Errorf("only %d fields", i+2)
		}
		end := bytes.IndexByte(rest, ' ')
		var tok []byte
		if end < 0 {
			tok, rest = rest, nil
		} else {
			tok, rest = rest[:end], rest[end+1:]
			if len(rest) == 0 {
				return t, errors.New("trailing space")
			}
		}
		if len(tok) == 0 {
			return t, fmt.Errorf("field %d empty", i+3)
		}
		switch i {
		case stateTok:
			c := tok[0]
			if len(tok) != 1 || !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
				return t, fmt.Errorf("bad state %q", tok)
			}
			t.state = c
		case threadsTok:
			v, ok := parseDecimal(tok)
			if !ok {
				return t, fmt.Errorf("bad num_threads %q", tok)
			}
			t.threads = v
		case startTok:
			v, ok := parseDecimal(tok)
			if !ok {
				return t, fmt.Errorf("bad starttime %q", tok)
			}
			t.start = v
		}
	}
	return t, nil
}

// parseStatusTgid finds the "Tgid:\t<n>\n" line of /proc/<pid>/status. The
// Name line cannot fake it: status escapes newlines in the command name.
func parseStatusTgid(b []byte) (int32, error) {
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			break // unterminated (cut short): not trusted
		}
		line := b[:nl]
		b = b[nl+1:]
		const key = "Tgid:"
		if len(line) < len(key) || string(line[:len(key)]) != key {
			continue
		}
		v := line[len(key):]
		for len(v) > 0 && (v[0] == '\t' || v[0] == ' ') {
			v = v[1:]
		}
		n, ok := parseDecimal(v)
		if !ok || n == 0 || n > 1<<31-1 {
			return 0, fmt.Errorf("bad Tgid %q", v)
		}
		return int32(n), nil
	}
	return 0, errors.New("no Tgid line")
}

// parseDecimal parses a number as the kernel prints it: ASCII digits with no
// sign, spaces or leading zeros, into a uint64, rejecting overflow.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
