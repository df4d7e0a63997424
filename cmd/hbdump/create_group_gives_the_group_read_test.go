package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCreateGroupGivesTheGroupRead: `hbdump create --group G` makes the
// table 0640 with group G from the moment it appears under its name (the
// library sets both on the temporary file before the rename), a --mode
// that gives the group nothing is refused, and the table then opens with
// --allow-mode 0640.
func TestCreateGroupGivesTheGroupRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file a group it is not a member of")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.hb")
	if r := runHbdump(t, dir, "create", path, "--capacity", "2", "--group", "65533"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 || st.Sys().(*syscall.Stat_t).Gid != 65533 {
		t.Fatalf("mode %v gid %d, want 0640 and 65533", st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid)
	}
	if r := runHbdump(t, dir, "check", path, "--allow-mode", "0640"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	r := runHbdump(t, dir, "create", filepath.Join(dir, "other.hb"), "--capacity", "2", "--group", "65533", "--mode", "0600")
	if r.code != 2 || !strings.Contains(r.stderr, "gives the group nothing") {
		t.Fatalf("--group with --mode 0600: %+v", r)
	}
	if r := runHbdump(t, dir, "create", filepath.Join(dir, "third.hb"), "--capacity", "2", "--group", "no-such-group-here"); r.code != 2 {
		t.Fatalf("--group of an unknown group: %+v", r)
	}
}
