package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/shm"
)

// checklistExits is the exit status of each line of docs/cli.md's "At 3
// a.m." checklist over the scenario below, in order. A line added to the
// checklist must be added here: the test fails until it is.
var checklistExits = map[string]int{
	"ringctl verify orders":                                 1,
	"ringctl inspect orders --slots":                        0,
	"ringctl peek orders --max 20":                          0,
	"hbdump orders.hb":                                      0,
	"ringctl repair orders --heartbeat orders.hb":           1,
	"ringctl repair orders --heartbeat orders.hb --apply":   0,
	"ringctl drain orders --poisoned --json > poison.jsonl": 0,
	"ringctl hexdump orders --slot 3":                       0,
	"ringctl verify orders && hbdump check orders.hb":       0,
	"curl -s localhost:9464/healthz":                        0,
}

// checklist reads the checklist's command lines from docs/cli.md.
func checklist(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### At 3 a.m.")
	if !ok {
		t.Fatal("docs/cli.md has no At 3 a.m. section")
	}
	_, block, ok := strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("the checklist has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			lines = append(lines, cmd)
		}
	}
	return lines
}

// TestThe3amChecklistWorksAsWritten: issue 18 is done when a new on-call
// operator can follow every step of docs/cli.md's checklist without
// writing Go. This runs each line as written (through sh, with only the
// built ringctl and hbdump on PATH, and curl) against the scenario it is
// for: a ring whose leased consumer, registered in a heartbeat table, was
// SIGKILLed holding a message, with a poisoned message beside it and the
// exporter running; each line's exit status is the one above, the repair
// backs up both files, poison.jsonl holds the poison, and afterwards
// every other message is delivered, none lost.
func TestThe3amChecklistWorksAsWritten(t *testing.T) {
	lines := checklist(t)
	for _, l := range lines {
		if _, ok := checklistExits[l]; !ok {
			t.Fatalf("checklist line %q has no expected exit status in checklistExits", l)
		}
	}
	if len(lines) != len(checklistExits) {
		t.Fatalf("the checklist has %d lines, checklistExits %d", len(lines), len(checklistExits))
	}
	bin := t.TempDir()
	for name, from := range map[string]string{"ringctl": ringctl(t), "hbdump": buildHbdump(t)} {
		if err := os.Symlink(from, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	if curl, err := exec.LookPath("curl"); err == nil {
		if err := os.Symlink(curl, filepath.Join(bin, "curl")); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")

	// The scenario, in /dev/shm as the checklist's bare names mean.
	name := fmt.Sprintf("shmkit-checklist-%d-%d", os.Getpid(), time.Now().UnixNano())
	ring, hb := shm.Resolve(name), shm.Resolve(name+".hb")
	t.Cleanup(func() {
		backups, _ := filepath.Glob(ring + "*")
		for _, f := range backups {
			os.Remove(f)
		}
	})
	must := func(r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%+v", r)
		}
	}
	must(run(t, "", "create", name, "--capacity", "16", "--delivery-limit", "2"))
	// A message its command always fails: released twice, poisoned at
	// the next take.
	must(run(t, "", "push", name, "--hex", "626164")) // "bad"
	for i := 0; i < 2; i++ {
		if r := run(t, "", "drain", name, "--lease", "--max", "1", "--exec", "exit 1"); r.code != 1 {
			t.Fatalf("failing drain: %+v", r)
		}
	}
	must(run(t, "", "drain", name, "--lease", "--max", "1", "--exec", "exit 1"))
	must(run(t, "", "push", name, "--seq", "1:10"))
	killedHeartbeatConsumer(t, name, hb) // holds "1"

	serve := exec.Command(ringctl(t), "serve", ring, hb, "--listen", "127.0.0.1:0")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving http://") {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	addr := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(line, "serving http://"))[0], "/metrics")

	work := t.TempDir()
	orders := regexp.MustCompile(`\borders\b`)
	outputs := map[string]string{}
	for _, l := range lines {
		if strings.HasPrefix(l, "curl ") {
			if _, err := os.Stat(filepath.Join(bin, "curl")); err != nil {
				t.Logf("skipping %q: no curl here", l)
				continue
			}
		}
		cmdline := strings.ReplaceAll(orders.ReplaceAllString(l, name), "localhost:9464", addr)
		cmd := exec.Command("sh", "-c", cmdline)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != checklistExits[l] {
			t.Errorf("%s: exit %d, want %d\n%s", l, code, checklistExits[l], out)
		}
		outputs[l] = string(out)
	}

	// What the lines said and did.
	for l, want := range map[string]string{
		"ringctl verify orders":                               "orphaned_lease",
		"ringctl inspect orders --slots":                      "orphaned lease",
		"ringctl peek orders --max 20":                        "1 message of dead processes",
		"hbdump orders.hb":                                    name + "@",
		"ringctl repair orders --heartbeat orders.hb":         "dead_member",
		"ringctl repair orders --heartbeat orders.hb --apply": "backup: " + hb + ".bak-",
		"ringctl verify orders && hbdump check orders.hb":     "ok: " + hb,
		"curl -s localhost:9464/healthz":                      "ok: 2 files, all healthy",
	} {
		if out, ran := outputs[l]; ran && !strings.Contains(out, want) {
			t.Errorf("%s: no %q in\n%s", l, want, out)
		}
	}
	poison, err := os.ReadFile(filepath.Join(work, "poison.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		DataHex string `json:"data_hex"`
	}
	if err := json.Unmarshal(poison, &p); err != nil || p.DataHex != "626164" || strings.Count(string(poison), "\n") != 1 {
		t.Errorf("poison.jsonl: %v\n%s", err, poison)
	}
	if got := drained(t, name); strings.Join(got, " ") != seq(1, 10) {
		t.Errorf("after the checklist, drained %q, want %s", got, seq(1, 10))
	}
}
