package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzJournal feeds Open arbitrary files: it must never panic,
// and what it accepts it must rewrite into a journal that reads back the
// same (the carried ids survive the rewrite).
func FuzzJournal(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed")
	j, err := Open(seed, 9)
	if err != nil {
		f.Fatal(err)
	}
	s, _ := j.Published([]Entry{{ID: 1, First: 5}, {ID: 2, First: 6}})
	j.Published([]Entry{{ID: 3, First: 7}})
	j.Acked(s)
	j.Close()
	b, _ := os.ReadFile(seed)
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte(journalMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "j")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := Open(path, 9)
		if err != nil {
			return
		}
		carried := make(map[uint64]int64, len(j.carried))
		for id, at := range j.carried {
			carried[id] = at
		}
		j.Close()
		again, err := Open(path, 9)
		if err != nil {
			t.Fatalf("a journal Open rewrote is refused: %v", err)
		}
		defer again.Close()
		if len(again.carried) != len(carried) {
			t.Fatalf("rewrite kept %d ids, want %d", len(again.carried), len(carried))
		}
		for id, at := range carried {
			if again.carried[id] != at {
				t.Fatalf("id %d: %d after the rewrite, want %d", id, again.carried[id], at)
			}
		}
	})
}
