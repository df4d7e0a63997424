package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// peek shows the queued messages and changes nothing in the file (no
// attach, no counter), and drain --lease without --exec is refused before
// it takes anything: the ten messages of `drain --lease | head -1` are all
// still there, in order.
func TestPeekAndARefusedLeaseTakeNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	if r := run(t, "", "create", path, "--capacity", "16"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "push", path, "--seq", "1:10"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	expectLine(t, run(t, "", "drain", path, "--lease", "--max", "1"), 2, "cannot tell whether the reader processed it")
	expectLine(t, run(t, "", "drain", path, "--heartbeat", path+".hb"), 2, "need --exec")
	r := run(t, "", "peek", path, "--max", "0", "--json")
	var rep peekReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || r.stderr != "" {
		t.Fatalf("%v %+v", err, r)
	}
	if len(rep.Messages) != 10 {
		t.Fatalf("peek showed %d messages, want 10: %s", len(rep.Messages), r.stdout)
	}
	for i, m := range rep.Messages {
		if want := []byte(itoa(i + 1)); m.Position != uint64(i) || m.State != "ready" || m.Deliveries != 0 || m.DataHex != hexOf(want) {
			t.Errorf("message %d: %+v, want position %d, ready, 0 deliveries, %q", i, m, i, want)
		}
	}
	if r := run(t, "", "peek", path, "--max", "3"); r.code != 0 || bytes.Count([]byte(r.stdout), []byte("│ ready │")) != 3 {
		t.Fatalf("peek --max 3: %+v", r)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("peek or a refused drain changed the ring file")
	}
	if _, err := os.Stat(path + ".hb"); !os.IsNotExist(err) {
		t.Fatalf("a refused drain created its heartbeat table: %v", err)
	}
	if r := run(t, "", "drain", path, "--max", "1"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("the first message after the peeks: %+v", r)
	}
}
