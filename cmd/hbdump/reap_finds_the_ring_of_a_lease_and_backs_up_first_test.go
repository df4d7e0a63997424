package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// reapJSONOut is the part of hbdump.reap/1 these tests read.
type reapJSONOut struct {
	Actions []struct {
		Action    string `json:"action"`
		Why       string `json:"why"`
		Reclaimed bool   `json:"reclaimed"`
	} `json:"actions"`
	Rings []struct {
		Ring      string `json:"ring"`
		FoundByID bool   `json:"found_by_id"`
	} `json:"rings"`
	Backups []backupMade `json:"backups"`
}

func reapOut(t *testing.T, res result) reapJSONOut {
	t.Helper()
	var out reapJSONOut
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("%v\n%s%s", err, res.stdout, res.stderr)
	}
	return out
}

func backupsIn(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.bak-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReapFindsTheRingOfALeaseByItsID: without --ring, reap looks for the
// ring a dead participant leased from by its id, beside the table and in
// /dev/shm. Not found: the participant is kept, and the words say where
// reap looked. Two files with the id: kept, both named (never a guess).
// A backup of the ring (which has its id too) is never taken for it.
// Exactly one: it is used, and named. (The fixture ring's id is fixed;
// no copy of it is expected in /dev/shm.)
func TestReapFindsTheRingOfALeaseByItsID(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, "dead.hb")
	elsewhere := t.TempDir()
	ring := copyFixture(t, elsewhere, ringFixture)
	ringBytes, err := os.ReadFile(ring)
	if err != nil {
		t.Fatal(err)
	}

	res := runHbdump(t, dir, "reap", "./dead.hb", "--json")
	out := reapOut(t, res)
	if res.code != 1 || len(out.Rings) != 0 || len(out.Actions) != 2 || out.Actions[0].Action != "keep" ||
		!strings.Contains(out.Actions[0].Why, "not found in . or /dev/shm") {
		t.Fatalf("ring nowhere: exit %d, %+v", res.code, out)
	}

	for _, name := range []string{"a.ring", "b.ring"} {
		if err := os.WriteFile(filepath.Join(dir, name), ringBytes, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out = reapOut(t, runHbdump(t, dir, "reap", "./dead.hb", "--json"))
	if len(out.Rings) != 0 || out.Actions[0].Action != "keep" || !strings.Contains(out.Actions[0].Why, "found at ./a.ring and ./b.ring") {
		t.Fatalf("two files with the id: %+v", out)
	}

	// b.ring becomes a backup's name: a copy, not the ring in use.
	if err := os.Rename(filepath.Join(dir, "b.ring"), filepath.Join(dir, "a.ring.bak-20260101T000000Z-0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	res = runHbdump(t, dir, "reap", "./dead.hb")
	ringID, err := layout.FileID(ringBytes) // the fixture's, which changes with its header (a new format)
	if err != nil {
		t.Fatal(err)
	}
	if res.code != 1 || !strings.Contains(res.stdout, fmt.Sprintf("ring %016x (not given with --ring): found by its id at ./a.ring", ringID)) ||
		!strings.Contains(res.stdout, "./a.ring@29") {
		t.Fatalf("one file with the id, dry run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if len(backupsIn(t, dir)) != 1 {
		t.Fatalf("a dry run made a backup: %v", backupsIn(t, dir))
	}
}

// TestReapApplyBacksUpEveryFileFirst: reap --apply copies the table and
// each ring it may change before changing anything, as ringctl repair
// --apply does (the one backup routine, cliutil.BackupBefore): the copies
// hold the bytes from before; a second run with nothing to do makes none;
// --no-backup makes none and needs --apply.
func TestReapApplyBacksUpEveryFileFirst(t *testing.T) {
	dir := t.TempDir()
	table := copyFixture(t, dir, "dead.hb")
	ring := copyFixture(t, dir, ringFixture)
	before := map[string][]byte{}
	for _, p := range []string{table, ring} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before["./"+filepath.Base(p)] = b
	}

	res := runHbdump(t, dir, "reap", "./dead.hb", "--apply", "--json")
	out := reapOut(t, res)
	if res.code != 0 || len(out.Backups) != 2 || len(out.Actions) != 2 || !out.Actions[0].Reclaimed || !out.Actions[1].Reclaimed {
		t.Fatalf("exit %d, %+v\n%s", res.code, out, res.stderr)
	}
	for _, b := range out.Backups {
		want, ok := before[b.File]
		if !ok || !strings.HasPrefix(b.Backup, b.File+".bak-") {
			t.Fatalf("backup %+v of a file not changed", b)
		}
		got, err := os.ReadFile(filepath.Join(dir, b.Backup))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("backup %s does not hold %s as it was before (%v)", b.Backup, b.File, err)
		}
		now, _ := os.ReadFile(filepath.Join(dir, b.File))
		if bytes.Equal(now, want) {
			t.Fatalf("%s did not change: the test proves nothing", b.File)
		}
		if st, err := os.Stat(filepath.Join(dir, b.Backup)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("backup %s: %v %v", b.Backup, st, err)
		}
	}

	res = runHbdump(t, dir, "reap", "./dead.hb", "--apply", "--json")
	if out := reapOut(t, res); res.code != 0 || len(out.Backups) != 0 || len(backupsIn(t, dir)) != 2 {
		t.Fatalf("nothing to do made a backup: exit %d, %+v, %v", res.code, out, backupsIn(t, dir))
	}

	dir2 := t.TempDir()
	copyFixture(t, dir2, "dead.hb")
	copyFixture(t, dir2, ringFixture)
	if res := runHbdump(t, dir2, "reap", "./dead.hb", "--no-backup"); res.code != 2 || !strings.Contains(res.stderr, "--no-backup applies only with --apply") {
		t.Fatalf("--no-backup without --apply: %+v", res)
	}
	res = runHbdump(t, dir2, "reap", "./dead.hb", "--apply", "--no-backup", "--json")
	if out := reapOut(t, res); res.code != 0 || len(out.Backups) != 0 || len(backupsIn(t, dir2)) != 0 || !out.Actions[0].Reclaimed {
		t.Fatalf("--no-backup: exit %d, %+v", res.code, out)
	}
}
