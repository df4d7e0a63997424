package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenCases run the binary over the fixtures as a user would; each
// output (exit code, stdout, stderr, with the fixture directory shown as
// $DIR) is compared with testdata/NAME.golden. -update rewrites them.
var goldenCases = []struct {
	name string
	args string // $DIR is the directory holding copies of the fixtures
}{
	{"help", "--help"},
	{"inspect-ring", "inspect $DIR/ring.shm"},
	{"inspect-ring-json", "inspect $DIR/ring.shm --json"},
	{"inspect-orphaned-slots", "inspect $DIR/orphaned.shm --slots"},
	{"inspect-orphaned-json", "inspect --json $DIR/orphaned.shm --slots"},
	{"inspect-badlength-slots", "inspect $DIR/badlength.shm --slots"},
	{"inspect-badmagic", "inspect $DIR/badmagic.shm"},
	{"inspect-newversion", "inspect $DIR/newversion.shm"},
	{"inspect-oldversion", "inspect $DIR/oldversion.shm"},
	{"verify-newversion", "verify $DIR/newversion.shm"},
	{"verify-oldversion", "verify $DIR/oldversion.shm"},
	{"repair-oldversion", "repair $DIR/oldversion.shm --apply"},
	{"inspect-orphaned-otherns", "inspect $DIR/orphaned-otherns.shm --slots"},
	{"inspect-orphaned-otherns-json", "inspect $DIR/orphaned-otherns.shm --json"},
	{"verify-orphaned-otherns", "verify $DIR/orphaned-otherns.shm"},
	{"repair-orphaned-otherns", "repair $DIR/orphaned-otherns.shm"},
	{"inspect-repairer-dead", "inspect $DIR/repairer-dead.shm"},
	{"inspect-repairer-dead-json", "inspect $DIR/repairer-dead.shm --json"},
	{"verify-repairer-dead", "verify $DIR/repairer-dead.shm"},
	{"repair-repairer-dead-json", "repair $DIR/repairer-dead.shm --json"},
	{"inspect-truncated", "inspect $DIR/truncated.shm"},
	{"inspect-heartbeat", "inspect $DIR/heartbeat.shm"},
	{"inspect-missing", "inspect $DIR/missing.shm"},
	{"verify-ring", "verify $DIR/ring.shm"},
	{"verify-ring-json", "verify $DIR/ring.shm --json"},
	{"verify-badlength", "verify $DIR/badlength.shm"},
	{"verify-orphaned", "verify $DIR/orphaned.shm"},
	{"verify-orphaned-json", "verify $DIR/orphaned.shm --json"},
	{"verify-badmagic", "verify $DIR/badmagic.shm"},
	{"verify-truncated", "verify $DIR/truncated.shm"},
	{"hexdump-ring", "hexdump $DIR/ring.shm"},
	{"hexdump-ring-header", "hexdump $DIR/ring.shm --header"},
	{"hexdump-ring-slot", "hexdump $DIR/ring.shm --slot 1"},
	{"hexdump-ring-range", "hexdump $DIR/ring.shm --range 0x2c0:0x40a"},
	{"hexdump-orphaned-participant", "hexdump $DIR/orphaned.shm --range 704:768"},
	{"hexdump-orphaned-otherns-participant", "hexdump $DIR/orphaned-otherns.shm --range 704:768"},
	{"hexdump-heartbeat", "hexdump $DIR/heartbeat.shm"},
	{"hexdump-heartbeat-member", "hexdump $DIR/heartbeat.shm --range 0x1c0:0x240"},
	{"hexdump-badmagic", "hexdump $DIR/badmagic.shm --header"},
	{"hexdump-newversion", "hexdump $DIR/newversion.shm --range :64"},
	{"hexdump-truncated", "hexdump $DIR/truncated.shm"},
	{"hexdump-heartbeat-slot", "hexdump $DIR/heartbeat.shm --slot 0"},
	{"hexdump-badmagic-slot", "hexdump $DIR/badmagic.shm --slot 0"},
	{"repair-ring", "repair $DIR/ring.shm"},
	{"repair-orphaned", "repair $DIR/orphaned.shm"},
	{"inspect-batch-dead-slots", "inspect $DIR/batch-dead.shm --slots"},
	{"verify-batch-dead", "verify $DIR/batch-dead.shm"},
	{"repair-batch-dead", "repair $DIR/batch-dead.shm"},
	{"repair-orphaned-json", "repair $DIR/orphaned.shm --json"},
	{"repair-badlength", "repair $DIR/badlength.shm"},
	{"repair-orphaned-heartbeat", "repair $DIR/orphaned.shm --heartbeat $DIR/heartbeat.shm"},
	{"repair-orphaned-heartbeat-json", "repair $DIR/orphaned.shm --heartbeat $DIR/heartbeat.shm --json"},
	{"repair-ring-heartbeat", "repair $DIR/ring.shm --heartbeat $DIR/heartbeat.shm"},
	{"inspect-deque", "inspect $DIR/deque.shm"},
	{"inspect-deque-json", "inspect $DIR/deque.shm --json --slots"},
	{"inspect-deque-deadowner-slots", "inspect $DIR/deque-deadowner.shm --slots"},
	{"inspect-deque-deadowner-json", "inspect $DIR/deque-deadowner.shm --slots --json"},
	{"inspect-deque-deadthief-slots", "inspect $DIR/deque-deadthief.shm --slots"},
	{"inspect-deque-poison-slots", "inspect $DIR/deque-poison.shm --slots"},
	{"verify-deque", "verify $DIR/deque.shm"},
	{"verify-deque-json", "verify $DIR/deque.shm --json"},
	{"verify-deque-deadowner", "verify $DIR/deque-deadowner.shm"},
	{"verify-deque-deadowner-json", "verify $DIR/deque-deadowner.shm --json"},
	{"verify-deque-deadthief", "verify $DIR/deque-deadthief.shm"},
	{"verify-deque-poison", "verify $DIR/deque-poison.shm"},
	{"hexdump-deque", "hexdump $DIR/deque.shm --range 0x2c0:"},
	{"hexdump-deque-slot", "hexdump $DIR/deque.shm --slot 1"},
	{"hexdump-deque-deadowner-control", "hexdump $DIR/deque-deadowner.shm --range 0x100:0x290"},
	{"repair-deque", "repair $DIR/deque.shm"},
	{"repair-deque-deadowner", "repair $DIR/deque-deadowner.shm"},
	{"repair-deque-deadowner-json", "repair $DIR/deque-deadowner.shm --json"},
	{"repair-deque-deadthief", "repair $DIR/deque-deadthief.shm"},
	{"repair-deque-poison", "repair $DIR/deque-poison.shm"},
	{"push-deque", "push $DIR/deque.shm --seq 1:2"},
	{"repair-deque-deadowner-heartbeat", "repair $DIR/deque-deadowner.shm --heartbeat $DIR/heartbeat.shm"},
	{"usage-deque-slot", "hexdump $DIR/deque.shm --slot 8"},
	{"inspect-hashmap", "inspect $DIR/hashmap.shm --slots"},
	{"inspect-hashmap-json", "inspect $DIR/hashmap.shm --slots --json"},
	{"inspect-hashmap-dead", "inspect $DIR/hashmap-dead.shm"},
	{"inspect-hashmap-dead-json", "inspect $DIR/hashmap-dead.shm --json"},
	{"verify-hashmap", "verify $DIR/hashmap.shm"},
	{"verify-hashmap-dead", "verify $DIR/hashmap-dead.shm"},
	{"verify-hashmap-dead-json", "verify $DIR/hashmap-dead.shm --json"},
	{"hexdump-hashmap-header-area", "hexdump $DIR/hashmap.shm --range 0x100:0x200"},
	{"hexdump-hashmap-slot", "hexdump $DIR/hashmap-dead.shm --slot 0"},
	{"repair-hashmap", "repair $DIR/hashmap.shm"},
	{"repair-hashmap-dead", "repair $DIR/hashmap-dead.shm"},
	{"repair-hashmap-dead-json", "repair $DIR/hashmap-dead.shm --json"},
	{"drain-hashmap", "drain $DIR/hashmap.shm"},
	{"usage-backup-without-apply", "repair $DIR/orphaned.shm --no-backup"},
	{"usage-no-path", "inspect"},
	{"usage-extra-arg", "inspect $DIR/ring.shm $DIR/orphaned.shm"},
	{"usage-unknown-flag", "verify $DIR/ring.shm --nope"},
	{"usage-exclusive", "hexdump $DIR/ring.shm --header --slot 1"},
	{"usage-bad-range", "hexdump $DIR/ring.shm --range 9:3"},
	{"usage-unknown-command", "frobnicate $DIR/ring.shm"},
	{"usage-create-capacity", "create $DIR/new.shm --capacity 7"},
	// The one grammar (issue 18): flags anywhere after the command (and
	// before it), --format and its short form --json, the payload's
	// encoding a flag of its own, flags quoted as typed, bad values said.
	{"grammar-flag-before-command", "--json verify $DIR/ring.shm"},
	{"grammar-format-json", "verify $DIR/ring.shm --format json"},
	{"grammar-end-of-flags", "inspect -- $DIR/ring.shm"},
	{"usage-json-and-format", "inspect $DIR/ring.shm --json --format text"},
	{"usage-format-unknown", "verify $DIR/ring.shm --format yaml"},
	{"usage-format-hex", "drain $DIR/ring.shm --format hex"},
	{"usage-encoding-unknown", "drain $DIR/ring.shm --encoding base64"},
	{"usage-single-dash-flag", "verify $DIR/ring.shm -nope"},
	{"usage-flag-needs-value", "inspect $DIR/ring.shm --allow-mode"},
	{"usage-capacity-negative", "create $DIR/new.shm --capacity -8"},
	{"usage-capacity-not-a-number", "create $DIR/new.shm --capacity lots"},
	{"usage-watch-interval-unit", "watch $DIR/ring.shm --interval 5"},
	// No arguments, help (the command and the flag, anywhere).
	{"no-arguments", ""},
	{"help-command", "help inspect"},
	{"help-after-path", "verify $DIR/ring.shm --help"},
	{"usage-help-unknown-topic", "help frobnicate"},
	// One error wording: a short text file, a file of another kind.
	{"inspect-text-file", "inspect $DIR/text.shm"},
	{"verify-text-file", "verify $DIR/text.shm"},
	{"hexdump-text-file", "hexdump $DIR/text.shm"},
	{"grammar-hex-short-for-encoding", "peek $DIR/ring.shm --encoding hex"},
	{"usage-hex-and-encoding", "peek $DIR/ring.shm --hex --encoding text"},
	{"usage-unknown-flag-near", "inspect $DIR/ring.shm --slot"},
	{"usage-create-kind", "create $DIR/new.shm --kind set --capacity 8"},
	{"usage-create-flag", "create $DIR/new.shm --kind hashmap --capacity 8 --slot-size 128"},
	{"usage-create-hashmap-geometry", "create $DIR/new.shm --kind hashmap --capacity 8 --key-size 2000"},
	{"peek-ring", "peek $DIR/ring.shm"},
	{"peek-ring-json", "peek $DIR/ring.shm --json --max 2"},
	{"peek-ring-hex", "peek --hex $DIR/ring.shm"},
	{"peek-orphaned", "peek $DIR/orphaned.shm"},
	{"peek-batch-dead", "peek $DIR/batch-dead.shm"},
	{"peek-deque", "peek $DIR/deque.shm"},
	{"peek-deque-deadthief", "peek $DIR/deque-deadthief.shm --json"},
	{"peek-deque-poison", "peek $DIR/deque-poison.shm"},
	{"peek-hashmap", "peek $DIR/hashmap.shm"},
	{"peek-truncated", "peek $DIR/truncated.shm"},
	{"usage-peek-max", "peek $DIR/ring.shm --max -1"},
	{"list-hashmap", "list $DIR/hashmap.shm"},
	{"list-hashmap-hex", "list $DIR/hashmap.shm --hex"},
	{"list-hashmap-json", "list $DIR/hashmap.shm --json"},
	{"get-hashmap", "get $DIR/hashmap.shm --key alpha"},
	{"get-hashmap-hex", "get $DIR/hashmap.shm --key-hex 67616d6d61 --hex"},
	{"get-hashmap-json", "get $DIR/hashmap.shm --key alpha --json"},
	{"get-hashmap-missing", "get $DIR/hashmap.shm --key beta"},
	{"get-ring", "get $DIR/ring.shm --key alpha"},
	{"usage-get-key", "get $DIR/hashmap.shm"},
	{"usage-get-key-hex", "get $DIR/hashmap.shm --key-hex zz"},
	{"usage-put-both", "put $DIR/hashmap.shm --key a --key-hex 61 --value x"},
	{"usage-drain-lease", "drain $DIR/ring.shm --lease"},
	{"usage-drain-heartbeat", "drain $DIR/ring.shm --heartbeat $DIR/typo.hb"},
	{"usage-drain-create-heartbeat", "drain $DIR/ring.shm --create-heartbeat"},
	{"drain-heartbeat-missing", "drain $DIR/ring.shm --heartbeat $DIR/typo.hb --exec true"},
	// Message ids (msg_ids_fixtures_test.go): created, shown, then the
	// dead consumer's lease repaired and the message queued again with
	// its id.
	{"create-ring-ids", "create $DIR/new-ids.shm --capacity 8 --msg-ids"},
	{"create-deque-ids", "create $DIR/new-deque-ids.shm --kind deque --capacity 8 --msg-ids"},
	{"usage-create-hashmap-ids", "create $DIR/new.shm --kind hashmap --capacity 8 --msg-ids"},
	{"inspect-ring-ids-slots", "inspect $DIR/ring-ids.shm --slots"},
	{"inspect-ring-ids-json", "inspect $DIR/ring-ids.shm --slots --json"},
	{"verify-ring-ids", "verify $DIR/ring-ids.shm"},
	{"peek-ring-ids", "peek $DIR/ring-ids.shm"},
	{"peek-ring-ids-json", "peek $DIR/ring-ids.shm --json"},
	{"hexdump-ring-ids-slot", "hexdump $DIR/ring-ids.shm --slot 1"},
	{"inspect-deque-ids-slots", "inspect $DIR/deque-ids.shm --slots"},
	{"peek-deque-ids-json", "peek $DIR/deque-ids.shm --json"},
	{"repair-ring-ids-apply", "repair $DIR/ring-ids.shm --apply --no-backup"},
	{"peek-ring-ids-repaired", "peek $DIR/ring-ids.shm"},
	// Last: these change orphaned.shm (a message pushed, the queued
	// ones drained); both warn of the dead consumer's lease.
	{"push-orphaned", "push $DIR/orphaned.shm --seq 7:7"},
	{"drain-orphaned", "drain $DIR/orphaned.shm"},
}

func TestGolden(t *testing.T) {
	dir := fixtureDir(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Fields(strings.ReplaceAll(tc.args, "$DIR", dir))
			r := run(t, "", args...)
			got := fmt.Sprintf("$ ringctl %s\nexit %d\n--- stdout\n%s--- stderr\n%s", tc.args, r.code, r.stdout, r.stderr)
			got = strings.ReplaceAll(got, dir, "$DIR")
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			if r.code != 0 && r.code != 1 && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d with %d lines on stderr, want one", r.code, strings.Count(r.stderr, "\n"))
			}
		})
	}
}
