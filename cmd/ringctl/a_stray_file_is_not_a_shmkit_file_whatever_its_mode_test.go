package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAStrayFileIsNotAShmkitFileWhateverItsMode: a walkthrough found a
// 6-byte 0644 text file refused for its mode ("file mode grants more
// access than allowed") before it was called "not a shmkit file". Every
// command that opens a file says what the file is first (exit 3, one line
// naming it), whatever its mode; a real shmkit file with too open a mode
// is still refused for it, by every command, before anything uses it.
func TestAStrayFileIsNotAShmkitFileWhateverItsMode(t *testing.T) {
	dir := fixtureDir(t)
	text := filepath.Join(dir, "notes.txt")
	garbage := filepath.Join(dir, "core.dump")
	open := filepath.Join(dir, "open-ring.shm")
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(text, []byte("hello\n"))
	write(garbage, []byte("\x7fELF"+strings.Repeat("x", 8192)))
	ring, err := os.ReadFile(filepath.Join(dir, "ring.shm"))
	if err != nil {
		t.Fatal(err)
	}
	write(open, ring)
	for p, m := range map[string]os.FileMode{text: 0o644, garbage: 0o666, open: 0o644} {
		if err := os.Chmod(p, m); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	verbs := [][]string{
		{"inspect"}, {"inspect", "--slots", "--json"}, {"verify"}, {"peek"}, {"watch", "--count", "1"},
		{"repair"}, {"repair", "--apply"}, {"push", "--seq", "1:1"}, {"drain", "--max", "1"},
		{"list"}, {"get", "--key", "a"}, {"put", "--key", "a", "--value", "b"}, {"del", "--key", "a"},
	}
	for _, verb := range verbs {
		for _, tc := range []struct{ path, want string }{
			{text, text + ": not a shmkit file (bad magic): a 6-byte file starting 68 65 6c 6c 6f 0a"},
			{garbage, garbage + ": not a shmkit file (bad magic): 7f 45 4c 46 78 78 78 78"},
			{open, open + ": file mode grants more access than allowed: mode 0644, allowed 0600"},
		} {
			args := append([]string{verb[0], tc.path}, verb[1:]...)
			r := run(t, "", args...)
			expectLine(t, r, 3, tc.want)
		}
	}
	// Nothing was changed or backed up by the refused commands.
	if b, err := os.ReadFile(open); err != nil || string(b) != string(ring) {
		t.Fatalf("the refused 0644 ring changed (err %v)", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.bak-*")); len(m) > 0 {
		t.Fatalf("refused commands made backups: %v", m)
	}
}
