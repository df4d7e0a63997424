package proctest

import (
	"os"
	"strconv"
	"testing"
)

// SoakLoopsEnv sets how many children a crash loop runs (the
// participant-table tests of issue 15: processes that attach, take
// something and die by SIGKILL, one after another, on a small table).
// scripts/soak.sh sets it to 3000; the normal suite runs fewer.
const SoakLoopsEnv = "SHMKIT_SOAK_LOOPS"

// SoakLoops is the number of children a crash loop runs: SoakLoopsEnv
// when set, else 250 (100 under -race, where a child costs ~30 ms here
// instead of ~6 ms; 40 with -short).
func SoakLoops(t testing.TB) int {
	t.Helper()
	if s := os.Getenv(SoakLoopsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("%s=%q: want an integer >= 2", SoakLoopsEnv, s)
		}
		return n
	}
	switch {
	case testing.Short():
		return 40
	case RaceEnabled:
		return 100
	}
	return 250
}
