package exporter

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// TestUnusableFilesAreReportedNotFatal: files that cannot be read (missing,
// not shmkit, truncated, too open a mode, another user's) are reported as
// shmkit_file_up 0 with the reason the library gave, beside the files
// that can be; the exporter goes on serving, also while a file is
// truncated and restored under its scrapes.
func TestUnusableFilesAreReportedNotFatal(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	r, err := transport.CreateRing(good, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	img, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]string{ // path -> reason
		filepath.Join(dir, "missing"):           "not_found",
		write("text", []byte("hello\n"), 0o600): "not_shmkit", // shorter than any header, and not the start of one
		write("elf", append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 8192)...), 0o600): "not_shmkit",
		write("half", img[:len(img)/2], 0o600):                                                "truncated",
		write("open", img, 0o644):                                                             "permissive_mode",
	}
	if os.Geteuid() == 0 {
		p := write("foreign", img, 0o600)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[p] = "foreign_owner"
	}
	paths := []string{good}
	for p := range cases {
		paths = append(paths, p)
	}
	srv := server(t, NewCollector(paths, Options{}))

	m := scrape(t, srv)
	if got := m.get(t, "shmkit_file_up", "file="+good); got != 1 {
		t.Fatalf("the good ring is down beside the bad files")
	}
	for p, reason := range cases {
		if got := m.get(t, "shmkit_file_up", "file="+p); got != 0 {
			t.Errorf("%s: up = %v", p, got)
		}
		if got := m.get(t, "shmkit_file_error", "file="+p, "reason="+reason); got != 1 {
			t.Errorf("%s: no file_error{reason=%s}:\n%s", p, reason, m.dump("shmkit_file_error"))
		}
	}
	code, body := health(t, srv, "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz with down files: %d\n%s", code, body)
	}
	for p := range cases {
		if !strings.Contains(body, "down "+p+": ") {
			t.Errorf("/healthz does not name %s:\n%s", p, body)
		}
	}
	if strings.Contains(body, "shm: ") || strings.Contains(body, "layout: ") {
		t.Errorf("/healthz words errors with package prefixes:\n%s", body)
	}

	// A ring truncated and restored in a loop while it is scraped: every
	// scrape answers, and says up or why not. Not under -race: an atomic
	// load that faults inside the race runtime's C code cannot be
	// recovered (the process dies with "traceback did not unwind
	// completely"); test.sh runs this package without -race too.
	if proctest.RaceEnabled {
		t.Log("the scrapes under truncation are skipped under -race")
		return
	}
	victim := write("victim", img, 0o600)
	srv = server(t, NewCollector([]string{victim}, Options{}))
	trunc := proctest.StartTruncator(t, helper.Test, victim)
	reasons := map[string]int{}
	for range 30 {
		m := scrape(t, srv)
		switch up := m.get(t, "shmkit_file_up", "file="+victim); up {
		case 1:
			reasons["up"]++
		default:
			for _, s := range m["shmkit_file_error"].GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "reason" {
						reasons[l.GetValue()]++
					}
				}
			}
		}
	}
	kill(trunc)
	t.Logf("30 scrapes under truncation: %v", reasons)
	if err := os.WriteFile(victim, img, 0o600); err != nil { // whole again
		t.Fatal(err)
	}
	if got := scrape(t, srv).get(t, "shmkit_file_up", "file="+victim); got != 1 {
		t.Errorf("the restored ring is not up")
	}
}
