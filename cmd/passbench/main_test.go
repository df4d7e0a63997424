package main

import (
	"os"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// TestMain lets the test binary double as every child process: the
// measurements re-execute os.Executable(), which in a test is this binary.
func TestMain(m *testing.M) {
	if isChild() {
		os.Exit(childMain())
	}
	// Under the race detector every process sleeps a second on exit by
	// default (GORACE atexit_sleep_ms); spare the children that, since a
	// run waits for its producers, then its consumers, to exit.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	code := m.Run()
	proctest.RemoveBuilds()
	os.Exit(code)
}
