package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary double as the peer: measureRTT re-executes
// os.Executable(), which in a test is this binary.
func TestMain(m *testing.M) {
	if isPeer() {
		os.Exit(peerMain())
	}
	os.Exit(m.Run())
}

const tinyRounds = 200

func tinyOptions() Options {
	return Options{Rounds: tinyRounds, Warmup: 20, Timeout: time.Minute}
}

// leftovers lists this process's passbench files in /dev/shm.
func leftovers(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("/dev/shm/passbench-" + strconv.Itoa(os.Getpid()) + "-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func checkResult(t *testing.T, r Result, transport string, rounds int64) {
	t.Helper()
	if r.Transport != transport {
		t.Errorf("transport = %q, want %q", r.Transport, transport)
	}
	if r.Hist == nil {
		t.Fatalf("%s: no histogram", transport)
	}
	if got := r.Hist.TotalCount(); got != rounds {
		t.Errorf("%s: histogram holds %d rounds, want exactly %d", transport, got, rounds)
	}
	if r.Rounds != rounds {
		t.Errorf("%s: Rounds = %d, want %d", transport, r.Rounds, rounds)
	}
	if r.Min <= 0 {
		t.Errorf("%s: min %d ns is not positive", transport, r.Min)
	}
	order := []struct {
		name string
		v    int64
	}{{"min", r.Min}, {"p50", r.P50}, {"p90", r.P90}, {"p99", r.P99}, {"p99.9", r.P999}, {"max", r.Max}}
	for i := 1; i < len(order); i++ {
		if order[i-1].v > order[i].v {
			t.Errorf("%s: %s %d ns > %s %d ns", transport, order[i-1].name, order[i-1].v, order[i].name, order[i].v)
		}
	}
	if r.Mean < float64(r.Min) || r.Mean > float64(r.Max) {
		t.Errorf("%s: mean %.1f outside [%d, %d]", transport, r.Mean, r.Min, r.Max)
	}
}

func TestFloors(t *testing.T) {
	results, err := runFloors(t.Context(), tinyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("got %d results, want spin and futex", len(results))
	}
	checkResult(t, results[0], "spin", tinyRounds)
	checkResult(t, results[1], "futex", tinyRounds)
	if l := leftovers(t); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}

	var table bytes.Buffer
	if err := writeTable(&table, newReport(results)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"machine:", "kernel:", "transport", "p99.9 µs", "spin", "futex", "200"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestRTTCommandJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"passbench", "rtt", "--transport", "futex", "--rounds", strconv.Itoa(tinyRounds), "--warmup", "10", "--json"}
	if err := newApp(&out, &errOut).RunContext(t.Context(), args); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if rep.Format != ReportFormat {
		t.Errorf("format = %q", rep.Format)
	}
	if rep.Machine.NProc < 1 || rep.Machine.Kernel == "" || rep.Machine.CPUModel == "" {
		t.Errorf("machine = %+v", rep.Machine)
	}
	if _, err := time.Parse(time.RFC3339, rep.Date); err != nil {
		t.Errorf("date: %v", err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("got %d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	r.Hist = nil
	if r.Transport != "futex" || r.Rounds != tinyRounds || r.Warmup != 10 {
		t.Errorf("result = %+v", r)
	}
	if !(0 < r.P50 && r.P50 <= r.P99 && r.P99 <= r.Max) {
		t.Errorf("percentiles out of order: %+v", r)
	}

	// The key names are the stable interface.
	var raw map[string]any
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	first := raw["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"transport", "rounds", "warmup", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "min_ns", "max_ns", "mean_ns"} {
		if _, ok := first[k]; !ok {
			t.Errorf("result lacks %q: %v", k, first)
		}
	}
	for _, k := range []string{"format", "date", "machine", "clock_read_ns", "results"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
}

func TestDefaultActionTable(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"passbench", "--rounds", "50", "--warmup", "5"}
	if err := newApp(&out, &errOut).RunContext(t.Context(), args); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"spin", "futex", "p50 µs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"passbench", "rtt", "--transport", "carrier-pigeon"},
		{"passbench", "rtt", "--transport", "spin", "--rounds", "-1"},
		{"passbench", "rtt", "--transport", "spin", "--timeout", "0s"},
	} {
		var out, errOut bytes.Buffer
		if err := newApp(&out, &errOut).RunContext(t.Context(), args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// A run that cannot finish must end at its deadline or on cancellation, with
// the peer reaped and nothing left in /dev/shm.
func TestAbortPaths(t *testing.T) {
	huge := Options{Rounds: maxRounds / 2, Timeout: time.Minute}
	for _, tr := range transports {
		t.Run(tr.Name+"/cancel", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err := measureRTT(ctx, tr, huge)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the context's deadline", err)
			}
			if l := leftovers(t); len(l) != 0 {
				t.Errorf("left behind: %v", l)
			}
		})
		t.Run(tr.Name+"/timeout", func(t *testing.T) {
			o := huge
			o.Timeout = 500 * time.Millisecond
			_, err := measureRTT(t.Context(), tr, o)
			if err == nil || !strings.Contains(err.Error(), "timed out") {
				t.Errorf("err = %v, want a time-out", err)
			}
			if l := leftovers(t); len(l) != 0 {
				t.Errorf("left behind: %v", l)
			}
		})
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
