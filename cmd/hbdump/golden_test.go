package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// goldenCases run the command over a copy of a fixture (and the jobs
// ring), one command line after the other, and compare the transcript,
// with what varies between runs masked, to testdata/NAME.golden.
var goldenCases = []struct {
	fixture string
	runs    [][]string
}{
	{"healthy.hb", [][]string{
		{"./healthy.hb"},
		{"./healthy.hb", "--all", "--json"},
		{"check", "./healthy.hb"},
		{"check", "./healthy.hb", "--format", "json"},
		{"check", "./healthy.hb", "--format", "prometheus"},
		{"reap", "./healthy.hb"},
		{"watch", "./healthy.hb", "--count", "2", "--interval", "1ms"},
	}},
	{"dead.hb", [][]string{
		// Without --ring: the lease's ring is found beside the table by
		// its id and named, as reap names it.
		{"./dead.hb"},
		{"watch", "./dead.hb", "--count", "1", "--interval", "1ms"},
		{"./dead.hb", "--ring", "./jobs.ring"},
		{"./dead.hb", "--json", "--ring", "./jobs.ring"},
		{"check", "./dead.hb"},
		{"check", "./dead.hb", "--format", "prometheus"},
		{"reap", "./dead.hb", "--ring", "./jobs.ring"},
		{"reap", "./dead.hb", "--json"},
		// Without --ring: the ring is found beside the table by its id
		// (and named), both files are backed up, and both dead reclaimed.
		{"reap", "./dead.hb", "--apply"},
		{"./dead.hb", "--all"},
		{"reap", "./dead.hb", "--apply", "--ring", "./jobs.ring", "--json"},
		{"./dead.hb", "--all", "--ring", "./jobs.ring"},
		{"check", "./dead.hb"},
		{"reap", "./dead.hb", "--apply", "--ring", "./jobs.ring"},
	}},
	// A deque given with --ring: its dead thief's lease is shown by
	// position like a ring's, counted as orphaned, and returned by reap.
	{"deque.hb", [][]string{
		{"./deque.hb", "--ring", "./jobs.deque"},
		{"./deque.hb", "--json", "--ring", "./jobs.deque"},
		{"check", "./deque.hb", "--ring", "./jobs.deque"},
		{"watch", "./deque.hb", "--count", "1", "--interval", "1ms", "--ring", "./jobs.deque"},
		// Without --ring: the deque is found beside the table by its id.
		{"reap", "./deque.hb"},
		{"reap", "./deque.hb", "--ring", "./jobs.deque", "--ring", "./jobs.ring"},
		{"reap", "./deque.hb", "--ring", "./jobs.deque", "--json"},
		{"reap", "./deque.hb", "--apply", "--ring", "./jobs.deque", "--ring", "./jobs.ring"},
		{"./deque.hb", "--all", "--ring", "./jobs.deque"},
		{"check", "./deque.hb", "--ring", "./jobs.deque"},
		// Nothing orphaned left in either file.
		{"reap", "./deque.hb", "--apply", "--ring", "./jobs.deque", "--ring", "./jobs.ring", "--json"},
		// A file of another kind given with --ring: unusable.
		{"./deque.hb", "--ring", "./deque.hb"},
	}},
	{"recycled.hb", [][]string{
		{"./recycled.hb"},
		{"check", "./recycled.hb", "--format", "json"},
		{"reap", "./recycled.hb"},
		{"reap", "./recycled.hb", "--apply"},
	}},
	{"stale.hb", [][]string{
		{"./stale.hb", "--all"},
		{"check", "./stale.hb"},
		{"check", "./stale.hb", "--stale", "0"},
		{"check", "./stale.hb", "--format", "prometheus"},
		{"watch", "./stale.hb", "--count", "1", "--interval", "1ms"},
		{"reap", "./stale.hb", "--apply"},
		// The stale participant, alive, is untouched.
		{"./stale.hb", "--all"},
	}},
	// Other pid namespaces and an undecided member: the live container
	// member is alive (its lock is held) and named by its namespace; the
	// dead one is reclaimed; the undecided one is shown as unknown, fails
	// check, and reap never touches it.
	{"namespaces.hb", [][]string{
		{"./namespaces.hb"},
		{"./namespaces.hb", "--json"},
		{"check", "./namespaces.hb"},
		{"check", "./namespaces.hb", "--format", "json"},
		{"check", "./namespaces.hb", "--format", "prometheus"},
		{"watch", "./namespaces.hb", "--count", "1", "--interval", "1ms"},
		{"reap", "./namespaces.hb"},
		{"reap", "./namespaces.hb", "--apply"},
		{"./namespaces.hb", "--all"},
	}},
	{"odd.hb", [][]string{
		{"./odd.hb", "--all"},
		{"./odd.hb", "--json"},
		{"check", "./odd.hb"},
		{"reap", "./odd.hb"},
	}},
	{"damaged", [][]string{
		{"./badmagic.hb"},
		{"check", "./badmagic.hb"},
		{"./newer.hb"},
		{"check", "./newer.hb", "--format", "prometheus"},
		{"./checksum.hb"},
		{"./geometry.hb", "--json"},
		{"./truncated.hb"},
		{"reap", "./truncated.hb", "--apply"},
		{"watch", "./truncated.hb"},
		{"./jobs.ring"},
		{"./missing.hb"},
		{"./healthy.hb", "--ring", "./badmagic.hb"},
	}},
	{"usage", [][]string{
		{},
		{"check"},
		{"./healthy.hb", "extra"},
		{"./healthy.hb", "--nope"},
		{"check", "./healthy.hb", "--format", "xml"},
		{"check", "./healthy.hb", "--stale", "-1s"},
		{"check", "./healthy.hb", "--stale"},
		{"watch", "./healthy.hb", "--interval", "0s"},
		{"create", "./new.hb"},
		{"create", "./new.hb", "--capacity", "0"},
		{"create", "./new.hb", "--capacity", "3", "--leases", "2"},
		{"create", "./new.hb", "--capacity", "3"},
		{"./new.hb", "--all"},
		// Flags before and after PATH, "=" values, a ring given twice.
		{"--all", "./healthy.hb", "--stale=1h", "--ring", "./jobs.ring", "--ring=./jobs.ring"},
		{"./healthy.hb", "--help"},
		{"create", "./shared.hb", "--capacity", "2", "--mode", "0640"},
		{"check", "./shared.hb"},
		{"check", "./shared.hb", "--allow-mode", "0640"},
		{"check", "./shared.hb", "--allow-mode", "999"},
		// The one grammar (issue 18): --json before or after PATH, and
		// before the command; flags a command does not have refused, not
		// ignored; flags quoted as typed; bad values said.
		{"check", "--json", "./healthy.hb"},
		{"check", "./healthy.hb", "--json"},
		{"--json", "check", "./healthy.hb"},
		{"check", "./healthy.hb", "--json", "--format", "prometheus"},
		{"reap", "./healthy.hb", "--all"},
		{"watch", "./healthy.hb", "--json"},
		{"./healthy.hb", "-nope"},
		{"check", "./healthy.hb", "--stale", "5"},
		{"create", "./neg.hb", "--capacity", "-8"},
		{"help", "frobnicate"},
		// One wording: a short text file is not a shmkit file, also
		// when its mode is 0644 (the mode is judged only of a file that
		// may be a shmkit file).
		{"./notes.txt"},
		{"./notes-0644.txt"},
		{"check", "./notes-0644.txt", "--json"},
		// `hbdump dump PATH` is `hbdump PATH`; a mistyped command is
		// named as the word taken for PATH.
		{"dump", "./healthy.hb"},
		{"dump", "--json", "./healthy.hb", "--all"},
		{"dump"},
		{"dmp", "./healthy.hb"},
	}},
}

