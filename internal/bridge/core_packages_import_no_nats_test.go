package bridge

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The core packages (layout, shm, transport, sched) import nothing of
// NATS, directly or not: a program using the library compiles no NATS
// code. Only this package and cmd/shmbridge may.
func TestCorePackagesImportNoNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goTool, "list", "-deps", "./layout/...", "./shm/...", "./transport/...", "./sched/...")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed only %v", deps)
	}
	for _, d := range deps {
		if strings.Contains(d, "nats-io") {
			t.Errorf("a core package depends on %s", d)
		}
	}
}
