package main

import (
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func itoa(i int) string     { return strconv.Itoa(i) }
func hexOf(b []byte) string { return hex.EncodeToString(b) }

// create --kind makes each kind with its geometry (inspect reads it
// back), and get, put, del and list edit a hash map without a Go program,
// binary keys and values included.
func TestEveryKindIsCreatedAndAMapIsEditedFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		kind string
		args []string
		want []string // in inspect --json
	}{
		{"ring", []string{"--capacity", "4", "--slot-size", "128", "--delivery-limit", "3"}, []string{`"kind": "ring"`, `"capacity": 4`, `"slot_size": 128`, `"delivery_limit": 3`}},
		{"deque", []string{"--capacity", "8", "--participants", "2"}, []string{`"kind": "deque"`, `"capacity": 8`, `"participants": 2`, `"owner": null`}},
		{"hashmap", []string{"--capacity", "8", "--key-size", "4", "--value-size", "8"}, []string{`"kind": "hashmap"`, `"buckets": 8`, `"key_size": 4`, `"value_size": 8`}},
	} {
		path := filepath.Join(dir, tc.kind)
		if r := run(t, "", append([]string{"create", path, "--kind", tc.kind}, tc.args...)...); r.code != 0 || !strings.HasPrefix(r.stdout, "created "+path+": a ") {
			t.Fatalf("create %s: %+v", tc.kind, r)
		}
		r := run(t, "", "inspect", path, "--json")
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("inspect %s: no %s in\n%s", tc.kind, w, r.stdout)
			}
		}
		if r := run(t, "", "verify", path); r.code != 0 {
			t.Errorf("verify %s: %+v", tc.kind, r)
		}
	}
	m := filepath.Join(dir, "hashmap")
	for _, step := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"put", m, "--key", "k1", "--value", "one"}, 0, "inserted key \"k1\": a value of 3 bytes\n"},
		{[]string{"put", m, "--key-hex", "00ff", "--value-hex", "0102"}, 0, "inserted key 0x00ff: a value of 2 bytes\n"},
		{[]string{"put", m, "--key", "k1", "--value", "uno"}, 0, "updated key \"k1\": a value of 3 bytes\n"},
		{[]string{"get", m, "--key", "k1"}, 0, "uno\n"},
		{[]string{"get", m, "--key-hex", "00ff", "--hex"}, 0, "0102\n"},
		{[]string{"put", m, "--key", "long", "--value", "nine byte"}, 1, ""},
		{[]string{"put", m, "--key", "toolong", "--value", "x"}, 1, ""},
		{[]string{"del", m, "--key", "k1"}, 0, "deleted key \"k1\"\n"},
		{[]string{"del", m, "--key", "k1"}, 1, ""},
		{[]string{"get", m, "--key", "k1"}, 1, ""},
		{[]string{"put", filepath.Join(dir, "ring"), "--key", "a", "--value", "b"}, 3, ""},
	} {
		r := run(t, "", step.args...)
		if r.code != step.code || r.stdout != step.out {
			t.Errorf("%v: %+v, want exit %d and %q", step.args, r, step.code, step.out)
		}
	}
	r := run(t, "", "list", m, "--json")
	var rep listReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if len(rep.Entries) != 1 || rep.Entries[0].KeyHex != "00ff" || rep.Entries[0].ValueHex != "0102" || rep.Entries[0].ValueLen != 2 {
		t.Fatalf("list after the edits: %s", r.stdout)
	}
	if r := run(t, "", "verify", m); r.code != 0 {
		t.Fatalf("verify after the edits: %+v", r)
	}
}