func TestGolden(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.fixture, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			copyFixture(t, dir, ringFixture)
			switch gc.fixture {
			case "damaged":
				for _, f := range fixtures {
					if f.damage != nil {
						copyFixture(t, dir, f.name)
					}
				}
				copyFixture(t, dir, "healthy.hb")
			case "usage":
				copyFixture(t, dir, "healthy.hb")
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "notes-0644.txt"), []byte("hello\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(dir, "notes-0644.txt"), 0o644); err != nil { // whatever the umask
					t.Fatal(err)
				}
			case "deque.hb":
				copyFixture(t, dir, dequeFixture)
				copyFixture(t, dir, gc.fixture)
			default:
				copyFixture(t, dir, gc.fixture)
			}
			keepBeating(t, dir)
			var b strings.Builder
			for _, args := range gc.runs {
				refreshBeats(t, dir)
				res := runHbdump(t, dir, args...)
				fmt.Fprintf(&b, "$ hbdump %s\n[exit %d]\n", strings.Join(args, " "), res.code)
				if res.stdout != "" {
					b.WriteString(normalise(t, res.stdout))
				}
				if res.stderr != "" {
					b.WriteString("[stderr]\n" + normalise(t, res.stderr))
				}
				b.WriteString("\n")
			}
			name := strings.TrimSuffix(gc.fixture, ".hb")
			compareGolden(t, filepath.Join("testdata", name+".golden"), b.String())
		})
	}
}

