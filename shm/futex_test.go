package shm

import (
	"errors"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Environment variables and roles for TestFutexHelperProcess children.
const (
	futexTestFileEnv   = "SHMKIT_TEST_FUTEX_FILE"
	futexTestRoundsEnv = "SHMKIT_TEST_FUTEX_ROUNDS"

	futexRoleWake     = "futex-wake"
	futexRolePingPong = "futex-pingpong"
	futexRoleMonoNow  = "futex-mononow"
	futexRoleCrash    = "futex-crash"
)

// Layout of the 4096-byte test mapping; each field on its own cache line.
const (
	futexTestWordOff   = 0   // uint32: the futex word
	futexTestResultOff = 64  // uint32: a result the child reports
	futexTestStampOff  = 128 // int64: a MonoNow stamp from the child
)

// TestFutexHelperProcess is the body of the child processes started by the
// cross-process tests of futex.go, clock.go and crashpoint.go. In the parent it
// returns at once.
func TestFutexHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok {
		return
	}
	switch role {
	case futexRoleWake:
		futexChildWake(t)
	case futexRolePingPong:
		futexChildPingPong(t)
	case futexRoleMonoNow:
		monoChildStamp(t)
	case futexRoleCrash:
		crashChild(t)
	default:
		// Another helper's role (the binary is shared): not ours.
		t.Skipf("role %q is not a futex helper role", role)
	}
}

// futexTestMapping creates a 4096-byte file in t.TempDir() and maps it
// MAP_SHARED; children map the same file by path.
func futexTestMapping(t testing.TB) (path string, mem []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "futex")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	return path, futexMapFD(t, int(f.Fd()))
}

// futexOpenMapping maps the file a parent passed in futexTestFileEnv.
func futexOpenMapping(t testing.TB) []byte {
	t.Helper()
	path := os.Getenv(futexTestFileEnv)
	if path == "" {
		t.Fatalf("%s not set", futexTestFileEnv)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return futexMapFD(t, int(f.Fd()))
}

func futexMapFD(t testing.TB, fd int) []byte {
	t.Helper()
	mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	return mem
}

func futexU32(mem []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

func futexI64(mem []byte, off int) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&mem[off]))
}

func TestFutexWaitMismatchReturnsNil(t *testing.T) {
	var w atomic.Uint32
	w.Store(7)
	for _, timeout := range []time.Duration{-1, 0, time.Nanosecond, 10 * time.Second} {
		if err := FutexWait(&w, 6, timeout); err != nil {
			t.Errorf("FutexWait(word=7, expect=6, %v) = %v, want nil", timeout, err)
		}
	}
}

func TestFutexWaitTimeout(t *testing.T) {
	var w atomic.Uint32
	for _, timeout := range []time.Duration{time.Microsecond, 20 * time.Millisecond} {
		start := MonoNow()
		err := FutexWait(&w, 0, timeout)
		elapsed := time.Duration(MonoNow() - start)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("FutexWait(%v) = %v, want ErrTimeout", timeout, err)
		}
		if elapsed < timeout {
			t.Errorf("FutexWait(%v) returned after %v, before its timeout", timeout, elapsed)
		}
	}
	// A zero timeout only compares.
	if err := FutexWait(&w, 0, 0); !errors.Is(err, ErrTimeout) {
		t.Errorf("FutexWait(timeout 0, equal) = %v, want ErrTimeout", err)
	}
}

func TestFutexZeroAllocs(t *testing.T) {
	var w atomic.Uint32
	w.Store(1)
	cases := []struct {
		name string
		f    func()
	}{
		{"wait mismatch untimed", func() { _ = FutexWait(&w, 0, -1) }},
		{"wait mismatch timed", func() { _ = FutexWait(&w, 0, time.Second) }},
		// The timespec path through the kernel, ending in ETIMEDOUT.
		{"wait timed out", func() { _ = FutexWait(&w, 1, time.Microsecond) }},
		{"wake no waiter", func() { _, _ = FutexWake(&w, 1) }},
		{"wake all no waiter", func() { _, _ = FutexWake(&w, 0) }},
	}
	for _, c := range cases {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocs per call, want 0", c.name, n)
		}
	}
}

