package main

import (
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Every shm.CrashPoint call of the bridge names a point declared in its
// crashpoints.go, and every declared point has a call (TestMain then
// checks, on a full run, that a test killed a bridge at each).
func TestBridgeCrashPointCallsNameDeclaredPoints(t *testing.T) {
	proctest.CheckCrashPointCalls(t, bridgeDir)
}
