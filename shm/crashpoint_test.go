package shm

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

const crashTestPoint = "shm.test.crashpoint"

func TestCrashPointUnarmedInParent(t *testing.T) {
	if name := ArmedCrashPoint(); name != "" {
		t.Skipf("test binary runs with %s=%s", CrashPointEnv, name)
	}
	for range 3 {
		CrashPoint(crashTestPoint) // must return
	}
	if n := testing.AllocsPerRun(100, func() { CrashPoint(crashTestPoint) }); n != 0 {
		t.Errorf("unarmed CrashPoint: %v allocs, want 0", n)
	}
}

func TestParseCrashEnv(t *testing.T) {
	cases := []struct {
		point, after string
		wantName     string
		wantAfter    int64
		wantErr      bool
	}{
		{"", "", "", 0, false},
		{"", "junk", "", 0, false}, // AFTER alone arms nothing
		{"ring.push", "", "ring.push", 1, false},
		{"ring.push", "3", "ring.push", 3, false},
		{"ring.push", "0", "", 0, true},
		{"ring.push", "-2", "", 0, true},
		{"ring.push", "two", "", 0, true},
	}
	for _, c := range cases {
		env := map[string]string{CrashPointEnv: c.point, CrashPointAfterEnv: c.after}
		name, after, err := parseCrashEnv(func(k string) string { return env[k] })
		if (err != nil) != c.wantErr || name != c.wantName || after != c.wantAfter {
			t.Errorf("parseCrashEnv(%q, %q) = %q, %d, %v; want %q, %d, err=%v",
				c.point, c.after, name, after, err, c.wantName, c.wantAfter, c.wantErr)
		}
	}
}

// TestCrashStateConcurrentHits races goroutines past an armed point: exactly
// after-1 passes survive, every later one (not only the Nth) must crash, and
// other names never count.
func TestCrashStateConcurrentHits(t *testing.T) {
	const goroutines, passes, after = 8, 50, 100
	s := &crashState{name: crashTestPoint, after: after}
	var survived, crashed atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range passes {
				if s.hit("some.other.point") {
					t.Error("an unarmed name hit")
				}
				if s.hit(crashTestPoint) {
					crashed.Add(1)
				} else {
					survived.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if survived.Load() != after-1 || crashed.Load() != goroutines*passes-(after-1) {
		t.Errorf("survived %d, crashed %d; want %d, %d",
			survived.Load(), crashed.Load(), after-1, goroutines*passes-(after-1))
	}
}

// TestCrashPointKillsChild arms a child at its second pass of a point it
// passes three times: it must die by SIGKILL having reported one pass.
func TestCrashPointKillsChild(t *testing.T) {
	child := proctest.Start(t, "TestFutexHelperProcess", futexRoleCrash,
		CrashPointEnv+"="+crashTestPoint, CrashPointAfterEnv+"=2")
	err := child.Wait()
	out, errOut := child.Output()
	if err == nil || err.Error() != "signal: killed" {
		t.Fatalf("child exit: %v, want signal: killed\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if got := crashPassedLines(out); got != 1 {
		t.Errorf("child reported %d passes before dying, want 1\nstdout:\n%s", got, out)
	}
	if !strings.Contains(out, "armed "+crashTestPoint) {
		t.Errorf("child did not log its armed point\nstdout:\n%s", out)
	}
}

// TestCrashPointOtherPointArmed arms a point the child never passes: it must
// pass all three times and exit 0.
func TestCrashPointOtherPointArmed(t *testing.T) {
	child := proctest.Start(t, "TestFutexHelperProcess", futexRoleCrash,
		CrashPointEnv+"=shm.test.elsewhere", CrashPointAfterEnv+"=1")
	child.MustSucceed(t)
	out, _ := child.Output()
	if got := crashPassedLines(out); got != 3 {
		t.Errorf("child reported %d passes, want 3\nstdout:\n%s", got, out)
	}
}

// TestCrashPointBadAfterRefusesToRun: a child with a malformed count must
// fail at start-up, not crash somewhere else.
func TestCrashPointBadAfterRefusesToRun(t *testing.T) {
	child := proctest.Start(t, "TestFutexHelperProcess", futexRoleCrash,
		CrashPointEnv+"="+crashTestPoint, CrashPointAfterEnv+"=0")
	err := child.Wait()
	out, errOut := child.Output()
	if err == nil || err.Error() == "signal: killed" {
		t.Fatalf("child exit: %v, want a start-up failure\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if got := crashPassedLines(out); got != 0 {
		t.Errorf("child passed the point %d times despite a bad %s", got, CrashPointAfterEnv)
	}
	if !strings.Contains(errOut, CrashPointAfterEnv) {
		t.Errorf("stderr does not name %s:\n%s", CrashPointAfterEnv, errOut)
	}
}

func crashPassedLines(out string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "passed ") {
			n++
		}
	}
	return n
}

func crashChild(t *testing.T) {
	fmt.Printf("armed %s\n", ArmedCrashPoint())
	for i := 1; i <= 3; i++ {
		CrashPoint(crashTestPoint)
		fmt.Printf("passed %d\n", i)
	}
}

// The harness recognises a death at a crash point by the mark this
// package writes: they must agree.
func TestCrashPointMarkMatchesHarness(t *testing.T) {
	if CrashPointMark != proctest.CrashPointMark {
		t.Fatalf("shm.CrashPointMark %q, proctest.CrashPointMark %q", CrashPointMark, proctest.CrashPointMark)
	}
}

// The harness arms a child's crash point through this package's
// environment variables (proctest.Arm): their names must agree.
func TestCrashPointEnvMatchesHarness(t *testing.T) {
	if CrashPointEnv != proctest.CrashPointEnv || CrashPointAfterEnv != proctest.CrashPointAfterEnv {
		t.Fatalf("shm: %s, %s; proctest: %s, %s", CrashPointEnv, CrashPointAfterEnv, proctest.CrashPointEnv, proctest.CrashPointAfterEnv)
	}
}