func TestFutexWakeNoWaiter(t *testing.T) {
	var w atomic.Uint32
	for _, n := range []int{-1, 0, 1, 5, math.MaxInt32, math.MaxInt} {
		got, err := FutexWake(&w, n)
		if err != nil || got != 0 {
			t.Errorf("FutexWake(n=%d) with no waiter = %d, %v; want 0, nil", n, got, err)
		}
	}
}

// TestFutexWakeCount parks three goroutines on one word and checks the count
// FutexWake reports: never more than n, and all of them for n <= 0 or
// math.MaxInt32. A woken waiter re-checks the word and parks again, so the
// test retries until the waiters are all asleep at the moment of the wake.
func TestFutexWakeCount(t *testing.T) {
	const waiters = 3
	var w atomic.Uint32
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.Load() == 0 {
				if err := FutexWait(&w, 0, -1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	defer func() {
		w.Store(1)
		if _, err := FutexWake(&w, 0); err != nil {
			t.Error(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("waiter: %v", err)
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	wakeUntil := func(n, want int) {
		t.Helper()
		for {
			got, err := FutexWake(&w, n)
			if err != nil {
				t.Fatal(err)
			}
			if got > want {
				t.Fatalf("FutexWake(n=%d) woke %d, more than %d", n, got, want)
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("FutexWake(n=%d) never woke %d waiters (last %d)", n, want, got)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wakeUntil(1, 1)
	wakeUntil(2, 2)
	wakeUntil(0, waiters)
	wakeUntil(-1, waiters)
	wakeUntil(math.MaxInt32, waiters)
}

// TestFutexCrossProcessWake has a child process set the shared word and wake
// the parent, which sleeps in FutexWait. The child first wakes the parent with
// the word unchanged until a wake reports one waiter woken: that proves a
// wake issued by another process reaches a sleeper here (a private futex
// would not).
func TestFutexCrossProcessWake(t *testing.T) {
	path, mem := futexTestMapping(t)
	w := futexU32(mem, futexTestWordOff)
	result := futexU32(mem, futexTestResultOff)
	child := proctest.Start(t, "TestFutexHelperProcess", futexRoleWake, futexTestFileEnv+"="+path)

	deadline := MonoNow() + int64(30*time.Second)
	for w.Load() == 0 {
		if MonoNow() > deadline {
			t.Fatal("word still 0 after 30 s: the child's store or wake never arrived")
		}
		if err := FutexWait(w, 0, 5*time.Second); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
	}
	if got := w.Load(); got != 1 {
		t.Fatalf("word = %d, want 1", got)
	}
	child.MustSucceed(t)
	if got := result.Load(); got != 1 {
		t.Errorf("child's probing wake woke %d waiters, want 1", got)
	}
}

func futexChildWake(t *testing.T) {
	mem := futexOpenMapping(t)
	w := futexU32(mem, futexTestWordOff)
	result := futexU32(mem, futexTestResultOff)
	deadline := MonoNow() + int64(20*time.Second)
	for {
		n, err := FutexWake(w, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			result.Store(uint32(n))
			break
		}
		if MonoNow() > deadline {
			t.Fatal("parent never seen asleep on the word")
		}
		time.Sleep(time.Millisecond)
	}
	w.Store(1)
	if _, err := FutexWake(w, 0); err != nil {
		t.Fatal(err)
	}
}

// TestFutexCrossProcessPingPong passes the turn back and forth between the
// parent and a child through one word: the parent turns 2i into 2i+1, the
// child 2i+1 into 2i+2, each waking the other and sleeping in FutexWait until
// its turn. Every value either side sees must be exactly the next one, and no
// wait may time out: a lost wake-up would leave one side asleep.
func TestFutexCrossProcessPingPong(t *testing.T) {
	const rounds = 1000
	path, mem := futexTestMapping(t)
	w := futexU32(mem, futexTestWordOff)
	child := proctest.Start(t, "TestFutexHelperProcess", futexRolePingPong,
		futexTestFileEnv+"="+path, futexTestRoundsEnv+"="+strconv.Itoa(rounds))

	for i := uint32(0); i < rounds; i++ {
		if got := w.Load(); got != 2*i {
			t.Fatalf("round %d: parent's turn with word %d, want %d", i, got, 2*i)
		}
		w.Store(2*i + 1)
		if _, err := FutexWake(w, 1); err != nil {
			t.Fatal(err)
		}
		if err := futexAwaitChange(w, 2*i+1); err != nil {
			select {
			case <-child.Done():
				out, errOut := child.Output()
				t.Fatalf("round %d: %v; child exited: %v\nstdout:\n%s\nstderr:\n%s", i, err, child.Wait(), out, errOut)
			default:
			}
			t.Fatalf("round %d: %v", i, err)
		}
		if got := w.Load(); got != 2*i+2 {
			t.Fatalf("round %d: parent woke to word %d, want %d", i, got, 2*i+2)
		}
	}
	child.MustSucceed(t)
}

// futexAwaitChange sleeps until *w != old. A wait that times out is reported:
// in a ping-pong the other side always wakes us well within the limit.
func futexAwaitChange(w *atomic.Uint32, old uint32) error {
	for w.Load() == old {
		if err := FutexWait(w, old, 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func futexChildPingPong(t *testing.T) {
	mem := futexOpenMapping(t)
	w := futexU32(mem, futexTestWordOff)
	rounds, err := strconv.Atoi(os.Getenv(futexTestRoundsEnv))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < uint32(rounds); i++ {
		if err := futexAwaitChange(w, 2*i); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if got := w.Load(); got != 2*i+1 {
			t.Fatalf("round %d: child woke to word %d, want %d", i, got, 2*i+1)
		}
		w.Store(2*i + 2)
		if _, err := FutexWake(w, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFutexWaitSignalStorm sends SIGUSR1, which Go handles, straight to the
// thread sleeping in a timed wait. The kernel does not restart a timed
// FUTEX_WAIT after a handler ran; FutexWait must resume on its own and time
// out no earlier than asked.
func TestFutexWaitSignalStorm(t *testing.T) {
	// The registration is never undone: a signal still in flight after
	// signal.Stop would hit the default action and kill the test binary.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGUSR1)

	var w atomic.Uint32
	const timeout = 200 * time.Millisecond

	// storm calls wait on a locked thread while another goroutine keeps
	// sending SIGUSR1 to that thread, and returns wait's result and the
	// number of signals the process received.
	storm := func(wait func() error) (error, int) {
		tid := make(chan int)
		result := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid <- unix.Gettid()
			result <- wait()
		}()
		target := <-tid
		pid := os.Getpid()
		received := 0
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case err := <-result:
				return err, received
			case <-sigs:
				received++
			case <-tick.C:
				if err := unix.Tgkill(pid, target, unix.SIGUSR1); err != nil {
					t.Fatalf("tgkill: %v", err)
				}
			}
		}
	}

	// First prove the storm reaches the waiter: a raw timed FUTEX_WAIT
	// must come back with EINTR, or this test would prove nothing.
	rawErr, _ := storm(func() error {
		ts := unix.NsecToTimespec(int64(5 * time.Second))
		_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w)), futexWait, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
		return errno
	})
	if rawErr != unix.EINTR {
		t.Fatalf("raw timed FUTEX_WAIT under signals returned %v, want EINTR", rawErr)
	}

	var elapsed time.Duration
	err, received := storm(func() error {
		start := MonoNow()
		err := FutexWait(&w, 0, timeout)
		elapsed = time.Duration(MonoNow() - start)
		return err
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("FutexWait(%v) under signals = %v, want ErrTimeout", timeout, err)
	}
	if elapsed < timeout {
		t.Fatalf("FutexWait(%v) under signals returned after %v", timeout, elapsed)
	}
	if received == 0 {
		t.Error("no SIGUSR1 was received during the wait")
	}
	t.Logf("timed out after %v; %d signals received", elapsed, received)
}
