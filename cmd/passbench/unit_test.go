package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func TestMessageChecks(t *testing.T) {
	m := newMsg(64, 3)
	stamp(m, 42, 12345)
	h, err := parseMsg(m, 64)
	if err != nil || h.producer != 3 || h.seq != 42 || h.sent != 12345 || h.isEnd() {
		t.Fatalf("parse = %+v, %v", h, err)
	}
	// Every single-bit flip anywhere is caught.
	for i := range m {
		for bit := range 8 {
			m[i] ^= 1 << bit
			if _, err := parseMsg(m, 64); err == nil {
				t.Errorf("flip of byte %d bit %d not detected", i, bit)
			}
			m[i] ^= 1 << bit
		}
	}
	if _, err := parseMsg(m[:63], 64); err == nil {
		t.Error("short message accepted")
	}
	if h, err := parseMsg(endMsg(64), 64); err != nil || !h.isEnd() {
		t.Errorf("end marker: %+v, %v", h, err)
	}
}

func TestSeenUnion(t *testing.T) {
	a, b := newSeenSet(2, nil), newSeenSet(2, nil)
	for seq := range uint64(100) {
		if seq%2 == 0 {
			a.add(0, seq)
		} else {
			b.add(0, seq)
		}
	}
	a.add(0, 10)  // the same consumer twice: one bit
	b.add(0, 10)  // another consumer: a duplicate
	b.add(0, 500) // never sent
	a.add(1, 0)
	if a.add(2, 0) || a.add(0, maxSeq) {
		t.Error("out-of-range pair accepted")
	}
	// Through the wire format, as the parent sees them.
	var sets []*seenSet
	for _, s := range []*seenSet{a, b} {
		enc, err := s.encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeSeen(enc)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, d)
	}
	distinct, extra := union(sets, []int64{100, 3})
	if distinct != 101 || extra != 1 {
		t.Errorf("distinct %d, extra %d; want 101, 1", distinct, extra)
	}
	counted := newSeenSet(1, []int64{70})
	if !counted.add(0, 69) || counted.add(0, 70) {
		t.Error("counted set: bounds wrong")
	}
}

func TestTally(t *testing.T) {
	prod := []*report{{Role: roleProducer, ID: 0, Sent: 4, First: 100, Last: 200}}
	seen := newSeenSet(1, []int64{4})
	rec := newRecorder()
	for _, s := range []uint64{0, 1, 1, 3} {
		seen.add(0, s)
		rec.record(50)
	}
	cons := []*report{{Role: roleConsumer, Received: 4, Corrupt: 2, First: 150, Last: 1_000_000_100, seen: seen, rec: rec}}
	r := tally(prod, cons)
	if r.Messages != 4 || r.Lost != 1 || r.Duplicated != 1 || r.Corrupt != 2 || r.Seconds != 1 || r.MsgsPerSec != 3 {
		t.Errorf("tally = %+v", r)
	}
}

func TestPlotSynthetic(t *testing.T) {
	a, b := hdrhistogram.New(1, histMax, 3), hdrhistogram.New(1, histMax, 3)
	for i := range int64(5000) {
		a.RecordValue(200 + i%300)
		b.RecordValue(2000 + i*i%100000)
	}
	runs := []*Result{{Transport: "spin", Hist: a}, {Transport: "ring", Mode: modePoll, Hist: b}, {Transport: "uds"}}
	dir := t.TempDir()
	for _, name := range []string{"p.svg", "p.png"} {
		path := filepath.Join(dir, name)
		if err := writePlot(path, []plotPanel{{title: "one", runs: runs}, {title: "two", runs: runs[:1]}}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v", name, fi, err)
		}
	}
	if err := writePlot(filepath.Join(dir, "empty.svg"), []plotPanel{{title: "none", runs: runs[2:]}}); err == nil {
		t.Error("empty plot: no error")
	}
}

func TestMicros(t *testing.T) {
	for ns, want := range map[float64]string{
		273:     "0.273",
		999:     "0.999",
		2540:    "2.54",
		56400:   "56.4",
		3335000: "3335",
	} {
		if got := micros(ns); got != want {
			t.Errorf("micros(%v) = %q, want %q", ns, got, want)
		}
	}
}

func TestCPUModel(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	x86 := write("x86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n")
	if got := cpuModel(x86); got != "AMD EPYC 7B13" {
		t.Errorf("x86: %q", got)
	}
	arm := write("arm", "processor\t: 0\nBogoMIPS\t: 50.00\nHardware\t: BCM2835\n")
	if got := cpuModel(arm); got != "BCM2835" {
		t.Errorf("arm: %q", got)
	}
	if got := cpuModel(filepath.Join(dir, "missing")); got != "unknown" {
		t.Errorf("missing: %q", got)
	}
}

// A kill plan is a function of its seed, and its moments fall between 5 %
// and 60 % of the run.
func TestChaosPlan(t *testing.T) {
	a := newChaosPlan(20, 42, roleConsumer, 100000, 0, nil, nil)
	b := newChaosPlan(20, 42, roleConsumer, 100000, 0, nil, nil)
	c := newChaosPlan(20, 43, roleConsumer, 100000, 0, nil, nil)
	if !slices.Equal(a.at, b.at) || slices.Equal(a.at, c.at) {
		t.Errorf("plans: %v, %v, %v", a.at, b.at, c.at)
	}
	for _, at := range a.at {
		if at < 5000 || at > 60000 {
			t.Errorf("kill at %d of 100000", at)
		}
	}
	timed := newChaosPlan(5, 1, roleConsumer, 0, time.Second, nil, nil)
	for _, at := range timed.at {
		if !timed.timed || at < int64(50*time.Millisecond) || at > int64(600*time.Millisecond) {
			t.Errorf("kill at %v of 1s", time.Duration(at))
		}
	}
}

func TestSharedSeen(t *testing.T) {
	s, err := newSharedSeen([]uint64{100, 0, 70})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, m := range []struct {
		p         uint32
		seq       uint64
		ok, again bool
	}{{0, 5, true, false}, {0, 5, true, true}, {0, 99, true, false}, {0, 100, false, false},
		{1, 0, false, false}, {2, 69, true, false}, {3, 0, false, false}} {
		ok, again := s.mark(m.p, m.seq)
		if ok != m.ok || again != m.again {
			t.Errorf("mark(%d, %d) = %v, %v; want %v, %v", m.p, m.seq, ok, again, m.ok, m.again)
		}
	}
	// Producer 2 says it sent 60: sequence 69 is beyond.
	if d, x := s.distinct([]int64{100, 0, 60}); d != 2 || x != 1 {
		t.Errorf("distinct %d, extra %d; want 2, 1", d, x)
	}
}
