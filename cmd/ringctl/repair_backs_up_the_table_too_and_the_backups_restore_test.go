package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killedHeartbeatConsumer runs a real `ringctl drain --lease --heartbeat
// HB --create-heartbeat` on ring, handling one message with a command
// that never ends, and SIGKILLs its process group once it holds the
// lease: the ring holds an orphaned lease, the table a dead member.
func killedHeartbeatConsumer(t *testing.T, ring, hb string) {
	t.Helper()
	started := filepath.Join(t.TempDir(), "started")
	cmd := exec.Command(ringctl(t), "drain", ring, "--lease", "--max", "1", "--heartbeat", hb, "--create-heartbeat",
		"--exec", fmt.Sprintf(`echo "$RINGCTL_POS" >> %s; exec sleep 100`, started))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	waitFor(t, func() bool { return countLines(started) == 1 })
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the killed drain was not reaped")
	}
}

// TestRepairBacksUpTheTableTooAndTheBackupsRestore: the 3 a.m. walkthrough
// found that `repair --heartbeat HB --apply` backed up the ring but not the
// table it changes (hbdump reap --apply backs up both), and that nothing
// said how to undo a repair. Now both files are copied first, each backup
// byte for byte the file before the repair, and `mv BACKUP PATH` (every
// process of the file stopped) restores them: verify and hbdump check then
// find the dead consumer again, and a second repair gives its message
// back, nothing lost.
func TestRepairBacksUpTheTableTooAndTheBackupsRestore(t *testing.T) {
	ring := newRing(t, 8)
	hb := filepath.Join(filepath.Dir(ring), "ring.hb")
	if r := run(t, "", "push", ring, "--seq", "1:3"); r.code != 0 {
		t.Fatalf("push: %+v", r)
	}
	killedHeartbeatConsumer(t, ring, hb)
	ringBefore, err := os.ReadFile(ring)
	if err != nil {
		t.Fatal(err)
	}
	hbBefore, err := os.ReadFile(hb)
	if err != nil {
		t.Fatal(err)
	}
	hbdump := buildHbdump(t)
	check := func(path string) int {
		err := exec.Command(hbdump, "check", path).Run()
		return exitCode(err)
	}
	if code := check(hb); code != 1 {
		t.Fatalf("hbdump check before the repair: exit %d, want 1 (a dead member)", code)
	}

	r := run(t, "", "repair", ring, "--heartbeat", hb, "--apply", "--json")
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("repair --apply: %v %+v", err, r)
	}
	if !backupName.MatchString(rep.Backup) || !strings.HasPrefix(rep.Backup, ring+".bak-") ||
		!backupName.MatchString(rep.HeartbeatBackup) || !strings.HasPrefix(rep.HeartbeatBackup, hb+".bak-") {
		t.Fatalf("backups %q and %q, want one of each file", rep.Backup, rep.HeartbeatBackup)
	}
	if len(rep.Result.Reclaimed) != 1 {
		t.Fatalf("reclaimed %+v, want the dead member", rep.Result.Reclaimed)
	}
	for backup, before := range map[string][]byte{rep.Backup: ringBefore, rep.HeartbeatBackup: hbBefore} {
		b, err := os.ReadFile(backup)
		if err != nil || !bytes.Equal(b, before) {
			t.Fatalf("%s is not the file before the repair (%v)", backup, err)
		}
		if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", backup, err, st.Mode().Perm())
		}
	}
	if r := run(t, "", "verify", ring); r.code != 0 {
		t.Fatalf("verify after the repair: %+v", r)
	}
	if code := check(hb); code != 0 {
		t.Fatalf("hbdump check after the repair: exit %d", code)
	}
	// The text names both backups.
	killedHeartbeatConsumer(t, ring, hb)
	if r := run(t, "", "repair", ring, "--heartbeat", hb, "--apply"); r.code != 0 ||
		strings.Count(r.stdout, "backup: "+ring+".bak-") != 1 || strings.Count(r.stdout, "backup: "+hb+".bak-") != 1 {
		t.Fatalf("repair --apply (text): %+v", r)
	}
	// --no-backup: none of either.
	killedHeartbeatConsumer(t, ring, hb)
	backups, _ := filepath.Glob(filepath.Join(filepath.Dir(ring), "*.bak-*"))
	if r := run(t, "", "repair", ring, "--heartbeat", hb, "--apply", "--no-backup"); r.code != 0 {
		t.Fatalf("repair --no-backup: %+v", r)
	}
	if after, _ := filepath.Glob(filepath.Join(filepath.Dir(ring), "*.bak-*")); len(after) != len(backups) {
		t.Fatalf("--no-backup made backups: %v", after)
	}

	// Undo the first repair as docs/cli.md says: mv each backup over its file.
	for backup, path := range map[string]string{rep.Backup: ring, rep.HeartbeatBackup: hb} {
		if out, err := exec.Command("mv", backup, path).CombinedOutput(); err != nil {
			t.Fatalf("mv %s %s: %v %s", backup, path, err, out)
		}
	}
	if b, _ := os.ReadFile(ring); !bytes.Equal(b, ringBefore) {
		t.Fatal("the restored ring is not the ring before the repair")
	}
	if r := run(t, "", "verify", ring); r.code != 1 || !strings.Contains(r.stdout, "orphaned_lease") {
		t.Fatalf("verify of the restored ring: %+v", r)
	}
	if code := check(hb); code != 1 {
		t.Fatalf("hbdump check of the restored table: exit %d, want 1", code)
	}
	if r := run(t, "", "repair", ring, "--heartbeat", hb, "--apply", "--no-backup"); r.code != 0 {
		t.Fatalf("repair of the restored files: %+v", r)
	}
	if got := drained(t, ring); strings.Join(got, " ") != "1 2 3" {
		t.Fatalf("drained %q, want 1 2 3", got)
	}
}
