package transport

import (
	"os"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// A full run of this package's tests must kill a child at every crash
// point crashpoints.go declares, and at the participant table's (its own
// package has no process tests): a crash window nobody kills at is one
// whose recovery is untested.
func TestMain(m *testing.M) { os.Exit(proctest.RunCoveringCrashPoints(m, ".", "internal/peers")) }

func TestCrashPointCallsNameDeclaredPoints(t *testing.T) {
	proctest.CheckCrashPointCalls(t, ".")
	proctest.CheckCrashPointCalls(t, "internal/peers")
}
