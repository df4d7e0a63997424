package shm

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// TestClaimsAndTempNamesTellShmkitFilesApart: Claims says yes for a shmkit
// file of any state (also one Open refuses: too open a mode, truncated),
// no for other programs' files, symbolic links and directories, and an
// error for a file that is not there; IsTempName recognises the names
// Create builds under and nothing else; WithGroup gives a new file its
// group.
func TestClaimsAndTempNamesTellShmkitFilesApart(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 64}}
	good := filepath.Join(dir, "good")
	r, err := Create(good, spec)
	if err != nil {
		t.Fatal(err)
	}
	img := append([]byte{}, r.Bytes()...)
	r.Close()
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{good, true},
		{write("open", img, 0o644), true},
		{write("short", img[:len(layout.Magic)], 0o600), true},
		{write("text", []byte("hello"), 0o600), false},
		{write("empty", nil, 0o600), false},
		{link, false},
		{sub, false},
	} {
		got, err := Claims(c.path)
		if err != nil || got != c.want {
			t.Errorf("Claims(%s) = %v, %v; want %v", c.path, got, err, c.want)
		}
	}
	if _, err := Claims(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotExist) {
		t.Errorf("Claims of a missing file: %v", err)
	}

	tmp, err := tempName(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{tmp: true, good: false, filepath.Join(dir, "x.shmkit-tmp-1"): false, filepath.Join(dir, ".hidden"): false} {
		if got := IsTempName(name); got != want {
			t.Errorf("IsTempName(%s) = %v, want %v", name, got, want)
		}
	}

	if os.Geteuid() == 0 {
		p := filepath.Join(dir, "grouped")
		r, err := Create(p, spec, WithMode(0o640), WithGroup(65533))
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 65533 || st.Mode().Perm() != 0o640 {
			t.Errorf("WithGroup: gid %d mode %v", gid, st.Mode().Perm())
		}
	}
}
