package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// fuzzBases are the files FuzzInspectors patches; base 0 is no file at
// all, only the fuzzer's bytes.
var fuzzBases = []string{"", "ring.shm", "orphaned.shm", "heartbeat.shm", "badlength.shm", "deque-deadowner.shm", "hashmap-dead.shm", "ring-ids.shm", "deque-ids.shm"}

// fuzzCommands are the read-only commands FuzzInspectors runs; FILE is the
// fuzzed file.
var fuzzCommands = [][]string{
	{"inspect", "FILE", "--slots"}, {"inspect", "FILE", "--json", "--slots"},
	{"verify", "FILE"}, {"verify", "FILE", "--json"},
	{"hexdump", "FILE"}, {"hexdump", "FILE", "--slot", "3"},
	{"repair", "FILE"}, {"repair", "FILE", "--json"},
	{"peek", "FILE", "--max", "0"}, {"peek", "FILE", "--json"},
}

// FuzzInspectors runs the read-only commands in-process over arbitrary
// file contents: the fuzzer's bytes alone, or a valid file (a fixture)
// with them written over it at some offset. Whatever the file holds: no
// panic, an exit code of 0, 1 or 3 (2 only for a --slot the file has not
// got), and a failure says so in one line on stderr (or, for 1, with its
// report on stdout). One command runs per input, to keep executions
// cheap enough for the fuzzer to minimise what it finds.
func FuzzInspectors(f *testing.F) {
	bases := make([][]byte, len(fuzzBases))
	for i, name := range fuzzBases[1:] {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		bases[i+1] = b
	}
	for op := range fuzzCommands {
		f.Add([]byte{}, uint16(0), uint8(1+op%4), uint8(op))
	}
	f.Add([]byte{0x21, 0x10, 0x00, 0x00, 0x40, 0x01}, uint16(0x340), uint8(1), uint8(0))             // a slot word
	f.Add([]byte{0x02, 0x00, 0x00, 0x00, 0x01, 0x00}, uint16(0x2c0), uint8(2), uint8(2))             // a participant
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(0x100), uint8(1), uint8(3))                         // tail
	f.Add([]byte("REDX"), uint16(0x80), uint8(1), uint8(4))                                          // the ready word
	f.Add([]byte{0x04, 0x00, 0x00, 0x80}, uint16(0x1c0), uint8(3), uint8(6))                         // a member's state
	f.Add([]byte("\x89SHMKIT\n\x01\x00\x02\x00"), uint16(0), uint8(0), uint8(4))                     // a header alone
	f.Add([]byte{0x05, 0x00, 0x01, 0x00, 0x00, 0x01}, uint16(0x288), uint8(5), uint8(0))             // a deque's owner word
	f.Add([]byte{0x0e, 0x00, 0x06, 0x00}, uint16(0x3c0), uint8(5), uint8(6))                         // a returned deque slot
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint16(0x478), uint8(7), uint8(1)) // a ring slot's message id
	f.Add([]byte{0x03}, uint16(0x34), uint8(7), uint8(0))                                            // an unknown option bit (param2)
	f.Add([]byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80}, uint16(0x120), uint8(8), uint8(8)) // a deque's next_id
	path := filepath.Join(f.TempDir(), "file")
	f.Fuzz(func(t *testing.T, data []byte, at uint16, base, op uint8) {
		b := data
		if base := bases[int(base)%len(bases)]; base != nil {
			b = bytes.Clone(base)
			copy(b[int(at)%len(b):], data)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"ringctl"}, fuzzCommands[int(op)%len(fuzzCommands)]...)
		args[2] = path
		var stdout, stderr bytes.Buffer
		code := cliutil.Run(newApp(&stdout), args, &stderr)
		lines := strings.Count(stderr.String(), "\n")
		bad := strings.Contains(stderr.String(), "internal error")
		switch code {
		case 0:
			// Only peek says something on stderr when it succeeds: one
			// line, when dead processes hold messages (warnStranded).
			warned := args[1] == "peek" && lines == 1 && strings.Contains(stderr.String(), " of dead processes, not delivered until a repair")
			bad = bad || (stderr.Len() != 0 && !warned)
		case 1:
			bad = bad || lines > 1 || (lines == 0 && stdout.Len() == 0)
		case 2: // --slot names a slot the file has not got (not a ring, or too few slots)
			bad = bad || !slices.Contains(args, "--slot") || lines != 1 || !strings.Contains(stderr.String(), "--slot")
		case 3:
			bad = bad || lines != 1 || stdout.Len() != 0
		default:
			bad = true
		}
		if bad || (stderr.Len() > 0 && !strings.HasPrefix(stderr.String(), "ringctl: ")) {
			t.Fatalf("%v: exit %d\nstderr %q\nstdout %.2000s", args[1:], code, stderr.String(), stdout.String())
		}
	})
}
