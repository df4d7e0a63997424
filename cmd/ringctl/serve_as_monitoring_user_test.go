package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

// TestServeAsMonitoringUser runs the real `ringctl serve` as another
// user, a member of the group the files were created for with
// `create --group`: with --owner and --allow-mode 0640 it reads them
// (/metrics and /healthz over HTTP), without --owner it reports them as
// another user's, and SIGTERM stops it with exit 0. The read-only
// inspectors take the same flags. Needs root (to run as another user).
func TestServeAsMonitoringUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	const monitor, group = 65534, 65533 // a uid and a gid nobody else uses here
	// A directory and a binary the monitoring user can reach.
	dir, err := os.MkdirTemp("", "serve-monitor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "ringctl")
	b, err := os.ReadFile(ringctl(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, "shm")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	ring, hb, private := filepath.Join(files, "orders"), filepath.Join(files, "cluster.hb"), filepath.Join(files, "private")
	if r := run(t, "", "create", ring, "--capacity", "8", "--group", "65533"); r.code != 0 || !strings.Contains(r.stdout, "mode 0640") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "push", ring, "--seq", "1:3", "--allow-mode", "0640"); r.code != 0 {
		t.Fatalf("push into a group-readable ring: %+v", r)
	}
	if r := run(t, "", "create", private, "--capacity", "8"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	// hbdump create --group makes it so (cmd/hbdump's test); here the
	// library's options, as a Go program gives them.
	table, err := heartbeat.Create(hb, heartbeat.Config{Capacity: 2}, shm.WithMode(0o640), shm.WithGroup(group))
	if err != nil {
		t.Fatal(err)
	}
	table.Close()
	for _, p := range []string{ring, hb} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o640 || st.Sys().(*syscall.Stat_t).Gid != group {
			t.Fatalf("%s: mode %v gid %d, want 0640 and %d", p, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, group)
		}
	}
	as := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: monitor, Gid: group, Groups: []uint32{group}}}
		return cmd
	}

	// The inspectors, as the monitoring user.
	if out, err := as("inspect", ring, "--owner", "root", "--allow-mode", "0640", "--json").Output(); err != nil || !strings.Contains(string(out), `"kind"`) {
		t.Fatalf("inspect --owner root as the monitoring user: %v\n%s", err, out)
	}
	out, err := as("inspect", ring, "--allow-mode", "0640").CombinedOutput()
	if code := exitCode(err); code != 3 || !strings.Contains(string(out), "another user") {
		t.Fatalf("inspect without --owner: exit %d\n%s", code, out)
	}

	// Every read-only tool, as the monitoring user, given whose files it
	// trusts (--owner) and the group-readable mode (--allow-mode 0640):
	// the 3 a.m. checklist's looking steps, for rings, hash maps and
	// heartbeat tables.
	hbBin := filepath.Join(dir, "hbdump")
	if b, err := os.ReadFile(buildHbdump(t)); err != nil || os.WriteFile(hbBin, b, 0o755) != nil {
		t.Fatalf("copying hbdump: %v", err)
	}
	hashMap := filepath.Join(files, "sessions")
	if r := run(t, "", "create", hashMap, "--kind", "hashmap", "--capacity", "8", "--group", "65533"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "put", hashMap, "--key", "k", "--value", "v", "--allow-mode", "0640"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	trusted := []string{"--owner", "root", "--allow-mode", "0640"}
	for _, args := range [][]string{
		{"inspect", ring, "--slots"}, {"peek", ring}, {"verify", ring}, {"hexdump", ring, "--header"},
		{"watch", ring, "--count", "1"}, {"list", hashMap}, {"get", hashMap, "--key", "k"}, {"verify", hashMap},
		{"hbdump", hb}, {"hbdump", "dump", hb}, {"hbdump", "check", hb}, {"hbdump", "watch", hb, "--count", "1"},
	} {
		cmd := as(append(args, trusted...)...)
		if args[0] == "hbdump" {
			cmd = as(append(args[1:], trusted...)...)
			cmd.Path, cmd.Args[0] = hbBin, hbBin
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%v as the monitoring user: %v\n%s", args, err, out)
		}
	}
	// What writes does not take --owner, and refuses another user's file.
	if out, err := as("push", ring, "--seq", "9:9", "--owner", "root").CombinedOutput(); exitCode(err) != 2 {
		t.Errorf("push --owner: exit %d, want 2\n%s", exitCode(err), out)
	}
	if out, err := as("push", ring, "--seq", "9:9", "--allow-mode", "0640").CombinedOutput(); exitCode(err) != 3 || !strings.Contains(string(out), "owned by another user") {
		t.Errorf("push of another user's ring: exit %d, want 3\n%s", exitCode(err), out)
	}

	// The exporter, as the monitoring user.
	cmd := as("serve", "--listen", "127.0.0.1:0", files, "--owner", "0", "--allow-mode", "0640")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving http://") {
		t.Fatalf("serve printed %q (%v); stderr %s", line, err, stderr.String())
	}
	addr := strings.Fields(strings.TrimPrefix(line, "serving http://"))[0]
	addr = strings.TrimSuffix(addr, "/metrics")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, metrics := get("/metrics")
	for _, want := range []string{
		`shmkit_file_up{file="` + ring + `",id="`,
		`shmkit_ring_pushed_total{file="` + ring + `",`,
		`shmkit_healthy{file="` + hb + `",`,
		`shmkit_exporter_skipped_files{dir="` + files + `",reason="unreadable"} 1`, // the private ring
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	if !strings.Contains(metrics, `shmkit_ring_pushed_total{file="`+ring+`",id="`) || !strings.Contains(metrics, `kind="ring"} 3`) {
		t.Errorf("/metrics does not count the 3 messages pushed:\n%s", metrics)
	}
	code, body := get("/healthz?format=json")
	var h struct {
		Format string `json:"format"`
		OK     bool   `json:"ok"`
		Files  []struct {
			Path    string `json:"path"`
			Up      bool   `json:"up"`
			Healthy bool   `json:"healthy"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != http.StatusOK || !h.OK || h.Format != "ringctl.healthz/1" || len(h.Files) != 3 {
		t.Errorf("/healthz?format=json: %d %v\n%s", code, err, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}

	// Without --owner the monitoring user's exporter reports the files as
	// another user's, and /healthz fails.
	cmd = as("serve", "--listen", "127.0.0.1:0", ring, "--allow-mode", "0640")
	stdout, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ = bufio.NewReader(stdout).ReadString('\n')
	addr = strings.TrimSuffix(strings.Fields(strings.TrimPrefix(line, "serving http://"))[0], "/metrics")
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "owned by another user") {
		t.Errorf("/healthz without --owner: %d\n%s", code, body)
	}
	if _, metrics := get("/metrics"); !strings.Contains(metrics, `reason="foreign_owner"} 1`) {
		t.Errorf("/metrics without --owner lacks foreign_owner:\n%s", metrics)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
