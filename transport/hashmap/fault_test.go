package hashmap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
)

// TestSparseMapOnFullTmpfs: a hash map copied sparse onto a full tmpfs:
// Open fails with ErrSparse and ErrNoSpace instead of dying of SIGBUS in
// attach; OpenReadOnly with ErrSparse. Needs root to mount a small tmpfs.
func TestSparseMapOnFullTmpfs(t *testing.T) {
	dir := proctest.SmallTmpfs(t, "256k")
	m, err := Create(hashMapPath(t), Config{Capacity: 1024, KeySize: 16, ValueSize: 48})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	m.Close()
	dst := filepath.Join(dir, "map")
	proctest.SparseCopy(t, m.Path(), dst)
	proctest.FillFilesystem(t, dir)
	if _, err := Open(dst); !errors.Is(err, shm.ErrSparse) || !errors.Is(err, shm.ErrNoSpace) || !strings.Contains(err.Error(), dst) {
		t.Fatalf("Open: %v", err)
	}
	if _, err := OpenReadOnly(dst); !errors.Is(err, shm.ErrSparse) {
		t.Fatalf("OpenReadOnly: %v", err)
	}
}

// TestMapSlowPathsAfterTruncation: Check, Scan, Repair and Close of a map
// truncated under it report the fault instead of crashing.
func TestMapSlowPathsAfterTruncation(t *testing.T) {
	if proctest.RaceEnabled {
		t.Skip("an atomic that faults inside the race runtime cannot be recovered: run without -race")
	}
	m := newHashMap(t, Config{Capacity: 1024, KeySize: 16, ValueSize: 48})
	if err := os.Truncate(m.Path(), 0); err != nil {
		t.Fatal(err)
	}
	if cr := m.Check(); !errors.Is(cr.Fault, shm.ErrTruncated) || cr.Clean() {
		t.Errorf("Check: %v", cr.Fault)
	}
	if sr := m.Scan(); !errors.Is(sr.Fault, shm.ErrFault) {
		t.Errorf("Scan: %v", sr.Fault)
	}
	if _, err := m.Repair(); !errors.Is(err, shm.ErrFault) {
		t.Errorf("Repair: %v", err)
	}
	if err := m.Close(); !errors.Is(err, shm.ErrFault) {
		t.Errorf("Close: %v", err)
	}
}
