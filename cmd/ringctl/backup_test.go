package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Issue 15, item 5: backups were named PATH.bak-<UTC second>. In a
// world-writable directory such as /dev/shm another user could plant
// symlinks at the next minutes' names, and repair --apply then failed
// with "backup file exists"; two repairs in one second collided.

var backupName = regexp.MustCompile(`\.bak-(\d{8}T\d{6}Z)-[0-9a-f]{16}$`)

func repairApplyJSON(t *testing.T, ring string) repairReport {
	t.Helper()
	r := run(t, "", "repair", ring, "--apply", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("repair --apply: %+v", r)
	}
	var rep repairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Applied || rep.Result == nil || !backupName.MatchString(rep.Backup) {
		t.Fatalf("repair --apply: %s", r.stdout)
	}
	return rep
}

func TestRepairBackupIgnoresSquattedNames(t *testing.T) {
	dir := fixtureDir(t)
	ring := filepath.Join(dir, "orphaned.shm")
	before, _ := os.ReadFile(ring)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("another user's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every old-style name of the next two minutes, as another user's
	// symlinks (owned by nobody when we can arrange that).
	now := time.Now().UTC()
	var planted []string
	for s := -2; s <= 120; s++ {
		p := ring + ".bak-" + now.Add(time.Duration(s)*time.Second).Format("20060102T150405Z")
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			os.Lchown(p, 65534, 65534)
		}
		planted = append(planted, p)
	}
	rep := repairApplyJSON(t, ring)
	if saved, err := os.ReadFile(rep.Backup); err != nil || string(saved) != string(before) {
		t.Fatalf("backup %s differs from the file before repair: %v", rep.Backup, err)
	}
	if st, err := os.Lstat(rep.Backup); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup %s: %v %v", rep.Backup, st.Mode(), err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "another user's file" {
		t.Fatalf("written through a symlink: %q", got)
	}
	for _, p := range planted {
		if target, err := os.Readlink(p); err != nil || target != victim {
			t.Fatalf("%s changed: %q %v", p, target, err)
		}
	}
	if r := run(t, "", "verify", ring); r.code != 0 {
		t.Fatalf("not repaired: %+v", r)
	}
}

func TestRepairBackupsInOneSecond(t *testing.T) {
	dir := fixtureDir(t)
	ring := filepath.Join(dir, "orphaned.shm")
	before, _ := os.ReadFile(ring)
	for attempt := 0; attempt < 5; attempt++ {
		var names []string
		for range 2 {
			// The same damage each time: the fixture's bytes again.
			if err := os.WriteFile(ring, before, 0o600); err != nil {
				t.Fatal(err)
			}
			names = append(names, repairApplyJSON(t, ring).Backup)
		}
		if names[0] == names[1] {
			t.Fatalf("two repairs, one backup name: %s", names[0])
		}
		for _, n := range names {
			if saved, err := os.ReadFile(n); err != nil || string(saved) != string(before) {
				t.Fatalf("backup %s: %v", n, err)
			}
		}
		s0, s1 := backupName.FindStringSubmatch(names[0])[1], backupName.FindStringSubmatch(names[1])[1]
		if s0 == s1 {
			return // both in one second, both made
		}
		t.Logf("attempt %d: the repairs fell in %s and %s", attempt, s0, s1)
	}
	t.Skip("no two repairs fell in the same second in 5 attempts")
}
