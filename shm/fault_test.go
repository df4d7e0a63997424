package shm

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
)

// bigSpec is a region of several pages, so that a sparse copy has holes.
var bigSpec = Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 1 << 16}}

// bigRegion creates a closed region file of bigSpec at path with one byte
// of data in its area.
func bigRegion(t *testing.T, path string) {
	t.Helper()
	r, err := Create(path, bigSpec)
	if err != nil {
		t.Fatal(err)
	}
	r.Body()[100] = 7
	r.Close()
}

// TestOpenRefusesOrFillsHoles: a valid file copied sparse is refused by a
// read-only open (ErrSparse, before any page is touched) and filled by a
// read-write one, after which it has no holes and read-only opens take it.
func TestOpenRefusesOrFillsHoles(t *testing.T) {
	src, dst := shmPath(t), shmPath(t)
	bigRegion(t, src)
	proctest.SparseCopy(t, src, dst)
	_, err := Open(dst, layout.KindRegion, ReadOnly())
	var pe *PathError
	if !errors.Is(err, ErrSparse) || !errors.As(err, &pe) || pe.Path != dst || !strings.Contains(err.Error(), "file has holes") {
		t.Fatalf("read-only open of a sparse copy: %v", err)
	}
	if h, err := ReadHeader(dst); err != nil || h.Geometry != bigSpec.Geometry {
		t.Fatalf("ReadHeader of a sparse copy: %+v, %v", h, err)
	}
	r, err := Open(dst, layout.KindRegion)
	if err != nil {
		t.Fatalf("read-write open of a sparse copy: %v", err)
	}
	defer r.Close()
	if err := r.CheckFile(); err != nil {
		t.Fatalf("after the read-write open filled it: %v", err)
	}
	if r.Body()[100] != 7 {
		t.Fatal("the copy lost its data")
	}
	ro, err := Open(dst, layout.KindRegion, ReadOnly())
	if err != nil {
		t.Fatalf("read-only open after the fill: %v", err)
	}
	ro.Close()
}

// TestCreatedFileHasNoHoles: Create reserves every block, and the hole
// check does not mistake reserved but untouched pages for holes (SEEK_HOLE
// alone would: tmpfs reports them as holes).
func TestCreatedFileHasNoHoles(t *testing.T) {
	p := shmPath(t)
	bigRegion(t, p)
	r, err := Open(p, layout.KindRegion, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CheckFile(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSparseOnFullTmpfs: a sparse copy on a full tmpfs, whose holes no
// page can back: every open fails with ErrSparse naming the file, the
// read-write one with ErrNoSpace too, instead of a SIGBUS at the first
// touch. Needs root to mount a small tmpfs.
func TestOpenSparseOnFullTmpfs(t *testing.T) {
	dir := proctest.SmallTmpfs(t, "256k")
	src, dst := shmPath(t), filepath.Join(dir, "copy")
	bigRegion(t, src)
	proctest.SparseCopy(t, src, dst)
	proctest.FillFilesystem(t, dir)
	if _, err := Open(dst, layout.KindRegion, ReadOnly()); !errors.Is(err, ErrSparse) || !strings.Contains(err.Error(), dst) {
		t.Fatalf("read-only: %v", err)
	}
	_, err := Open(dst, layout.KindRegion)
	if !errors.Is(err, ErrSparse) || !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), dst) {
		t.Fatalf("read-write: %v", err)
	}
	t.Log(err)
}

// TestCheckFile: a file truncated, grown or holed under its mapping is
// reported by CheckFile, and a fault is explained by Region.Guard.
func TestCheckFile(t *testing.T) {
	p := shmPath(t)
	bigRegion(t, p)
	r, err := Open(p, layout.KindRegion)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	size := int64(len(r.Bytes()))
	fd, err := unix.Open(p, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	must(t, unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 8192, 8192))
	if err := r.CheckFile(); !errors.Is(err, ErrSparse) {
		t.Fatalf("holed: %v", err)
	}
	must(t, unix.Ftruncate(fd, size+4096))
	if err := r.CheckFile(); !errors.Is(err, ErrSizeMismatch) {
		t.Fatalf("grown: %v", err)
	}
	must(t, unix.Ftruncate(fd, layout.HeaderSize))
	if err := r.CheckFile(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	mem := r.Bytes()
	var sink byte
	err = r.Guard("read", func() error { sink = mem[len(mem)-1]; return nil })
	_ = sink
	if !errors.Is(err, ErrFault) || !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), p) {
		t.Fatalf("guarded read past the end: %v", err)
	}
}

// TestOpenWhileTruncated: a child process truncates the file and restores
// it in a loop while this process opens it a fixed number of times, read
// only, read-write and by ReadHeader. No open may crash, and every failure
// is an error naming the file that says it is unusable. (Before the
// header was read under a guard, most runs died of SIGBUS.)
func TestOpenWhileTruncated(t *testing.T) {
	if proctest.RaceEnabled {
		t.Skip("an atomic load that faults inside the race runtime cannot be recovered: run without -race")
	}
	p := shmPath(t)
	bigRegion(t, p)
	proctest.StartTruncator(t, "TestRegionHelperProcess", p)
	documented := []error{ErrFault, ErrTruncated, ErrSizeMismatch, ErrSparse, ErrNotReady,
		layout.ErrBadMagic, layout.ErrChecksum, layout.ErrTooShort, layout.ErrInvalid, layout.ErrGeometry}
	const opens = 5000
	fails := map[string]int{}
	for i := 0; i < opens; i++ {
		var err error
		switch i % 3 {
		case 0:
			var r *Region
			if r, err = Open(p, layout.KindRegion, ReadOnly(), WithReadyTimeout(0)); err == nil {
				r.Close()
			}
		case 1:
			var r *Region
			if r, err = Open(p, layout.KindRegion, WithReadyTimeout(0)); err == nil {
				r.Close()
			}
		case 2:
			_, err = ReadHeader(p, WithReadyTimeout(0))
		}
		if err == nil {
			fails["ok"]++
			continue
		}
		var pe *PathError
		if !errors.As(err, &pe) || pe.Path != p {
			t.Fatalf("open %d: error does not name the file: %v", i, err)
		}
		known := false
		for _, d := range documented {
			if errors.Is(err, d) {
				known = true
				fails[strings.TrimPrefix(strings.TrimPrefix(d.Error(), "shm: "), "layout: ")]++
				break
			}
		}
		if !known {
			t.Fatalf("open %d: undocumented error: %v", i, err)
		}
	}
	t.Logf("%d opens: %v", opens, fails)
}
