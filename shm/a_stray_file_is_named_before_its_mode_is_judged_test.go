package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// TestAStrayFileIsNamedBeforeItsModeIsJudged: Open (and ReadHeader) say
// "not a shmkit file" of a regular file of ours whose first bytes are
// not the magic, whatever its mode; the mode still refuses every file that
// may be a shmkit file (the magic, or zeros: one being created), and the
// checks that decide whether a file may be read at all (regular, owner,
// one link) still come first, so that no byte of a hard-linked or foreign
// file is read, let alone printed in the error.
func TestAStrayFileIsNamedBeforeItsModeIsJudged(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	mustCreate(t, good)
	secret := filepath.Join(dir, "secret")
	must(t, os.WriteFile(secret, []byte("s3cr3t\n"), 0o600))

	cases := []struct {
		name  string
		setup func(t *testing.T, p string)
		want  error
		// notIn must not appear in the error: bytes not ours to show.
		notIn string
	}{
		{"6-byte text file 0644", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte("hello\n"), 0o644)) }, layout.ErrBadMagic, ""},
		{"large garbage 0666", func(t *testing.T, p string) {
			must(t, os.WriteFile(p, []byte(strings.Repeat("garbage!", 1024)), 0o666))
		}, layout.ErrBadMagic, ""},
		{"shmkit file 0644", func(t *testing.T, p string) { copyFile(t, good, p); must(t, os.Chmod(p, 0o644)) }, ErrPermissive, ""},
		{"start of the magic 0644", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte(layout.Magic[:5]), 0o644)) }, ErrPermissive, ""},
		{"zeros 0644", func(t *testing.T, p string) { must(t, os.WriteFile(p, make([]byte, 40), 0o644)) }, ErrPermissive, ""},
		{"hard link to a text file", func(t *testing.T, p string) { must(t, os.Link(secret, p)) }, ErrLinked, "73 33"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name  string
			setup func(t *testing.T, p string)
			want  error
			notIn string
		}{"another user's text file", func(t *testing.T, p string) {
			must(t, os.WriteFile(p, []byte("theirs\n"), 0o644))
			must(t, os.Chown(p, 12345, 12345))
		}, ErrForeignOwner, "74 68"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			tc.setup(t, p)
			opens := map[string]func() error{
				"Open": func() error {
					r, err := Open(p, layout.KindRegion, WithReadyTimeout(20*time.Millisecond))
					if err == nil {
						r.Close()
					}
					return err
				},
				"ReadHeader": func() error {
					_, err := ReadHeader(p, WithReadyTimeout(20*time.Millisecond))
					return err
				},
			}
			for name, open := range opens {
				err := open()
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s: got %v, want %v", name, err, tc.want)
				}
				if tc.notIn != "" && strings.Contains(err.Error(), tc.notIn) {
					t.Fatalf("%s: the error shows the file's bytes: %v", name, err)
				}
				if !strings.Contains(err.Error(), p) {
					t.Fatalf("%s: the error does not name the file: %v", name, err)
				}
			}
		})
	}
}
