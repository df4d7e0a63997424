package exporter

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// TestScrapeNeverAttachesNorWrites: a scrape maps read-only and takes no
// participant entry. A ring whose one entry is held by a live process (an
// attach would find the table full) is scraped all the same; a ring left
// with a dead consumer's leases is scraped again and again and not one
// byte of it changes: the findings stay, nothing is repaired.
func TestScrapeNeverAttachesNorWrites(t *testing.T) {
	dir := t.TempDir()
	full, orphaned := filepath.Join(dir, "full"), filepath.Join(dir, "orphaned")
	r, err := transport.CreateRing(full, transport.RingConfig{Capacity: 8, Participants: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // holds the one entry until the test ends
	if _, err := transport.OpenRing(full); err == nil {
		t.Fatal("a second attach succeeded: the table is not full")
	}
	o, err := transport.CreateRing(orphaned, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b"} {
		if err := o.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	o.Close()
	claimer := helper.Start(t, "claim", proctest.PathArg(orphaned), countEnv+"=2")
	claimer.WaitLine(t, "claimed")
	kill(claimer)
	before := map[string][]byte{}
	for _, p := range []string{full, orphaned} {
		if before[p], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}

	srv := server(t, NewCollector([]string{dir}, Options{}))
	for i := range 5 {
		m := scrape(t, srv)
		if got := m.get(t, "shmkit_file_up", "file="+full); got != 1 {
			t.Fatalf("scrape %d: the ring with a full table is down:\n%s", i, m.dump("shmkit_file_error"))
		}
		if got := m.get(t, "shmkit_participants", "file="+full, "state=alive"); got != 1 {
			t.Errorf("scrape %d: %v alive in the full ring, want its one holder (not us)", i, got)
		}
		if got := m.get(t, "shmkit_findings", "file="+orphaned, "problem=orphaned_lease"); got != 2 {
			t.Errorf("scrape %d: %v orphaned leases, want 2 (a scrape never repairs)", i, got)
		}
		health(t, srv, "?format=json")
	}
	for p, b := range before {
		after, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, after) {
			t.Errorf("%s changed under scrapes", p)
		}
	}
	self := int32(os.Getpid())
	ro, err := transport.OpenRingReadOnly(orphaned)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, p := range ro.Peers() {
		if p.State != "free" && p.ID.PID == self {
			t.Errorf("entry %d names the scraping process: %+v", p.Index, p)
		}
	}
}
