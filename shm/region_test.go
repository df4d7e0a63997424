package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
)

var regionSpec = Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 4096}}

// shmPath returns a fresh path in /dev/shm, removed when the test ends.
func shmPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(DefaultDir, fmt.Sprintf("shmkit-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func mustCreate(t testing.TB, path string, opts ...Option) *Region {
	t.Helper()
	r, err := Create(path, regionSpec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestCreateOpenShareBytes(t *testing.T) {
	path := shmPath(t)
	a := mustCreate(t, path)
	b, err := Open(path, layout.KindRegion)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Header(); got.Geometry != regionSpec.Geometry || got.Creator.PID != uint32(os.Getpid()) || !got.IsReady() {
		t.Fatalf("header %+v", got)
	}
	wa, err := a.Uint64(layout.HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := b.Uint64(layout.HeaderSize)
	wa.Store(0xfeedface)
	if wb.Load() != 0xfeedface {
		t.Fatal("write through one mapping not seen through the other")
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o777 != 0o600 || st.Size != layout.HeaderSize+4096 || st.Blocks == 0 {
		t.Fatalf("mode %#o size %d blocks %d", st.Mode&0o777, st.Size, st.Blocks)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestBareNameLivesInDevShm(t *testing.T) {
	name := fmt.Sprintf("shmkit-test-bare-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(filepath.Join(DefaultDir, name)) })
	r := mustCreate(t, name)
	if r.Path() != filepath.Join(DefaultDir, name) {
		t.Fatalf("path %q", r.Path())
	}
	if err := Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(name, layout.KindRegion); !errors.Is(err, ErrNotExist) {
		t.Fatalf("after Remove: %v", err)
	}
}

func TestCreateModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := shmPath(t)
	mustCreate(t, path, WithMode(0o640))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	// Open with the default allowance refuses the wider file; with the
	// allowance it accepts it.
	if _, err := Open(path, layout.KindRegion); !errors.Is(err, ErrPermissive) {
		t.Fatalf("default open of 0640 file: %v", err)
	}
	r, err := Open(path, layout.KindRegion, WithMode(0o640))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

func TestCreateExistingAndNoTempLeft(t *testing.T) {
	path := shmPath(t)
	mustCreate(t, path)
	_, err := Create(path, regionSpec)
	if !errors.Is(err, ErrExist) || !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second create: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".shmkit-tmp-*"))
	if len(matches) != 0 {
		t.Fatalf("temporary files left behind: %v", matches)
	}
}

// TestOpenHostileFiles: each hostile-file case gives its own error, naming
// the path, and never a crash.
func TestOpenHostileFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	mustCreate(t, good)
	size := int64(layout.HeaderSize + 4096)

	cases := []struct {
		name  string
		setup func(t *testing.T, p string)
		opts  []Option
		want  error
	}{
		{"missing", func(t *testing.T, p string) {}, nil, ErrNotExist},
		{"symlink", func(t *testing.T, p string) { must(t, os.Symlink(good, p)) }, nil, ErrSymlink},
		{"dangling symlink", func(t *testing.T, p string) { must(t, os.Symlink(filepath.Join(dir, "nowhere"), p)) }, nil, ErrSymlink},
		{"fifo", func(t *testing.T, p string) { must(t, unix.Mkfifo(p, 0o600)) }, nil, ErrNotRegular},
		{"directory", func(t *testing.T, p string) { must(t, os.Mkdir(p, 0o700)) }, nil, ErrNotRegular},
		{"hard link", func(t *testing.T, p string) { must(t, os.Link(good, p)) }, nil, ErrLinked},
		{"world writable", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Chmod(p, 0o666)) }, nil, ErrPermissive},
		{"truncated below header", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Truncate(p, 100)) }, []Option{WithReadyTimeout(20 * time.Millisecond)}, ErrTruncated},
		{"truncated body", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Truncate(p, size-64)) }, nil, ErrTruncated},
		{"extended", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Truncate(p, size+64)) }, nil, ErrSizeMismatch},
		{"short text file", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte("hello\n"), 0o600)) }, nil, layout.ErrBadMagic},
		{"short start of a header", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte(layout.Magic[:5]), 0o600)) }, []Option{WithReadyTimeout(20 * time.Millisecond)}, ErrTruncated},
		{"not shmkit", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte(strings.Repeat("garbage!", 64)), 0o600)) }, nil, layout.ErrBadMagic},
		{"corrupt header", func(t *testing.T, p string) { copyFile(t, good, p); patch(t, p, layout.OffCapacity, 1) }, nil, layout.ErrChecksum},
		{"never ready", func(t *testing.T, p string) { copyFile(t, good, p); patchU32(t, p, layout.OffReady, 0) }, []Option{WithReadyTimeout(30 * time.Millisecond)}, ErrNotReady},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name  string
			setup func(t *testing.T, p string)
			opts  []Option
			want  error
		}{"foreign owner", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Chown(p, 12345, 12345)) }, nil, ErrForeignOwner})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			tc.setup(t, p)
			r, err := Open(p, layout.KindRegion, tc.opts...)
			if err == nil {
				r.Close()
				t.Fatal("opened a hostile file")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the path: %v", err)
			}
		})
	}
}

func TestOpenForeignOwnerAllowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	p := filepath.Join(t.TempDir(), "f")
	mustCreate(t, p)
	must(t, os.Chown(p, 12345, 12345))
	for _, opt := range []Option{WithOwner(12345), WithOwner(-1)} {
		r, err := Open(p, layout.KindRegion, opt)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}

func TestOpenWrongKind(t *testing.T) {
	p := shmPath(t)
	mustCreate(t, p)
	if _, err := Open(p, layout.KindRing); !errors.Is(err, layout.ErrWrongKind) {
		t.Fatalf("got %v", err)
	}
}

