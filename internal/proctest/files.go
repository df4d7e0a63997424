package proctest

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Files changed under the processes that use them: the children and
// copies the SIGBUS tests (issue 15) need in several packages.

// TruncatorRole is the role of a child that runs TruncateLoop; a package's
// helper test dispatches it with RunTruncator.
const TruncatorRole = "truncate-loop"

// TruncatorReady is the line a truncator prints once it has read the file
// and begun.
const TruncatorReady = "truncating"

// StartTruncator starts a child (through helperTest, which must call
// RunTruncator) that truncates path and restores it in a loop until the
// test ends; it returns once the child has begun.
func StartTruncator(t testing.TB, helperTest, path string) *Child {
	t.Helper()
	c := Start(t, helperTest, TruncatorRole, "SHMKIT_TRUNCATE_PATH="+path)
	c.WaitLine(t, TruncatorReady)
	return c
}

// RunTruncator does a truncator child's work if this process is one
// (role), and then exits; otherwise it returns at once.
func RunTruncator(role string) {
	if role != TruncatorRole {
		return
	}
	if err := TruncateLoop(os.Getenv("SHMKIT_TRUNCATE_PATH")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TruncateLoop reads the file at path, then until killed cuts it short and
// writes it back whole, in turn: to 0 bytes (the header gone), to half its
// size (the area gone), and to half then back to full size by ftruncate
// before the rewrite (a moment with holes and zeros). At any instant the
// file is whole, short, or its full size with holes.
func TruncateLoop(path string) error {
	img, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fmt.Println(TruncatorReady)
	size := int64(len(img))
	// Each state is held a little while (0-60 µs, varying), so that an
	// open, which takes about as long, meets every state and every change
	// between them.
	hold := func(i int) {
		for end := time.Now().Add(time.Duration(i*7919%61) * time.Microsecond); time.Now().Before(end); {
		}
	}
	for i := 0; ; i++ {
		hold(i)
		cut := int64(0)
		if i%3 != 0 {
			cut = size / 2
		}
		if err := unix.Ftruncate(fd, cut); err != nil {
			return err
		}
		hold(i + 1)
		if i%3 == 2 {
			if err := unix.Ftruncate(fd, size); err != nil {
				return err
			}
		}
		if _, err := unix.Pwrite(fd, img, 0); err != nil {
			return err
		}
	}
}

// SparseCopy copies src to dst as cp --sparse=always does: dst is sized by
// ftruncate and only the pages of src that are not all zero are written,
// so every zero page of src is a hole in dst. dst is created with mode
// 0600 and must not exist. It returns how many pages are holes.
func SparseCopy(t testing.TB, src, dst string) (holes int) {
	t.Helper()
	img, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(img))); err != nil {
		t.Fatal(err)
	}
	const page = 4096
	zero := make([]byte, page)
	for off := 0; off < len(img); off += page {
		p := img[off:min(off+page, len(img))]
		if bytes.Equal(p, zero[:len(p)]) {
			holes++
			continue
		}
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if holes == 0 {
		t.Fatalf("%s has no zero page: its sparse copy would have no holes", src)
	}
	return holes
}

// FillFilesystem writes a file in dir until the filesystem is full
// (ENOSPC), so that any page allocated afterwards fails.
func FillFilesystem(t testing.TB, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "filler-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	for {
		if _, err := f.Write(page); err != nil {
			return // full
		}
	}
}

// SmallTmpfs mounts a tmpfs of size (for example "256k") on a fresh
// directory, unmounted when the test ends, or skips the test where that is
// not permitted (it needs root).
func SmallTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}
