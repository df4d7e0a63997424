package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The /proc/stat parser reads the aggregate line only, counts user, nice,
// system, irq and softirq as busy (not steal, and not guest twice), and
// refuses a line it cannot read rather than guessing.
func TestProcStatParserReadsTheAggregateCPULine(t *testing.T) {
	for _, c := range []struct {
		file      string
		busy      uint64
		idle      uint64
		wantErr   bool
		errNoLine bool
	}{
		{file: "two-cpus.txt", busy: 10132153 + 290696 + 3084719 + 0 + 25195, idle: 46828483 + 16683},
		{file: "old-kernel.txt", busy: 100 + 20 + 30 + 6 + 7, idle: 4050}, // no steal or guest fields: still enough
		{file: "short-line.txt", wantErr: true},
		{file: "no-aggregate.txt", wantErr: true, errNoLine: true},
		{file: "bad-number.txt", wantErr: true},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "procstat", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := parseProcStat(f)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if c.errNoLine && !errors.Is(err, errNoCPULine) {
				t.Errorf("err = %v, want errNoCPULine", err)
			}
			if err == nil && (got.Busy != c.busy || got.Idle != c.idle) {
				t.Errorf("got %+v, want busy %d idle %d", got, c.busy, c.idle)
			}
		})
	}
}

// The machine's own /proc/stat parses.
func TestProcStatOfThisMachineParses(t *testing.T) {
	s := sampleCPU()
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.ticks.Busy == 0 || s.ticks.Idle == 0 || s.own <= 0 {
		t.Errorf("sample %+v", s)
	}
}

// Others' time is the machine's busy time less passbench's own; a run is
// disturbed only above both the share and the floor.
func TestOthersCPUTimeAndTheDisturbedVerdict(t *testing.T) {
	at := time.Unix(1000, 0)
	sample := func(busyTicks uint64, own time.Duration, after time.Duration) cpuSample {
		return cpuSample{ticks: cpuTicks{Busy: busyTicks}, own: own, at: at.Add(after)}
	}
	for _, c := range []struct {
		name      string
		a, b      cpuSample
		others    float64
		disturbed bool
		errText   bool
	}{
		{name: "quiet", a: sample(0, 0, 0), b: sample(1000, 10*time.Second, 10*time.Second), others: 0},
		{name: "own time above busy never goes negative", a: sample(0, 0, 0), b: sample(900, 10*time.Second, 10*time.Second), others: 0},
		{name: "a daemon under the floor", a: sample(0, 0, 0), b: sample(1020, 10*time.Second, 2*time.Second), others: 0.2},
		{name: "busy under the share", a: sample(0, 0, 0), b: sample(1030, 10*time.Second, 100*time.Second), others: 0.3},
		{name: "busy over both", a: sample(0, 0, 0), b: sample(1500, 10*time.Second, 10*time.Second), others: 5, disturbed: true},
		{name: "unreadable", a: cpuSample{err: errors.New("no /proc")}, b: sample(1, 0, time.Second), errText: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := cpuUseBetween(c.a, c.b, 2)
			if c.errText {
				if u.Error == "" || u.Disturbed {
					t.Errorf("use %+v, want an error and no verdict", u)
				}
				return
			}
			if d := u.OthersSeconds - c.others; d > 1e-9 || d < -1e-9 {
				t.Errorf("others %.3f s, want %.3f", u.OthersSeconds, c.others)
			}
			if u.Disturbed != c.disturbed {
				t.Errorf("disturbed = %v, want %v (%+v)", u.Disturbed, c.disturbed, u)
			}
			if (u.Disturbed) != (len(u.describe()) > 7 && u.describe()[:7] == "WARNING") {
				t.Errorf("describe() = %q", u.describe())
			}
		})
	}
}