// TestOpenWaitsForInPlaceCreator: a file whose ready word is stored late is
// waited for, and the futex wake ends the wait.
func TestOpenWaitsForInPlaceCreator(t *testing.T) {
	p := filepath.Join(t.TempDir(), "late")
	r := mustCreate(t, p)
	ready := r.ready()
	ready.Store(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(20 * time.Millisecond)
		ready.Store(layout.ReadyValue)
		FutexWake(ready, -1)
	}()
	o, err := Open(p, layout.KindRegion, WithReadyTimeout(10*time.Second))
	<-done
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
}

func TestReadOnlyOpen(t *testing.T) {
	p := shmPath(t)
	w := mustCreate(t, p)
	r, err := Open(p, layout.KindRegion, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ww, _ := w.Uint64(layout.HeaderSize + 8)
	ww.Store(77)
	rw, _ := r.Uint64(layout.HeaderSize + 8)
	if rw.Load() != 77 || !r.ReadOnly() {
		t.Fatal("read-only view does not see writes")
	}
	// A store through a read-only mapping faults; Guard reports it. (A plain
	// store: under -race an atomic faults inside the race runtime's C code,
	// where no Go panic can be raised.)
	ro := r.Bytes()
	err = Guard(func() error { ro[layout.HeaderSize+8] = 1; return nil })
	if !errors.Is(err, ErrFault) {
		t.Fatalf("store to read-only mapping: %v", err)
	}
}

func TestViewsCheckBoundsAndAlignment(t *testing.T) {
	r := mustCreate(t, shmPath(t))
	size := uint64(layout.HeaderSize + 4096)
	for _, tc := range []struct {
		off  uint64
		is32 bool
		ok   bool
	}{{0, false, true}, {8, false, true}, {4, false, false}, {4, true, true}, {2, true, false},
		{size - 8, false, true}, {size - 4, false, false}, {size, true, false}, {^uint64(0) - 2, false, false}} {
		var err error
		if tc.is32 {
			_, err = r.Uint32(tc.off)
		} else {
			_, err = r.Uint64(tc.off)
		}
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadOffset)) {
			t.Errorf("off %d 32bit=%v: %v", tc.off, tc.is32, err)
		}
	}
}

// TestGuardTurnsSIGBUSIntoError: another party truncates a mapped file; a
// guarded read past the new end reports ErrFault instead of killing us.
func TestGuardTurnsSIGBUSIntoError(t *testing.T) {
	p := shmPath(t)
	r := mustCreate(t, p)
	must(t, os.Truncate(p, layout.HeaderSize))
	mem := r.Bytes()
	var sum byte
	err := Guard(func() error {
		for i := layout.HeaderSize; i < len(mem); i += 512 {
			sum += mem[i]
		}
		sum += mem[len(mem)-1] // on the page past the new end
		return nil
	})
	if !errors.Is(err, ErrFault) {
		t.Fatalf("got %v", err)
	}
	// Reads inside the file still work.
	if err := Guard(func() error { _ = mem[0]; return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestGuardPassesOtherPanics(t *testing.T) {
	defer func() {
		if recover() != "boom" {
			t.Fatal("non-fault panic was swallowed")
		}
	}()
	Guard(func() error { panic("boom") })
}

// TestCreateOnFullTmpfs: a tmpfs too small for the file fails at create time
// with ErrNoSpace (no SIGBUS later). Needs root to mount a tiny tmpfs.
func TestCreateOnFullTmpfs(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	_, err := Create(filepath.Join(dir, "big"), Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: 1 << 20}})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("got %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestOpenOrCreateRace: several processes race OpenOrCreate on one path;
// exactly one creates it, all attach to the same initialised file.
func TestOpenOrCreateRace(t *testing.T) {
	const procs = 6
	for round := 0; round < 4; round++ {
		p := shmPath(t)
		var children []*proctest.Child
		for i := 0; i < procs; i++ {
			children = append(children, proctest.Start(t, "TestRegionHelperProcess", "open-or-create", "SHMKIT_TEST_PATH="+p))
		}
		created := 0
		inodes := map[string]bool{}
		for _, c := range children {
			c.MustSucceed(t)
			out, _ := c.Output()
			f := strings.Fields(out)
			if len(f) != 2 {
				t.Fatalf("child output %q", out)
			}
			if f[0] == "created" {
				created++
			}
			inodes[f[1]] = true
		}
		if created != 1 || len(inodes) != 1 {
			t.Fatalf("round %d: %d creators, inodes %v", round, created, inodes)
		}
		r, err := Open(p, layout.KindRegion)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := r.Uint64(layout.HeaderSize)
		if got := w.Load(); got != procs {
			t.Fatalf("round %d: counter %d, want %d (not everyone on one file)", round, got, procs)
		}
		r.Close()
	}
}

func TestRegionHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	proctest.RunTruncator(role)
	if !ok || role != "open-or-create" {
		return
	}
	r, created, err := OpenOrCreate(os.Getenv("SHMKIT_TEST_PATH"), regionSpec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w, _ := r.Uint64(layout.HeaderSize)
	w.Add(1)
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		os.Exit(1)
	}
	word := "opened"
	if created {
		word = "created"
	}
	fmt.Println(word, strconv.FormatUint(st.Ino, 10))
	os.Exit(0)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o600))
}

func patch(t *testing.T, p string, off int, delta byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	b[off] += delta
	must(t, os.WriteFile(p, b, 0o600))
}

func patchU32(t *testing.T, p string, off int, v uint32) {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	binary.LittleEndian.PutUint32(b[off:], v)
	must(t, os.WriteFile(p, b, 0o600))
}
