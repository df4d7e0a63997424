package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A journal read by the next bridge holds exactly the ids of batches
// published and not acked, with their first publish times, whatever was
// rewritten or torn on the way.
func TestJournalKeepsWhatWasNotAcked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	const fileID = 0xfeed
	j, err := Open(path, fileID)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := j.Published([]Entry{{ID: 1, First: 100}, {ID: 2, First: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Published([]Entry{{ID: 3, First: 200}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Acked(s1); err != nil {
		t.Fatal(err)
	}
	j.Close() // as a SIGKILL leaves it: no more records

	next, err := Open(path, fileID)
	if err != nil {
		t.Fatal(err)
	}
	wantCarried(t, next, map[uint64]int64{3: 200})
	// Carried again (a redelivery of 3 republished with its old time),
	// then acked: gone for the one after.
	s, err := next.Published([]Entry{{ID: 3, First: 200}, {ID: 4, First: 300}})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Acked(s); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Published([]Entry{{ID: 5, First: 400}}); err != nil {
		t.Fatal(err)
	}
	next.Close()
	third, err := Open(path, fileID)
	if err != nil {
		t.Fatal(err)
	}
	wantCarried(t, third, map[uint64]int64{5: 400})
	third.Close()
}

// A record torn by a death inside its write is ignored, and so is what a
// journal of an earlier ring (another file id) held; a file that is not a
// journal is refused, not overwritten.
func TestJournalTornTailAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j")
	j, err := Open(path, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Published([]Entry{{ID: 1, First: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Published([]Entry{{ID: 2, First: 2}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-5], 0o600); err != nil { // the second record torn
		t.Fatal(err)
	}
	torn, err := Open(path, 7)
	if err != nil {
		t.Fatal(err)
	}
	wantCarried(t, torn, map[uint64]int64{1: 1})
	torn.Close()

	other, err := Open(path, 8) // the ring was re-created
	if err != nil {
		t.Fatal(err)
	}
	wantCarried(t, other, map[uint64]int64{})
	other.Close()

	notJournal := filepath.Join(dir, "x")
	if err := os.WriteFile(notJournal, []byte("precious data, not a journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(notJournal, 7); !errors.Is(err, ErrJournal) {
		t.Fatalf("Open of another file: %v, want ErrJournal", err)
	}
	if b, _ := os.ReadFile(notJournal); string(b) != "precious data, not a journal" {
		t.Fatal("the other file was overwritten")
	}
}

func wantCarried(t *testing.T, j *Journal, want map[uint64]int64) {
	t.Helper()
	for id := uint64(1); id <= 10; id++ {
		at, ok := j.FirstPublished(id)
		w, wok := want[id]
		if ok != wok || (ok && !at.Equal(time.Unix(0, w))) {
			t.Fatalf("id %d: journal says (%v, %v), want (%v, %v)", id, at.UnixNano(), ok, w, wok)
		}
	}
}
