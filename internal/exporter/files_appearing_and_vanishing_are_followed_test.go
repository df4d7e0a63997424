package exporter

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// TestFilesAppearingAndVanishingAreFollowed: every scrape lists the
// directory again. A deque and a hash map created between two scrapes
// appear in the second, with their kind's metrics; a removed ring's
// series are gone from the next; backups, temporary files of a creator
// and files of other programs are counted as skipped, never reported.
func TestFilesAppearingAndVanishingAreFollowed(t *testing.T) {
	dir := t.TempDir()
	ringPath := filepath.Join(dir, "ring")
	r, err := transport.CreateRing(ringPath, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.WriteFile(filepath.Join(dir, "postgres.shm"), []byte("not ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	col := NewCollector([]string{dir}, Options{})
	srv := server(t, col)

	m := scrape(t, srv)
	if m.get(t, "shmkit_exporter_files") != 1 || m.get(t, "shmkit_file_up", "file="+ringPath, "kind=ring") != 1 {
		t.Fatalf("first scrape:\n%s", m.dump("shmkit_file_up"))
	}
	if got := m.get(t, "shmkit_exporter_skipped_files", "dir="+dir, "reason=not_shmkit"); got != 1 {
		t.Errorf("skipped not_shmkit = %v, want 1", got)
	}

	dequePath, mapPath := filepath.Join(dir, "jobs"), filepath.Join(dir, "config")
	d, err := transport.CreateDeque(dequePath, transport.RingConfig{Capacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := d.TryPush([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	defer d.Close()
	hm, err := hashmap.Create(mapPath, hashmap.Config{Capacity: 16, KeySize: 8, ValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := hm.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	hm.Close()
	backup, err := cliutil.Backup(ringPath, "")
	if err != nil {
		t.Fatal(err)
	}
	// What a creator killed mid-way leaves (shm.Create's temporary name).
	if err := os.WriteFile(filepath.Join(dir, ".orders.shmkit-tmp-1-00"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	m = scrape(t, srv)
	if got := m.get(t, "shmkit_exporter_files"); got != 3 {
		t.Fatalf("files = %v, want ring, deque and map\n%s", got, m.dump("shmkit_file_up"))
	}
	deque := []string{"file=" + dequePath, "kind=deque"}
	if m.get(t, "shmkit_depth", deque...) != 5 || m.get(t, "shmkit_deque_pushed_total", deque...) != 5 ||
		m.get(t, "shmkit_deque_owner_alive", deque...) != 1 || m.get(t, "shmkit_participants", append(deque, "state=alive")...) != 1 {
		t.Errorf("deque:\n%s%s", m.dump("shmkit_depth"), m.dump("shmkit_deque_owner_alive"))
	}
	hmap := []string{"file=" + mapPath, "kind=hashmap"}
	if m.get(t, "shmkit_hashmap_entries", hmap...) != 2 || m.get(t, "shmkit_hashmap_inserts_total", hmap...) != 2 ||
		m.get(t, "shmkit_capacity", hmap...) != 16 || m.get(t, "shmkit_healthy", hmap...) != 1 {
		t.Errorf("hash map:\n%s", m.dump("shmkit_hashmap_entries"))
	}
	for reason, want := range map[string]float64{"backup": 1, "temporary": 1, "not_shmkit": 1} {
		if got := m.get(t, "shmkit_exporter_skipped_files", "dir="+dir, "reason="+reason); got != want {
			t.Errorf("skipped %s = %v, want %v", reason, got, want)
		}
	}
	if n := m.has("shmkit_file_up", "file="+backup); n != 0 {
		t.Errorf("the backup %s is reported", backup)
	}
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
		t.Fatalf("lint with every kind: %v %v", err, problems)
	}

	if err := os.Remove(ringPath); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, srv)
	for name, mf := range m {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "file" && l.GetValue() == ringPath {
					t.Errorf("%s still has a series of the removed ring", name)
				}
			}
		}
	}
	if got := m.get(t, "shmkit_exporter_files"); got != 2 {
		t.Errorf("files = %v after the ring was removed, want 2", got)
	}
}
