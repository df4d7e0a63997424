package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReadmeInstallStepPutsEveryToolOnThePath: issue 18, item 11 (the
// README had no install step). The README's Install block runs as
// written, in one shell from the checkout's root, with GOPATH pointed at
// a fresh directory (the module cache kept where it is, so nothing is
// downloaded): it installs ringctl, hbdump and passbench into
// $(go env GOPATH)/bin, puts them on PATH, and `ringctl --version` runs
// from there.
func TestReadmeInstallStepPutsEveryToolOnThePath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every tool")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Install")
	if !ok {
		t.Fatal("README.md has no Install section")
	}
	_, block, ok := strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("the Install section has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "go install ./cmd/...") {
		t.Fatalf("the Install block does not install the tools:\n%s", block)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin")
	modcache, err := exec.Command(filepath.Join(gobin, "go"), "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	gopath := t.TempDir()
	cmd := exec.Command("sh", "-e", "-c", block)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOPATH="+gopath, "GOMODCACHE="+strings.TrimSpace(string(modcache)),
		"GOBIN=", "PATH="+gobin+":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's install step: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "ringctl ") || !strings.Contains(string(out), "file format") {
		t.Fatalf("ringctl --version after the install printed:\n%s", out)
	}
	for _, tool := range []string{"ringctl", "hbdump", "passbench"} {
		if st, err := os.Stat(filepath.Join(gopath, "bin", tool)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s not installed into $(go env GOPATH)/bin: %v", tool, err)
		}
	}
}