// keepBeating refreshes the live slots' beats every 100 ms until the test
// ends, as their members would: on a loaded machine the time between one
// refresh and hbdump's reading of the table (a process start) can pass
// hbdump's default --stale, and a fresh participant would be reported
// stale.
func keepBeating(t *testing.T, dir string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				refreshBeats(t, dir)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// refreshBeats sets the beats of the fixtures' live slots again, so a
// slow run cannot turn a fresh participant stale halfway through a case.
// It reports with t.Error, as keepBeating calls it from its own goroutine.
func refreshBeats(t *testing.T, dir string) {
	for _, f := range fixtures {
		if f.damage != nil {
			continue
		}
		path := filepath.Join(dir, f.name)
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Error(err)
			return
		}
		hdr := make([]byte, layout.HeaderSize)
		if _, err := file.ReadAt(hdr, 0); err != nil {
			t.Error(err)
			return
		}
		sl := slotLayout(t, hdr)
		now := shm.MonoNow()
		for i, s := range f.slots {
			if s.who.holdsLock() {
				beat := binary.LittleEndian.AppendUint64(nil, uint64(max(now-int64(s.beatAgo), 1)))
				if _, err := file.WriteAt(beat, int64(sl.slot(i)+layout.HBSlotBeat)); err != nil {
					t.Error(err)
					return
				}
			}
		}
		file.Close()
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
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
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got: %q\nwant: %q\n\nwhole output:\n%s", path, i+1, g, w, got)
		}
	}
}

// Masking what differs between runs: the test's pid and start time (slots
// naming the test process are rewritten for each run), wall-clock times,
// beat ages and lease hold times.
var (
	reBackup     = regexp.MustCompile(`\.bak-\d{8}T\d{6}Z-[0-9a-f]{16}`)
	reTime       = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	rePIDJSON    = regexp.MustCompile(`("pid": )(\d+)`)
	rePIDText    = regexp.MustCompile(`(pid[ =]"?)(\d+)`)
	reStart      = regexp.MustCompile(`("start_ticks": |\(start )(\d+)`)
	rePidNS      = regexp.MustCompile(`("pid_ns": )(\d+)`)
	reAgeJSON    = regexp.MustCompile(`("(?:beat_age|held)_seconds": )([0-9.e+-]+)`)
	reAgeProm    = regexp.MustCompile(`(?m)^(shmkit_heartbeat_beat_age_seconds\{.*\}) \S+$`)
	reAgeText    = regexp.MustCompile(`no beat for [0-9.]+[a-z]+(\d\d[a-z]+)?`)
	reTableStart = regexp.MustCompile(`^[┌│├└]`)
)

func normalise(t testing.TB, s string) string {
	self := selfID(t)
	pid := strconv.Itoa(int(self.PID))
	ns := strconv.FormatUint(shm.PidNamespace(), 10)
	starts := map[string]string{
		strconv.FormatUint(self.Start, 10):                "$START",
		strconv.FormatUint(self.Start+recycledOffset, 10): "$WRONGSTART",
	}
	sub := func(re *regexp.Regexp, s string, repl func(prefix, v string) string) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			g := re.FindStringSubmatch(m)
			return repl(g[1], g[2])
		})
	}
	token := func(s string) string {
		s = reBackup.ReplaceAllString(s, ".bak-$$STAMP-$$RANDOM")
		s = reTime.ReplaceAllString(s, "$$TIME")
		s = sub(rePIDJSON, s, func(p, v string) string {
			if v == pid {
				return p + "$PID"
			}
			return p + v
		})
		s = sub(rePIDText, s, func(p, v string) string {
			if v == pid {
				return p + "$PID"
			}
			return p + v
		})
		s = sub(rePidNS, s, func(p, v string) string {
			if v == ns {
				return p + "$PIDNS"
			}
			return p + v
		})
		s = sub(reStart, s, func(p, v string) string {
			if r, ok := starts[v]; ok {
				return p + r
			}
			return p + v
		})
		s = sub(reAgeJSON, s, func(p, v string) string {
			if v == "0" {
				return p + v
			}
			return p + `"$AGE"`
		})
		s = reAgeProm.ReplaceAllString(s, `$1 $$AGE`)
		s = reAgeText.ReplaceAllString(s, `no beat for $$AGE`)
		return s
	}
	// Tables: parse, mask cells by column, render again (column widths
	// follow the masked values).
	lines := strings.SplitAfter(s, "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		if !reTableStart.MatchString(lines[i]) {
			out.WriteString(token(lines[i]))
			i++
			continue
		}
		var header []string
		var rows [][]string
		for ; i < len(lines) && reTableStart.MatchString(lines[i]); i++ {
			if strings.HasPrefix(lines[i], "└") {
				i++
				break
			}
			if !strings.HasPrefix(lines[i], "│") {
				continue
			}
			cells := strings.Split(strings.TrimSpace(lines[i]), "│")
			cells = cells[1 : len(cells)-1]
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			if header == nil {
				header = cells
				continue
			}
			for j, h := range header {
				if j >= len(cells) || cells[j] == "" {
					continue
				}
				switch h {
				case "PID":
					if cells[j] == pid {
						cells[j] = "$PID"
					}
				case "BEAT AGE":
					cells[j] = "$AGE"
				default:
					cells[j] = token(cells[j])
				}
			}
			rows = append(rows, cells)
		}
		if err := cliutil.Table(&out, header, rows); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}
