package proctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helper-process harness every crash and chaos test shares: the
// child's opening (the role switch, its environment, its random numbers),
// the parent's runs of a child (to a clean exit, or to its death at an
// armed crash point), and the "word value" lines children log.

// CrashPointEnv and CrashPointAfterEnv are shm.CrashPointEnv and
// shm.CrashPointAfterEnv (shm's tests check they agree; proctest cannot
// import shm, whose tests import proctest): the crash point a child kills
// itself at, and on which pass of it.
const (
	CrashPointEnv      = "SHMKIT_CRASHPOINT"
	CrashPointAfterEnv = "SHMKIT_CRASHPOINT_AFTER"
)

// PathEnv carries the path of the file a child opens.
const PathEnv = "SHMKIT_TEST_PATH"

// ChildSeedEnv carries the seed of a child's random numbers (ChildRand).
const ChildSeedEnv = "CHILD_SEED"

// Helper names a helper test and the prefix of the roles it answers to.
// A package declares one per helper test, for example
//
//	var ringHelper = proctest.Helper{Test: "TestRingHelperProcess", Prefix: "ring-"}
//
// and its helper test calls ringHelper.Serve; the parent starts children
// with the other methods, naming roles without the prefix.
type Helper struct {
	Test   string // the helper test's name
	Prefix string // every role it plays starts with this
}

// Serve is the child side: it returns at once in the parent, and in a
// child whose role starts with h.Prefix it calls run with the rest of the
// role and exits, 0 if run returned nil and 1 (after writing "child: "
// and the error to stderr) if not. Call it at the top of the helper test.
func (h Helper) Serve(run func(role string) error) {
	role, ok := Role()
	RunTruncator(role) // any helper test can host a truncator (StartTruncator)
	if !ok || !strings.HasPrefix(role, h.Prefix) {
		return
	}
	if err := run(strings.TrimPrefix(role, h.Prefix)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Start starts a child in role (without the prefix), bounded by
// DefaultTimeout.
func (h Helper) Start(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	return StartTimeout(t, DefaultTimeout, h.Test, h.Prefix+role, env...)
}

// Run runs a child in role to its end and fails the test unless it
// exited 0.
func (h Helper) Run(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	return Run(t, h.Test, h.Prefix+role, env...)
}

// RunToCrash is RunToCrash for a role of h.
func (h Helper) RunToCrash(t testing.TB, role, point string, after int, env ...string) *Child {
	t.Helper()
	return RunToCrash(t, h.Test, h.Prefix+role, point, after, env...)
}

// Run starts a child of helperTest in role, waits for it and fails the
// test, with the child's output, unless it exited 0.
func Run(t testing.TB, helperTest, role string, env ...string) *Child {
	t.Helper()
	c := StartTimeout(t, DefaultTimeout, helperTest, role, env...)
	c.MustSucceed(t)
	return c
}

// RunToCrash starts a child of helperTest in role armed to kill itself at
// the crash point the after-th time it passes it (Arm), waits for it, and
// fails the test unless it died there (WaitKilled).
func RunToCrash(t testing.TB, helperTest, role, point string, after int, env ...string) *Child {
	t.Helper()
	c := StartTimeout(t, DefaultTimeout, helperTest, role, append(env, Arm(point, after)...)...)
	c.WaitKilled(t, point)
	return c
}

// Arm returns the environment entries that make a child kill itself at
// the crash point the after-th time it passes it.
func Arm(point string, after int) []string {
	return []string{CrashPointEnv + "=" + point, CrashPointAfterEnv + "=" + strconv.Itoa(after)}
}

// PathArg is the environment entry that hands a child path (EnvPath).
func PathArg(path string) string { return PathEnv + "=" + path }

// EnvPath is the path the parent handed this child (PathArg).
func EnvPath() string { return os.Getenv(PathEnv) }

// EnvInt is the integer in the environment variable key, 0 if it is unset.
// A value that is not an integer panics: a mistyped setting would make a
// child do something else than the test says.
func EnvInt(key string) int {
	return int(envNumber(key, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 0) }))
}

// EnvUint64 is EnvInt for an unsigned 64-bit value.
func EnvUint64(key string) uint64 {
	return envNumber(key, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
}

func envNumber[T int64 | uint64](key string, parse func(string) (T, error)) T {
	s := os.Getenv(key)
	if s == "" {
		return 0
	}
	v, err := parse(s)
	if err != nil {
		panic(fmt.Sprintf("proctest: %s=%q: %v", key, s, err))
	}
	return v
}

// Exists reports whether path exists (children watch for stop files).
func Exists(path string) bool { return fileExists(path) }

// SeededRand returns the random numbers of a run: seeded from the
// environment variable seedEnv if it is set, else from the clock. It logs
// the seed and how to rerun with it.
func SeededRand(t testing.TB, seedEnv string) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with %s=%d)", seed, seedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// ChildSeed draws a seed for a child's ChildRand from the parent's rng and
// returns the environment entry that hands it over.
func ChildSeed(rng *rand.Rand) string {
	return ChildSeedEnv + "=" + strconv.FormatUint(rng.Uint64(), 10)
}

// ChildRand is a child's random numbers: from the seed its parent handed
// it (ChildSeed) and its pid.
func ChildRand() *rand.Rand {
	return rand.New(rand.NewPCG(EnvUint64(ChildSeedEnv), uint64(os.Getpid())))
}

// Log is what a child logged in "word value" lines (two fields, the value
// an unsigned integer), by word, in order. Other lines are left out.
type Log map[string][]uint64

// ParseLog parses a child's output into a Log.
func ParseLog(out string) Log {
	l := Log{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			l[f[0]] = append(l[f[0]], v)
		}
	}
	return l
}

// Ints returns the values logged with word, as ints.
func (l Log) Ints(word string) []int {
	out := make([]int, len(l[word]))
	for i, v := range l[word] {
		out[i] = int(v)
	}
	return out
}

// Log parses what the child has written to stdout so far.
func (c *Child) Log() Log {
	out, _ := c.Output()
	return ParseLog(out)
}

// DiedAt waits for the child and reports whether it died at the crash
// point: killed, with the crash-point mark naming point on its stderr.
func (c *Child) DiedAt(point string) bool {
	if c.Wait() == nil {
		return false
	}
	_, errOut := c.Output()
	return markedAt(errOut, point)
}

// markedAt reports whether stderr has the line a child writes just before
// it kills itself at point.
func markedAt(stderr, point string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		if name, ok := strings.CutPrefix(line, CrashPointMark); ok && strings.TrimSpace(name) == point {
			return true
		}
	}
	return false
}
