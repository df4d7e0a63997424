package cliutil

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// TestRefusalsNameTheFlagThatLiftsThem: the walkthrough's creator of a
// group-readable ring (create --group: 0640) was refused at the next push
// with "mode grants more access than allowed" and no word of
// --allow-mode. A refusal for a mode others may read names the
// --allow-mode that accepts it; one others may write names nothing (it is
// not to be accepted on a hint); another user's file names --owner USER
// for the commands that only read.
func TestRefusalsNameTheFlagThatLiftsThem(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		r, err := shm.Create(p, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 4096}}, shm.WithMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		return p
	}
	open := func(p string) error {
		r, err := shm.Open(p, layout.KindRegion)
		if err == nil {
			r.Close()
		}
		return FileError(p, err)
	}
	if err := open(mk("group-read", 0o640)); err == nil || !strings.HasSuffix(err.Error(), "allowed 0600 (--allow-mode 0640 accepts it)") {
		t.Errorf("0640: %v", err)
	}
	if err := open(mk("world-write", 0o666)); err == nil || strings.Contains(err.Error(), "--allow-mode") {
		t.Errorf("0666: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	p := mk("nobodys", 0o600)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := open(p)
	if err == nil || !strings.Contains(err.Error(), "owned by another user") || !strings.HasSuffix(err.Error(), "(commands that only read accept it with --owner nobody)") {
		t.Errorf("another user's: %v", err)
	}
}
