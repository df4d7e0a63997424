package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// A command under test is built once per test process, by the first test
// that needs the binary (child processes and fuzz workers, which run no
// such test, never build), into a directory RemoveBuilds deletes.
var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// BuildCommand builds the main package in the test's directory as name
// and returns the binary's path. Call it before starting any deadline
// for the command's run: the first call builds, and a build on a cold
// cache on a loaded machine can take longer than the run's deadline.
func BuildCommand(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", name+"-test-"); buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, name)
		if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building %s: %v\n%s", name, err, out)
			return
		}
		buildPath = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// RemoveBuilds deletes what BuildCommand built; call it from TestMain.
func RemoveBuilds() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
