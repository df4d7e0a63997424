package shm

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/proctest"
)

func clockGettimeMono(t testing.TB) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestMonoNowIsClockMonotonic checks that MonoNow reads the same clock as
// clock_gettime(CLOCK_MONOTONIC): each reading lies between two system-call
// readings taken around it.
func TestMonoNowIsClockMonotonic(t *testing.T) {
	for i := range 1000 {
		before := clockGettimeMono(t)
		now := MonoNow()
		after := clockGettimeMono(t)
		if now < before || now > after {
			t.Fatalf("reading %d: MonoNow %d outside CLOCK_MONOTONIC [%d, %d]", i, now, before, after)
		}
	}
}

func TestMonoNowNeverGoesBack(t *testing.T) {
	prev := MonoNow()
	for i := range 100000 {
		now := MonoNow()
		if now < prev {
			t.Fatalf("reading %d: MonoNow went back from %d to %d", i, prev, now)
		}
		prev = now
	}
}

func TestMonoNowAdvancesWithTime(t *testing.T) {
	start := MonoNow()
	time.Sleep(10 * time.Millisecond)
	if d := time.Duration(MonoNow() - start); d < 10*time.Millisecond {
		t.Errorf("MonoNow advanced %v over a 10 ms sleep", d)
	}
}

// TestMonoNowCrossProcess has a child store its MonoNow in shared memory; the
// parent's readings before the child started and after it exited must bracket
// it, which holds only for a clock shared by all processes.
func TestMonoNowCrossProcess(t *testing.T) {
	path, mem := futexTestMapping(t)
	stamp := futexI64(mem, futexTestStampOff)
	before := MonoNow()
	child := proctest.Start(t, "TestFutexHelperProcess", futexRoleMonoNow, futexTestFileEnv+"="+path)
	child.MustSucceed(t)
	after := MonoNow()
	got := stamp.Load()
	if got < before || got > after {
		t.Fatalf("child's MonoNow %d outside the parent's [%d, %d]", got, before, after)
	}
	t.Logf("child stamped %v after the parent's first reading, %v before its last",
		time.Duration(got-before), time.Duration(after-got))
}

func monoChildStamp(t *testing.T) {
	mem := futexOpenMapping(t)
	futexI64(mem, futexTestStampOff).Store(MonoNow())
}
