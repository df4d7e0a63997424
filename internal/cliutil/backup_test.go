package cliutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var backupPattern = regexp.MustCompile(`\.bak-\d{8}T\d{6}Z-[0-9a-f]{16}$`)

func backupSource(t *testing.T) (dir, src string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	src = filepath.Join(dir, "ring")
	data = []byte("the bytes before the repair")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, src, data
}

func expectBackup(t *testing.T, name string, data []byte) {
	t.Helper()
	st, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("backup %s: mode %v, want a regular file with 0600", name, st.Mode())
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, data) {
		t.Errorf("backup %s holds %q, want %q", name, got, data)
	}
}

// Two backups in the same second get different names, neither of them
// predictable from the time alone.
func TestBackupSameSecond(t *testing.T) {
	_, src, data := backupSource(t)
	now := time.Now()
	a, err := BackupName(src, now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BackupName(src, now)
	if a == b || !backupPattern.MatchString(a) || !strings.HasPrefix(a, src+".bak-"+now.UTC().Format("20060102T150405Z")+"-") {
		t.Fatalf("names %q and %q", a, b)
	}
	n1, err := Backup(src, "")
	if err != nil {
		t.Fatal(err)
	}
	n2, err := Backup(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if n1 == n2 {
		t.Fatalf("two backups named %s", n1)
	}
	expectBackup(t, n1, data)
	expectBackup(t, n2, data)
}

// Names another user planted (symlinks to a file of theirs, a file, a
// FIFO) are passed over for fresh ones: nothing is written through them
// and the backup is made.
func TestBackupSquattedNames(t *testing.T) {
	dir, src, data := backupSource(t)
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("not yours"), 0o644)
	var squatted []string
	for i, kind := range []string{"symlink", "dangling", "file", "fifo"} {
		p := filepath.Join(dir, "squat"+string(rune('a'+i)))
		var err error
		switch kind {
		case "symlink":
			err = os.Symlink(victim, p)
		case "dangling":
			err = os.Symlink(filepath.Join(dir, "nowhere"), p)
		case "file":
			err = os.WriteFile(p, []byte("theirs"), 0o644)
		case "fifo":
			err = syscall.Mkfifo(p, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		squatted = append(squatted, p)
	}
	names := append([]string(nil), squatted...)
	fresh := func() (string, error) {
		if len(names) > 0 {
			n := names[0]
			names = names[1:]
			return n, nil
		}
		return BackupName(src, time.Now())
	}
	name, err := backup(src, "", fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !backupPattern.MatchString(name) {
		t.Fatalf("backup %q", name)
	}
	expectBackup(t, name, data)
	if got, _ := os.ReadFile(victim); string(got) != "not yours" {
		t.Fatalf("written through a symlink: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("created through a dangling symlink: %v", err)
	}

	// Every name squatted: an error saying so, nothing made.
	all := func() (string, error) { return squatted[0], nil }
	if _, err := backup(src, "", all); err == nil || !strings.Contains(err.Error(), "all exist") {
		t.Fatalf("all names squatted: %v", err)
	}
}

// A name asked for (--backup FILE) is never overwritten nor followed.
func TestBackupExplicitName(t *testing.T) {
	dir, src, data := backupSource(t)
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("not yours"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	for _, dst := range []string{victim, link} {
		if _, err := Backup(src, dst); !errors.Is(err, ErrBackupExists) {
			t.Fatalf("backup to existing %s: %v", dst, err)
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "not yours" {
		t.Fatalf("overwritten: %q", got)
	}
	dst := filepath.Join(dir, "mine")
	if name, err := Backup(src, dst); err != nil || name != dst {
		t.Fatalf("Backup(%s) = %q, %v", dst, name, err)
	}
	expectBackup(t, dst, data)
}

// The source is never read through a symlink, and must be a regular file.
func TestBackupSource(t *testing.T) {
	dir, src, _ := backupSource(t)
	link := filepath.Join(dir, "link")
	os.Symlink(src, link)
	if _, err := Backup(link, ""); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("backup of a symlink: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	if _, err := Backup(fifo, ""); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("backup of a FIFO: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.bak-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
}
