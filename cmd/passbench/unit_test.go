package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
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
		var note bytes.Buffer
		if err := writePlot(path, []plotPanel{{title: "one", runs: runs}, {title: "two", runs: runs[:1]}}, &note); err != nil {
			t.Fatal(err)
		}
		if want := "passbench: plot written to " + path + " (2 panels)\n"; note.String() != want {
			t.Errorf("note %q, want %q", note.String(), want)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v", name, fi, err)
		}
	}
	if err := writePlot(filepath.Join(dir, "empty.svg"), []plotPanel{{title: "none", runs: runs[2:]}}, io.Discard); err == nil {
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

// The shared latency histograms bucket as newRecorder's HDR histogram
// does: rebuilt in the parent, they give the same counts, and so the same
// percentiles, as the values recorded directly; and a replacement that
// takes over a slot carries on from what its victim recorded.
func TestSharedLatencyMatchesRecorder(t *testing.T) {
	l := &sharedLatency{slots: 2, words: make([]uint64, 2*latSlotWords)}
	want := newRecorder()
	rng := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	for _, v := range []int64{-5, 0, 1, 2, 2047, 2048, 2049, 4095, 4096, 1 << 20, histMax - 1, histMax, histMax + 1, math.MaxInt64} {
		vals = append(vals, v)
	}
	for range 20000 {
		vals = append(vals, int64(math.Exp(rng.Float64()*math.Log(float64(histMax))))) // log-uniform over the range
	}
	var writers [2]*latWriter
	for i, v := range vals {
		slot := i % 2
		if i%5000 < 2 { // the first writer, or a replacement taking the slot over
			w, err := l.writer(slot)
			if err != nil {
				t.Fatal(err)
			}
			writers[slot] = w
		}
		writers[slot].record(v)
		want.record(v)
	}
	if n := len(want.h.Export().Counts); latCounts > n {
		t.Fatalf("%d shared counts, the histogram has %d", latCounts, n)
	}
	got := l.recorder()
	if !slices.Equal(got.h.Export().Counts, want.h.Export().Counts) {
		t.Error("rebuilt histogram's counts differ from the recorder's")
	}
	if got.min != want.min || got.max != want.max || got.sum != want.sum || got.h.TotalCount() != int64(len(vals)) {
		t.Errorf("min %d max %d sum %g count %d; want %d %d %g %d",
			got.min, got.max, got.sum, got.h.TotalCount(), want.min, want.max, want.sum, len(vals))
	}
	var a, b Result
	got.fill(&a)
	want.fill(&b)
	if a.Latency != b.Latency {
		t.Errorf("latency %+v, want %+v", a.Latency, b.Latency)
	}
	if a := testing.AllocsPerRun(1000, func() { writers[0].record(12345) }); a != 0 {
		t.Errorf("%v allocations per latency recorded", a)
	}
	if _, err := l.writer(2); err == nil {
		t.Error("a slot beyond the file was handed out")
	}
	empty := (&sharedLatency{slots: 1, words: make([]uint64, latSlotWords)}).recorder()
	var r Result
	empty.fill(&r)
	if empty.h.TotalCount() != 0 || r.Latency != (Latency{}) {
		t.Errorf("nothing recorded, yet %d values, %+v", empty.h.TotalCount(), r.Latency)
	}
}

// A gated producer may send below the gate, or anything once it is 0;
// it waits at the gate until the gate moves, and gives up if its context
// ends.
func TestAwaitGate(t *testing.T) {
	var gate atomic.Uint32
	if err := awaitGate(t.Context(), &gate, 1<<40); err != nil {
		t.Errorf("open gate: %v", err)
	}
	gate.Store(10)
	if err := awaitGate(t.Context(), &gate, 9); err != nil {
		t.Errorf("below the gate: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := awaitGate(ctx, &gate, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("at the gate, cancelled: %v", err)
	}
	released := make(chan error)
	go func() { released <- awaitGate(t.Context(), &gate, 10) }()
	gate.Store(11)
	shm.FutexWake(&gate, -1)
	if err := <-released; err != nil {
		t.Errorf("after the gate moved: %v", err)
	}
}

// The default pass payload is the most a 64-byte slot carries under wire
// version 2's header: one byte more takes a 128-byte slot.
func TestPassPayloadFitsOneSlot(t *testing.T) {
	if got := pass.MaxArgs(56); got != defaultPassPayload {
		t.Errorf("a 64-byte slot (56 payload bytes) carries %d argument bytes, the default payload is %d", got, defaultPassPayload)
	}
	if s := transport.SlotSizeFor(defaultPassPayload + passSubmitHeader); s != 64 {
		t.Errorf("the default payload takes %d-byte slots", s)
	}
	if s := transport.SlotSizeFor(defaultPassPayload + 1 + passSubmitHeader); s != 128 {
		t.Errorf("one byte more takes %d-byte slots", s)
	}
	if passResultHeader > passSubmitHeader {
		t.Errorf("a result header (%d) larger than a submit header (%d): reply slots sized like submit slots would not hold the echo", passResultHeader, passSubmitHeader)
	}
}

// tallyPass: a row per submitter, by id, each measured on its own, and
// totals that add up: passes, resolved, lost, duplicated, corrupt, every
// latency, and the interval from the first Submit to the last result.
func TestTallyPass(t *testing.T) {
	sub := func(id int, sent, ok, bad, dup int64, first, last int64, lats ...int64) *report {
		r := newRecorder()
		for _, l := range lats {
			r.record(l)
		}
		rep := &report{Role: roleSubmitter, ID: id, Sent: sent, Received: ok, Corrupt: bad, Duplicated: dup, First: first, Last: last, rec: r}
		if bad > 0 {
			rep.Why = "pass 7: checksum mismatch"
		}
		// Through the wire, as the parent gets it.
		if err := rep.toWire(); err != nil {
			t.Fatal(err)
		}
		rep.rec = nil
		if err := rep.fromWire(); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	subs := []*report{ // out of order: the rows come by id
		sub(2, 3, 2, 1, 0, 2e9, 3e9, 300, 300),
		sub(0, 4, 4, 0, 1, 1e9, 2e9, 100, 100, 100, 100),
		sub(1, 2, 2, 0, 0, 1.5e9, 2.5e9, 200, 200),
	}
	res, per := tallyPass(subs)
	if len(per) != 3 || per[0].ID != 0 || per[1].ID != 1 || per[2].ID != 2 {
		t.Fatalf("rows %+v", per)
	}
	if p := per[2]; p.Messages != 3 || p.Resolved != 2 || p.Lost != 1 || p.Corrupt != 1 || p.Seconds != 1 || p.MsgsPerSec != 2 || p.Latency.P50 != 300 {
		t.Errorf("submitter 2: %+v", p)
	}
	if p := per[0]; p.Duplicated != 1 || p.Lost != 0 || p.MsgsPerSec != 4 || p.Latency.Max != 100 {
		t.Errorf("submitter 0: %+v", p)
	}
	if res.Messages != 9 || res.Lost != 1 || res.Corrupt != 1 || res.Duplicated != 1 || res.Seconds != 2 || res.MsgsPerSec != 4 {
		t.Errorf("totals: %+v", res)
	}
	if n := res.Hist.TotalCount(); n != 8 || res.Latency.Min != 100 || res.Latency.Max != 300 {
		t.Errorf("%d latencies, %+v", n, res.Latency)
	}
	if err := failure(&res); err == nil || !strings.Contains(err.Error(), "submitter 2: pass 7: checksum mismatch") {
		t.Errorf("failure = %v", err)
	}
}
