package hashmap

import (
	"os"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// A full run of this package's tests must kill a child at every crash
// point crashpoints.go declares: a crash window nobody kills at is one
// whose recovery is untested.
func TestMain(m *testing.M) { os.Exit(proctest.RunCoveringCrashPoints(m, ".")) }

func TestCrashPointCallsNameDeclaredPoints(t *testing.T) { proctest.CheckCrashPointCalls(t, ".") }
