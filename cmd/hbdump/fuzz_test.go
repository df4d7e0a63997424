package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
)

// FuzzHbdump runs dump and check in-process over hostile files: with
// patch false, data is the whole file; with patch true, data is written
// over the area of a valid fixture table (from offset off, so the header
// stays valid and every slot, lease record and counter is fair game).
// Whatever the bytes, the command must not panic, must exit 0, 1 or 3
// and must print at most one line on stderr.
func FuzzHbdump(f *testing.F) {
	// Whole valid tables are seeds of the patch mode only: as whole-file
	// inputs they make every step of minimising a new input slow.
	var bases [][]byte
	for _, fx := range fixtures {
		b, err := os.ReadFile(filepath.Join("testdata", fx.name))
		if err != nil {
			f.Fatal(err)
		}
		if fx.damage != nil {
			f.Add(b, false, uint16(0))
			continue
		}
		patchForRun(f, b, fx)
		f.Add(b[layout.HeaderSize+layout.HBSlotsOff:][:64], true, uint16(len(bases)*1024+layout.HBSlotsOff))
		bases = append(bases, b)
	}
	f.Add(bases[0][:layout.HeaderSize], false, uint16(0))
	f.Add([]byte{}, false, uint16(0))
	f.Add(bytes.Repeat([]byte{0xff}, 64), true, uint16(layout.HBSlotsOff))
	f.Add(binary.LittleEndian.AppendUint64(nil, layout.PeerCtl{State: 9, PID: 1}.Pack()), true, uint16(layout.HBSlotsOff))
	f.Add(binary.LittleEndian.AppendUint64(nil, layout.PeerCtl{State: layout.HBActive, PID: 1}.Pack()), true, uint16(layout.HBSlotsOff+64))

	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, patch bool, off uint16) {
		file := data
		if patch {
			data = data[:min(len(data), 512)]
			base := bases[int(off)/1024%len(bases)]
			file = append([]byte(nil), base...)
			area := file[layout.HeaderSize:]
			start := int(off) % len(area)
			copy(area[start:], data)
		}
		path := filepath.Join(dir, "t.hb")
		os.Remove(path)
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"hbdump", path, "--all"},
			{"hbdump", path, "--json", "--all", "--stale", "1ms"},
			{"hbdump", "check", path},
			{"hbdump", "check", path, "--format", "prometheus"},
		} {
			var stdout, stderr bytes.Buffer
			app := newAppEnv(&env{stdout: &stdout, readyTimeout: time.Millisecond})
			code := cliutil.Run(app, args, &stderr)
			msg := stderr.String()
			if code != 0 && code != 1 && code != 3 {
				t.Fatalf("%v: exit %d: %s", args[1:], code, msg)
			}
			if strings.Contains(msg, "internal error") || strings.Count(strings.TrimSuffix(msg, "\n"), "\n") > 0 {
				t.Fatalf("%v: exit %d, stderr %q", args[1:], code, msg)
			}
			if code == 0 && args[1] == "check" && msg != "" {
				t.Fatalf("check exit 0 with stderr %q", msg)
			}
		}
	})
}
