package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Two out bridges on one journal (one ring, the default path): the
// second is refused before it reads or rewrites the file, so what the
// first publishes and never acks reaches the bridge after it. Without the
// lock the second's rewrite renamed a new file over the first's, whose
// later records went to an unlinked inode.
func TestASecondWriterOfOneJournalIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ring.shmbridge-journal")
	a, err := Open(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(p, 1)
	if err == nil {
		b.Close()
		t.Fatal("a second Open of a held journal succeeded")
	}
	if !errors.Is(err, ErrJournal) || !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v; want ErrJournal and ErrInUse", err)
	}
	if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second Open: %q; want the path and the holder's pid", err)
	}
	if _, err := a.Published([]Entry{{ID: 7, First: 100}}); err != nil {
		t.Fatal(err)
	}
	a.Close() // as a SIGKILL of A after publishing, before the lease ack
	c, err := Open(p, 1)
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	defer c.Close()
	if _, ok := c.FirstPublished(7); !ok {
		t.Errorf("id 7, published by the first bridge and never acked, is not in the journal the next one reads")
	}
}
