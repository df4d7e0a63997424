package shm

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// CrashPointEnv names the crash point at which this process SIGKILLs itself,
// for example SHMKIT_CRASHPOINT=ring.push.after-claim. Crash-safety tests run a
// child with it set to prove that the survivors recover from a death at that
// exact step, which random kills would reach only by luck.
const CrashPointEnv = "SHMKIT_CRASHPOINT"

// CrashPointAfterEnv (optional, default 1) makes the process die the Nth time
// it passes the armed point, so a test can let some operations complete first
// and leave shared state that is not empty when the crash happens.
const CrashPointAfterEnv = "SHMKIT_CRASHPOINT_AFTER"

// CrashPointMark starts the line a process writes to its stderr just before
// it kills itself at a crash point (followed by the point's name), so that a
// test harness can tell a death at the armed point from any other SIGKILL.
const CrashPointMark = "shm: killed at crash point "

// crashArmed is read on every CrashPoint call; it is written only during
// package initialisation, so the read needs no synchronisation.
var (
	crashArmed bool
	crash      crashState
)

// crashState is the armed point and how many times it has been passed.
type crashState struct {
	name  string
	after int64
	hits  atomic.Int64
}

func init() {
	name, after, err := parseCrashEnv(os.Getenv)
	if err != nil {
		// A mistyped count would silently move the crash elsewhere and
		// make a crash test pass for the wrong reason: refuse to run.
		panic(err)
	}
	if name != "" {
		crash.name, crash.after = name, after
		crashArmed = true
	}
}

// parseCrashEnv reads the crash-point configuration through getenv.
func parseCrashEnv(getenv func(string) string) (name string, after int64, err error) {
	name = getenv(CrashPointEnv)
	if name == "" {
		return "", 0, nil
	}
	after = 1
	if s := getenv(CrashPointAfterEnv); s != "" {
		after, err = strconv.ParseInt(s, 10, 64)
		if err != nil || after < 1 {
			return "", 0, fmt.Errorf("shm: %s=%q: want an integer >= 1", CrashPointAfterEnv, s)
		}
	}
	return name, after, nil
}

// hit counts one pass of the named point and reports whether this pass must
// crash. Every pass from the Nth on reports true, so that concurrent
// goroutines racing past the point cannot slip through while the kill lands.
func (c *crashState) hit(name string) bool {
	if name != c.name {
		return false
	}
	return c.hits.Add(1) >= c.after
}

// CrashPoint marks a step of a multi-step shared-memory update at which a
// crash-safety test may kill this process. If name is the armed point
// (CrashPointEnv) and this is the armed pass (CrashPointAfterEnv), the
// process sends itself SIGKILL: no deferred calls, no exit hooks and no
// flushing run, just as when the OOM killer or an operator strikes.
//
// When nothing is armed it costs one predictable branch on a variable set at
// start-up, and it inlines, so it can stay in production code paths.
func CrashPoint(name string) {
	if crashArmed {
		crashSlow(name)
	}
}

//go:noinline
func crashSlow(name string) {
	if !crash.hit(name) {
		return
	}
	_, _ = unix.Write(2, []byte(CrashPointMark+name+"\n"))
	_ = unix.Kill(os.Getpid(), unix.SIGKILL)
	// SIGKILL to ourselves is fatal before kill(2) returns to user space;
	// should it ever not be, never continue past the crash point. Sleep
	// rather than select{} so the runtime cannot report a deadlock instead.
	for {
		time.Sleep(time.Hour)
	}
}

// ArmedCrashPoint returns the armed crash point ("" if none), so a test child
// can log what it was configured to do.
func ArmedCrashPoint() string {
	return crash.name
}
