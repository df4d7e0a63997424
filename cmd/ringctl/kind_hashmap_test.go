package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/transport/hashmap"
)

// TestMapRepairApply: repair --apply rolls back what the dead writer left
// (the half insert of delta, the lock on alpha, its home lock): alpha keeps
// its old value, delta is absent, and a second repair finds nothing.
func TestMapRepairApply(t *testing.T) {
	dir := fixtureDir(t)
	path := filepath.Join(dir, "hashmap-dead.shm")
	rep, r := repairJSON(t, path, "--apply", "--no-backup")
	res := rep.Result
	if r.code != 0 || rep.ToRepair != 4 || res == nil || res.Counts["tombstone"] != 1 || res.Counts["unlock"] != 1 ||
		res.Counts["release_home"] != 1 || len(res.DeadParticipants) != 1 || res.DeadParticipants[0].PID != deadPID {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(run(t, "", "repair", path, "--apply").stdout, "nothing to repair") {
		t.Fatal("second repair found something")
	}
	if r := run(t, "", "verify", path); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	m, err := hashmap.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	buf := make([]byte, m.ValueSize())
	if n, err := m.Get([]byte("alpha"), buf); err != nil || string(buf[:n]) != "one" {
		t.Fatalf("alpha: %q %v", buf[:n], err)
	}
	if _, err := m.Get([]byte("delta"), buf); err == nil {
		t.Fatal("delta is present")
	}
}

// TestMapLiveWriter: a map this process has open shows it as a live
// participant; verify and repair find nothing to do.
func TestMapLiveWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "map")
	m, err := hashmap.Create(path, hashmap.Config{Capacity: 16, KeySize: 8, ValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Put([]byte("k\x00"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	var rep mapInspectReport
	r := run(t, "", "inspect", path, "--json", "--slots")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if rep.Len != 1 || len(rep.Participants) != 1 || !rep.Participants[0].Alive || rep.Participants[0].PID != int32(os.Getpid()) ||
		rep.Buckets == nil || len(*rep.Buckets) != 1 || (*rep.Buckets)[0].KeyHex != "6b00" {
		t.Fatalf("%+v", rep)
	}
	if r := run(t, "", "inspect", path, "--slots"); !strings.Contains(r.stdout, "0x6b00") {
		t.Fatalf("a key that is not printable is shown in hex: %+v", r)
	}
	for _, args := range [][]string{{"verify", path}, {"repair", path}} {
		if r := run(t, "", args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	expectLine(t, run(t, "", "repair", path, "--heartbeat", path+".hb"), 2, "--heartbeat applies to rings")
}
