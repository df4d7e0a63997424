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

	"github.com/shmkit/shmkit/internal/cliutil"
)

// Short runs with real processes. Never assert speed: these machines are
// shared, and the race detector slows everything.

const (
	testMsgs   = 2000
	testRounds = 200
)

// leftovers lists this process's passbench files in /dev/shm.
func leftovers(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("/dev/shm/passbench-" + strconv.Itoa(os.Getpid()) + "-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func checkNoLeftovers(t *testing.T) {
	t.Helper()
	if l := leftovers(t); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
}

// checkLatency checks a distribution's shape: ordered, positive, and
// holding exactly n values.
func checkLatency(t *testing.T, r *Result, n int64) {
	t.Helper()
	if r.Hist == nil || r.Hist.TotalCount() != n {
		t.Fatalf("%s: histogram holds %v values, want %d", r.name(), r.Hist.TotalCount(), n)
	}
	l := r.Latency
	order := []int64{l.Min, l.P50, l.P90, l.P99, l.P999, l.Max}
	if l.Min <= 0 {
		t.Errorf("%s: min %d ns is not positive", r.name(), l.Min)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] > order[i] {
			t.Errorf("%s: percentiles out of order: %+v", r.name(), l)
		}
	}
	if l.Mean < float64(l.Min) || l.Mean > float64(l.Max) {
		t.Errorf("%s: mean %.1f outside [%d, %d]", r.name(), l.Mean, l.Min, l.Max)
	}
}

func testRunSpec(transport, mode string) runSpec {
	return runSpec{Transport: transport, Mode: mode, Producers: 2, Consumers: 2, Messages: testMsgs,
		Payload: defaultPayload, Capacity: 64, Timeout: time.Minute}
}

// TestRunEachTransport runs every transport and mode of the comparison
// with two producers and two consumers (one producer for the deque, whose
// owner is its only producer).
func TestRunEachTransport(t *testing.T) {
	done := map[[2]string]bool{}
	for _, tm := range compareThroughput {
		if done[[2]string{tm.Transport, tm.Mode}] {
			continue
		}
		done[[2]string{tm.Transport, tm.Mode}] = true
		t.Run(tm.Transport+"/"+tm.Mode, func(t *testing.T) {
			s := testRunSpec(tm.Transport, tm.Mode)
			if tm.Transport == "deque" {
				s.Producers = 1
			}
			r, err := runThroughput(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != 0 {
				t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d; want all 0", r.Lost, r.Corrupt, r.Duplicated, r.Killed)
			}
			if err := failure(&r); err != nil {
				t.Error(err)
			}
			if r.Kind != kindThroughput || r.Transport != tm.Transport || r.Mode != tm.Mode || r.Producers != s.Producers || r.Consumers != 2 || r.Messages != testMsgs {
				t.Errorf("result = %+v", r)
			}
			if r.Seconds <= 0 || r.MsgsPerSec <= 0 {
				t.Errorf("seconds %v, msgs/s %v", r.Seconds, r.MsgsPerSec)
			}
			checkLatency(t, &r, testMsgs)
			if (tm.Transport == "ring") != (r.Ring != nil) {
				t.Errorf("ring stats = %+v", r.Ring)
			}
			if (tm.Transport == "deque") != (r.Deque != nil) {
				t.Errorf("deque stats = %+v", r.Deque)
			}
			if d := r.Deque; d != nil && d.Stolen != testMsgs+2 {
				t.Errorf("deque: %d stolen, want %d messages and 2 end markers", d.Stolen, testMsgs)
			}
			checkNoLeftovers(t)
		})
	}
}

func TestTimedRun(t *testing.T) {
	s := testRunSpec("uds", "")
	s.Messages, s.Duration = 0, 200*time.Millisecond
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages <= 0 || r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 {
		t.Errorf("messages %d, lost %d, corrupt %d, duplicated %d", r.Messages, r.Lost, r.Corrupt, r.Duplicated)
	}
	checkLatency(t, &r, r.Messages)
}

// A producer damages one message after sealing it; a consumer must catch
// it, count it as corrupt, and the message counts as lost too.
func TestCorruptMessageDetected(t *testing.T) {
	for _, tr := range []string{"ring", "chan"} {
		t.Run(tr, func(t *testing.T) {
			s := testRunSpec(tr, "")
			s.corrupt = &corruptAt{Producer: 1, Seq: 700}
			r, err := runThroughput(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Corrupt != 1 || r.Lost != 1 || r.Duplicated != 0 {
				t.Errorf("corrupt %d, lost %d, duplicated %d; want 1, 1, 0", r.Corrupt, r.Lost, r.Duplicated)
			}
			err = failure(&r)
			if err == nil || !strings.Contains(err.Error(), "1 corrupt") || !strings.Contains(err.Error(), "checksum") || cliutil.Code(err) != 1 {
				t.Errorf("failure = %v", err)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	s := testRunSpec("pipe", "")
	s.Record = dir
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost != 0 || r.Corrupt != 0 {
		t.Fatalf("lost %d, corrupt %d", r.Lost, r.Corrupt)
	}
	got := map[[2]int]int{}
	lines := 0
	for c := range s.Consumers {
		b, err := os.ReadFile(filepath.Join(dir, "consumer-"+strconv.Itoa(c)+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line == "" {
				continue
			}
			var p, seq int
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("bad line %q", line)
			}
			p, err1 := strconv.Atoi(f[0])
			seq, err2 := strconv.Atoi(f[1])
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", line)
			}
			got[[2]int{p, seq}]++
			lines++
		}
	}
	if lines != testMsgs {
		t.Errorf("%d lines, want %d", lines, testMsgs)
	}
	for p := range s.Producers {
		for seq := range testMsgs / s.Producers {
			if n := got[[2]int{p, seq}]; n != 1 {
				t.Errorf("producer %d seq %d recorded %d times", p, seq, n)
			}
		}
	}
}

func TestRTTEachTransport(t *testing.T) {
	for _, tm := range compareRTT {
		t.Run(tm[0]+"/"+tm[1], func(t *testing.T) {
			s := rttSpec{Transport: tm[0], Mode: tm[1], Options: Options{Rounds: testRounds, Warmup: 20, Timeout: time.Minute},
				Payload: defaultPayload, Capacity: defaultCapacity}
			r, err := measureRTT(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != kindRTT || r.Transport != tm[0] || r.Mode != tm[1] || r.Messages != testRounds || r.Warmup != 20 {
				t.Errorf("result = %+v", r)
			}
			checkLatency(t, &r, testRounds)
			checkNoLeftovers(t)
		})
	}
}

// runApp runs the command line in-process and returns stdout and the
// exit status main would give.
func runApp(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := newApp(&out, &errOut).RunContext(t.Context(), append([]string{"passbench"}, args...))
	return out.String(), cliutil.Code(err), err
}

// The fields the issue asks for in every run's JSON.
var wantRunFields = []string{"transport", "mode", "producers", "consumers", "payload_bytes", "messages",
	"seconds", "msgs_per_sec", "latency_ns", "lost", "duplicated", "corrupt", "killed"}

func checkRunJSON(t *testing.T, obj map[string]any) {
	t.Helper()
	for _, k := range wantRunFields {
		if _, ok := obj[k]; !ok {
			t.Errorf("run lacks %q: %v", k, obj)
		}
	}
	lat, _ := obj["latency_ns"].(map[string]any)
	for _, k := range []string{"p50", "p99", "p999", "max"} {
		if v, ok := lat[k].(float64); !ok || v <= 0 {
			t.Errorf("latency_ns.%s = %v", k, lat[k])
		}
	}
	for _, k := range []string{"lost", "corrupt"} {
		if obj[k] != 0.0 {
			t.Errorf("%s = %v", k, obj[k])
		}
	}
}

func TestRunCommandJSON(t *testing.T) {
	out, code, err := runApp(t, "run", "--transport", "uds", "--producers", "2", "--consumers", "2",
		"--messages", strconv.Itoa(testMsgs), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRunJSON(t, obj)
	for _, k := range []string{"format", "date", "machine", "clock_read_ns"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("lacks %q", k)
		}
	}
	if obj["transport"] != "uds" || obj["mode"] != modeBlock || obj["messages"] != float64(testMsgs) || obj["kind"] != kindThroughput {
		t.Errorf("got %v", obj)
	}
}

func TestRTTCommandJSONAndPlot(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "rtt.png")
	out, code, err := runApp(t, "rtt", "--transport", "ring", "--mode", "block", "--rounds", strconv.Itoa(testRounds),
		"--warmup", "10", "--json", "--plot", plot)
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRunJSON(t, obj)
	if obj["kind"] != kindRTT || obj["messages"] != float64(testRounds) {
		t.Errorf("got %v", obj)
	}
	checkPicture(t, plot, "\x89PNG")
}

func checkPicture(t *testing.T, path, magic string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 1000 || !strings.HasPrefix(string(b), magic) {
		t.Errorf("%s: %d bytes starting %q", path, len(b), b[:min(len(b), 16)])
	}
}

// The default comparison, scaled down: every run, the goals, the table.
func TestCompare(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "cmp.svg")
	out, code, err := runApp(t, "--messages", strconv.Itoa(testMsgs), "--rounds", "100", "--warmup", "10", "--json", "--plot", plot)
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var raw struct {
		Format string           `json:"format"`
		Runs   []map[string]any `json:"runs"`
		Ratios []map[string]any `json:"ratios"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if raw.Format != compareFormat || len(raw.Runs) != len(compareThroughput)+len(compareRTT) {
		t.Fatalf("format %q, %d runs", raw.Format, len(raw.Runs))
	}
	deques := 0
	for _, r := range raw.Runs {
		checkRunJSON(t, r)
		if r["transport"] == "deque" {
			deques++
			if _, ok := r["deque"].(map[string]any); !ok || r["producers"] != 1.0 {
				t.Errorf("deque run: %v", r)
			}
		}
	}
	if deques != 3 {
		t.Errorf("%d deque runs, want 3", deques)
	}
	goals := 0
	for _, r := range raw.Ratios {
		if _, ok := r["met"]; ok {
			goals++
			if _, ok := r["goal"]; !ok {
				t.Errorf("goal without a goal: %v", r)
			}
		}
	}
	if goals != 4 {
		t.Errorf("%d goals, want 4: %v", goals, raw.Ratios)
	}
	checkPicture(t, plot, "<?xml")

	var rep CompareReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := writeCompareText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"machine:", "ring/poll", "ring/block", "deque/poll", "deque/block", "1×2", "uds", "pipe", "chan", "spin", "futex", "÷ ring/poll", "goals", "goal >= 30"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	checkNoLeftovers(t)
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"--messages", "10", "--duration", "1s"},
		{"--no-such-flag"},
		{"run", "--transport", "carrier-pigeon"},
		{"run", "--transport", "spin"},
		{"run", "--transport", "uds", "--mode", "poll"},
		{"run", "--messages", "10", "--duration", "1s"},
		{"run", "--capacity", "1000"},
		{"run", "--payload", "8"},
		{"run", "--payload", "5000"},
		{"run", "--transport", "pipe", "--slot-size", "128"},
		{"run", "--slot-size", "96"},
		{"run", "--producers", "0"},
		{"run", "--plot", "out.txt"},
		{"run", "extra"},
		{"rtt", "--transport", "chan"},
		{"rtt", "--rounds", "-1"},
		{"rtt", "--transport", "spin", "--timeout", "0s"},
		{"run", "--transport", "uds", "--chaos", "1"},
		{"run", "--transport", "chan", "--lease"},
		{"run", "--transport", "deque", "--producers", "2"},
		{"run", "--transport", "deque", "--capacity", "1000"},
		{"rtt", "--transport", "deque"},
		{"run", "--chaos", "-1"},
		{"run", "--lease", "--record", "dir"},
		{"run", "--seed", "5"},
		{"pass", "--workers", "0"},
		{"pass", "--threads", "0"},
		{"pass", "--submitters", "-1"},
		{"pass", "--submitters", "0", "--inflight", "2000"},
		{"pass", "--passes", "10", "--duration", "1s"},
		{"pass", "--capacity", "1000"},
		{"pass", "--payload", "20"},
		{"pass", "--inflight", "-1"},
		{"pass", "--seed", "1"},
		{"pass", "extra"},
	} {
		out, code, err := runApp(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, code, err)
		}
		if out != "" {
			t.Errorf("%v: printed %q", args, out)
		}
	}
}

// A run that cannot finish must end at its deadline or on cancellation,
// with every process reaped and nothing left in /dev/shm.
func TestAbortPaths(t *testing.T) {
	for _, tr := range []string{"ring", "deque", "pipe", "chan"} {
		huge := testRunSpec(tr, "")
		huge.Messages, huge.Duration = 0, time.Hour
		if tr == "deque" {
			huge.Producers = 1
		}
		t.Run(tr+"/cancel", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			_, err := runThroughput(ctx, huge, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the context's deadline", err)
			}
			checkNoLeftovers(t)
		})
		t.Run(tr+"/timeout", func(t *testing.T) {
			s := huge
			s.Timeout = 500 * time.Millisecond
			_, err := runThroughput(t.Context(), s, nil)
			if !errors.Is(err, errTimedOut) {
				t.Errorf("err = %v, want a time-out", err)
			}
			checkNoLeftovers(t)
		})
	}
	hugeRTT := Options{Rounds: maxRounds / 2, Timeout: time.Minute}
	for _, tr := range []string{"ring", "spin", "futex"} {
		t.Run("rtt-"+tr+"/cancel", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err := measureRTT(ctx, rttSpec{Transport: tr, Options: hugeRTT, Payload: defaultPayload, Capacity: defaultCapacity}, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the context's deadline", err)
			}
			checkNoLeftovers(t)
		})
	}
}

// killOne is a chaos agent that kills consumer 0 soon after the start.
type killOne struct {
	done chan struct{}
	did  bool
}

func (k *killOne) start(ctx context.Context, f *fleet) {
	go func() {
		defer close(k.done)
		select {
		case <-time.After(200 * time.Millisecond):
			k.did = f.kill(roleConsumer, 0)
		case <-ctx.Done():
		}
	}()
}

func (k *killOne) finish() error {
	<-k.done
	return nil
}

func (k *killOne) killed() int {
	<-k.done
	if k.did {
		return 1
	}
	return 0
}

// A worker that dies fails the run at once: nothing waits for the timeout.
func TestWorkerDeathFailsRun(t *testing.T) {
	for _, tr := range []string{"ring", "pipe"} {
		t.Run(tr, func(t *testing.T) {
			s := testRunSpec(tr, "")
			s.Messages, s.Duration, s.Timeout = 0, time.Hour, 2*time.Minute
			k := &killOne{done: make(chan struct{})}
			s.chaos = k
			_, err := runThroughput(t.Context(), s, nil)
			if err == nil || errors.Is(err, errTimedOut) || !strings.Contains(err.Error(), "consumer 0") {
				t.Errorf("err = %v, want consumer 0's death", err)
			}
			if k.killed() != 1 {
				t.Error("the consumer was not killed")
			}
			checkNoLeftovers(t)
		})
	}
}

func testPassSpec() passSpec {
	return passSpec{Workers: 2, Threads: 1, Submitters: 2, Passes: testMsgs, Payload: defaultPassPayload,
		Capacity: 64, Timeout: time.Minute}
}

// checkPassClean checks a pass run that nothing disturbed.
func checkPassClean(t *testing.T, r *Result, passes int64) {
	t.Helper()
	if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != 0 {
		t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d; want all 0", r.Lost, r.Corrupt, r.Duplicated, r.Killed)
	}
	if err := failure(r); err != nil {
		t.Error(err)
	}
	if r.Kind != kindPass || r.Transport != "pass" || r.Messages != passes || r.Seconds <= 0 || r.MsgsPerSec <= 0 {
		t.Errorf("result = %+v", r)
	}
	if r.Pass == nil || r.Pass.Executed != uint64(passes) || r.Pass.Failed != 0 || r.Pass.StoppedEarly {
		t.Errorf("pass = %+v", r.Pass)
	}
	checkLatency(t, r, passes)
	checkNoLeftovers(t)
}

func TestPassRoundTrip(t *testing.T) {
	r, err := runPass(t.Context(), testPassSpec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, testMsgs)
	if r.Producers != 2 || r.Consumers != 2 || r.Pass.Workers != 2 || r.Pass.Submitters != 2 {
		t.Errorf("result = %+v, pass = %+v", r, r.Pass)
	}
}

// The parent submits itself: one pass at a time, then a window of 8 for
// a while, with a worker of two threads.
func TestPassParentSubmits(t *testing.T) {
	s := testPassSpec()
	s.Submitters, s.Workers, s.Passes = 0, 1, testRounds
	r, err := runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, testRounds)
	if r.Pass.Inflight != 1 {
		t.Errorf("inflight %d, want the default 1", r.Pass.Inflight)
	}

	s.Passes, s.Duration, s.Inflight, s.Threads = 0, 200*time.Millisecond, 8, 2
	r, err = runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages <= 0 {
		t.Fatalf("no passes in %v", s.Duration)
	}
	checkPassClean(t, &r, r.Messages)
}

// Submitters in a timed run, each with a window.
func TestPassTimedWindow(t *testing.T) {
	s := testPassSpec()
	s.Passes, s.Duration, s.Inflight = 0, 200*time.Millisecond, 4
	r, err := runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages <= 0 {
		t.Fatalf("no passes in %v", s.Duration)
	}
	checkPassClean(t, &r, r.Messages)
}

// A submitter damages one pass: the worker's closure refuses it, the
// parent counts one corrupt and one lost. With a window of one pass, the
// submitter (or the parent) must not wait for that pass's result forever.
func TestPassCorruptDetected(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		submitters, inflight int
	}{{"free", 2, 0}, {"window", 1, 1}, {"parent", 0, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := testPassSpec()
			s.Submitters, s.Inflight, s.Passes = tc.submitters, tc.inflight, 600
			s.corrupt = &corruptAt{Producer: max(0, tc.submitters-1), Seq: 100}
			r, err := runPass(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Corrupt != 1 || r.Lost != 1 || r.Duplicated != 0 || r.Pass.Failed != 1 || r.Messages != 600 {
				t.Errorf("corrupt %d, lost %d, duplicated %d, failed %d, passes %d; want 1, 1, 0, 1, 600",
					r.Corrupt, r.Lost, r.Duplicated, r.Pass.Failed, r.Messages)
			}
			if err := failure(&r); err == nil || !strings.Contains(err.Error(), "checksum") {
				t.Errorf("failure = %v", err)
			}
			checkNoLeftovers(t)
		})
	}
}

func TestPassCommandJSON(t *testing.T) {
	out, code, err := runApp(t, "pass", "--workers", "2", "--passes", strconv.Itoa(testMsgs), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRunJSON(t, obj)
	if obj["kind"] != kindPass || obj["transport"] != "pass" || obj["messages"] != float64(testMsgs) || obj["killed"] != 0.0 {
		t.Errorf("got %v", obj)
	}
	pass, _ := obj["pass"].(map[string]any)
	for _, k := range []string{"workers", "threads", "submitters", "inflight", "slot_bytes", "executed", "requeued"} {
		if _, ok := pass[k]; !ok {
			t.Errorf("pass lacks %q: %v", k, pass)
		}
	}
	if _, ok := obj["chaos"]; ok {
		t.Error("chaos reported without --chaos")
	}
	checkNoLeftovers(t)
}

// checkChaosJSON checks a --chaos run's JSON: nothing lost or corrupt,
// the kills made and reported with the seed.
func checkChaosJSON(t *testing.T, out string, want int, role string) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRunJSON(t, obj)
	if k, _ := obj["killed"].(float64); int(k) != want {
		t.Errorf("killed %v, want %d", obj["killed"], want)
	}
	chaos, _ := obj["chaos"].(map[string]any)
	if _, ok := chaos["seed"].(float64); !ok || chaos["requested"] != float64(want) {
		t.Errorf("chaos = %v", chaos)
	}
	kills, _ := chaos["kills"].([]any)
	if len(kills) != want {
		t.Errorf("kills = %v", kills)
	}
	for _, k := range kills {
		if k, _ := k.(map[string]any); k["role"] != role {
			t.Errorf("killed a %v, want a %s", k["role"], role)
		}
	}
	if r, _ := chaos["reclaimed"].(float64); int(r) > want {
		t.Errorf("reclaimed %v > killed %d", r, want)
	}
	t.Logf("killed %v, duplicated %v, reclaimed %v", obj["killed"], obj["duplicated"], chaos["reclaimed"])
}

// --chaos on run: consumers are killed at moments tied to their progress,
// so a counted run always makes every kill; nothing may be lost. The
// producers wait at each kill point until its kill is made, so every kill
// comes while messages are still to be delivered, however slowly a
// replacement starts; and the latencies are there (checkRunJSON), killed
// consumers' included.
func TestRunChaos(t *testing.T) {
	for _, mode := range []string{modePoll, modeBlock} {
		t.Run(mode, func(t *testing.T) {
			const msgs, producers, kills = 20000, 2, 2
			out, code, err := runApp(t, "run", "--mode", mode, "--producers", strconv.Itoa(producers), "--consumers", "2",
				"--messages", strconv.Itoa(msgs), "--capacity", "256", "--chaos", strconv.Itoa(kills), "--json")
			if code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, out)
			}
			checkChaosJSON(t, out, kills, roleConsumer)
			checkKillsBeforeEnd(t, out, msgs, producers, kills)
			checkNoLeftovers(t)
		})
	}
}

// checkKillsBeforeEnd checks that every kill of a counted chaos run came
// at most chaosLead of the messages after its point (at most 60 %), give
// or take the producers' rounding and a copy per kill: well before the
// last data message.
func checkKillsBeforeEnd(t *testing.T, out string, msgs, producers, kills int64) {
	t.Helper()
	var rep struct {
		Chaos ChaosReport `json:"chaos"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	bound := int64((chaosTo+chaosLead)*float64(msgs)) + producers + kills
	for _, k := range rep.Chaos.Kills {
		if k.Progress > bound || k.Progress >= msgs {
			t.Errorf("killed %s %d at progress %d of %d messages, after the bound %d", k.Role, k.ID, k.Progress, msgs, bound)
		}
	}
}

// A chaos run's latencies come from every consumer, killed or not: one
// sample per message (its first receipt), but for at most one per kill
// (a consumer killed between marking a message and recording its
// latency). With one consumer, the first one killed has received at
// least 5 % of the messages; their latencies once died with it.
func TestChaosLatencyKeepsKilled(t *testing.T) {
	for _, tr := range []string{"ring", "deque"} {
		t.Run(tr, func(t *testing.T) {
			s := testRunSpec(tr, modeBlock)
			s.Consumers, s.Messages, s.Capacity, s.Chaos, s.Seed, s.SeedSet = 1, 20000, 256, 2, 3, true
			if tr == "deque" {
				s.Producers = 1
			}
			r, err := runThroughput(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost != 0 || r.Corrupt != 0 || r.Killed != 2 || r.Chaos == nil || len(r.Chaos.Kills) != 2 {
				t.Fatalf("lost %d, corrupt %d, killed %d, chaos %+v", r.Lost, r.Corrupt, r.Killed, r.Chaos)
			}
			if n := r.Hist.TotalCount(); n < r.Messages-int64(r.Killed) || n > r.Messages {
				t.Errorf("%d latencies for %d messages and %d kills", n, r.Messages, r.Killed)
			}
			checkLatency(t, &r, r.Hist.TotalCount())
			checkResultJSON(t, r)
			checkNoLeftovers(t)
		})
	}
}

// checkResultJSON checks r as `run --json` prints it.
func checkResultJSON(t *testing.T, r Result) {
	t.Helper()
	var buf bytes.Buffer
	if err := writeJSON(&buf, RunReport{Envelope: newEnvelope(runFormat), Result: r}); err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil {
		t.Fatal(err)
	}
	checkRunJSON(t, obj)
}

// killAllWhenDone is a chaos agent that, once the consumers have received
// every message, kills them all: no consumer reports, and every latency
// is in the shared histograms of the killed ones.
type killAllWhenDone struct {
	total int64
	done  chan struct{}
	n     int
}

func (k *killAllWhenDone) start(ctx context.Context, f *fleet) {
	go func() {
		defer close(k.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for f.ctl.progress() < k.total {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		for _, w := range f.list() {
			if w.role == roleConsumer {
				f.killOnPurpose(w)
				k.n++
			}
		}
	}()
}

func (k *killAllWhenDone) finish() error { <-k.done; return nil }
func (k *killAllWhenDone) killed() int   { <-k.done; return k.n }

// Every consumer killed after the last message: the JSON still carries
// the latencies, of every message (latency_ns was all zeros when only
// the consumers that finished reported latencies).
func TestLatencyOfKilledConsumers(t *testing.T) {
	s := testRunSpec("ring", "")
	s.Lease = true
	s.chaos = &killAllWhenDone{total: s.Messages, done: make(chan struct{})}
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != s.Consumers {
		t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d", r.Lost, r.Corrupt, r.Duplicated, r.Killed)
	}
	checkResultJSON(t, r)
	checkLatency(t, &r, s.Messages)
	checkNoLeftovers(t)
}

// A timed chaos run, and leased consumption without kills (no
// duplicates then).
func TestRunLeaseTimed(t *testing.T) {
	s := testRunSpec("ring", "")
	s.Messages, s.Duration, s.Chaos = 0, 300*time.Millisecond, 1
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages <= 0 || r.Lost != 0 || r.Corrupt != 0 || r.Killed != 1 || !r.Lease || r.Chaos == nil {
		t.Errorf("messages %d, lost %d, corrupt %d, killed %d, lease %v, chaos %+v", r.Messages, r.Lost, r.Corrupt, r.Killed, r.Lease, r.Chaos)
	}
	checkNoLeftovers(t)

	s = testRunSpec("ring", modeBlock)
	s.Lease = true
	r, err = runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != 0 || r.Chaos != nil {
		t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d, chaos %+v", r.Lost, r.Corrupt, r.Duplicated, r.Killed, r.Chaos)
	}
	checkLatency(t, &r, testMsgs)
	checkNoLeftovers(t)
}

// A leased consumer catches a damaged message as a popping one does.
func TestLeaseCorruptDetected(t *testing.T) {
	s := testRunSpec("ring", "")
	s.Lease, s.corrupt = true, &corruptAt{Producer: 0, Seq: 100}
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Corrupt != 1 || r.Lost != 1 || r.Duplicated != 0 {
		t.Errorf("corrupt %d, lost %d, duplicated %d; want 1, 1, 0", r.Corrupt, r.Lost, r.Duplicated)
	}
}

// --chaos on pass: workers are killed; the parent's watchdog requeues
// their passes. Results may come twice, none may be missing.
func TestPassChaos(t *testing.T) {
	out, code, err := runApp(t, "pass", "--workers", "2", "--submitters", "1", "--passes", "20000",
		"--capacity", "256", "--chaos", "2", "--seed", "7", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	checkChaosJSON(t, out, 2, rolePassWorker)
	if !strings.Contains(out, `"seed": 7`) {
		t.Error("the seed given is not in the result")
	}
	checkNoLeftovers(t)
}

func TestPassAbortPaths(t *testing.T) {
	huge := testPassSpec()
	huge.Passes, huge.Duration = 0, time.Hour
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := runPass(ctx, huge, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's deadline", err)
		}
		checkNoLeftovers(t)
	})
	t.Run("timeout-chaos", func(t *testing.T) {
		s := huge
		s.Timeout, s.Chaos = 700*time.Millisecond, 3
		_, err := runPass(t.Context(), s, nil)
		if !errors.Is(err, errTimedOut) {
			t.Errorf("err = %v, want a time-out", err)
		}
		checkNoLeftovers(t)
	})
	t.Run("run-timeout-chaos", func(t *testing.T) {
		s := testRunSpec("ring", "")
		s.Messages, s.Duration, s.Timeout, s.Chaos = 0, time.Hour, 700*time.Millisecond, 3
		_, err := runThroughput(t.Context(), s, nil)
		if !errors.Is(err, errTimedOut) {
			t.Errorf("err = %v, want a time-out", err)
		}
		checkNoLeftovers(t)
	})
}

// The deque: one owner producer, thieves in separate processes, in both
// modes, popping and leasing; every message exactly once.
func TestRunDeque(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		lease bool
	}{{modePoll, false}, {modeBlock, false}, {modePoll, true}, {modeBlock, true}} {
		name := tc.mode
		if tc.lease {
			name += "/lease"
		}
		t.Run(name, func(t *testing.T) {
			s := testRunSpec("deque", tc.mode)
			s.Producers, s.Consumers, s.Messages, s.Lease = 1, 3, 20000, tc.lease
			r, err := runThroughput(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != 0 || r.Lease != tc.lease {
				t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d, lease %v", r.Lost, r.Corrupt, r.Duplicated, r.Killed, r.Lease)
			}
			if err := failure(&r); err != nil {
				t.Error(err)
			}
			if r.Transport != "deque" || r.Mode != tc.mode || r.Producers != 1 || r.Consumers != 3 || r.Messages != s.Messages {
				t.Errorf("result = %+v", r)
			}
			checkLatency(t, &r, s.Messages)
			d := r.Deque
			if d == nil || d.SlotBytes != 128 || r.Capacity != 64 {
				t.Fatalf("deque stats %+v, capacity %d", d, r.Capacity)
			}
			taken := d.Stolen
			if tc.lease {
				taken = d.Claimed
			}
			if want := uint64(s.Messages) + 3; taken != want || d.OwnerPopped != 0 || d.Returned != 0 {
				t.Errorf("deque stats %+v: want %d taken (messages and end markers), nothing popped or returned", d, want)
			}
			checkNoLeftovers(t)
		})
	}
}

// --chaos on the deque: thieves are killed; the parent's repairs return
// their leases, which other thieves take again. Nothing may be lost. Three
// thieves for two kills: a run this short can be over before a
// replacement has started, and one thief from the start must finish, or
// no finished consumer has latencies to report.
func TestRunDequeChaos(t *testing.T) {
	for _, mode := range []string{modePoll, modeBlock} {
		t.Run(mode, func(t *testing.T) {
			out, code, err := runApp(t, "run", "--transport", "deque", "--mode", mode, "--consumers", "3",
				"--messages", "20000", "--capacity", "256", "--chaos", "2", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, out)
			}
			checkChaosJSON(t, out, 2, roleConsumer)
			checkKillsBeforeEnd(t, out, 20000, 1, 2)
			if !strings.Contains(out, `"deque": {`) || !strings.Contains(out, `"lease": true`) {
				t.Errorf("no deque stats or lease in %s", out)
			}
			checkNoLeftovers(t)
		})
	}
}

// A thief catches a damaged message, and the deque's hot paths allocate
// nothing per message: the owner's push and a thief's steal, claim and
// ack, in both modes.
func TestDequeCorruptAndAllocs(t *testing.T) {
	s := testRunSpec("deque", "")
	s.Producers, s.corrupt = 1, &corruptAt{Producer: 0, Seq: 700}
	r, err := runThroughput(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Corrupt != 1 || r.Lost != 1 || r.Duplicated != 0 {
		t.Errorf("corrupt %d, lost %d, duplicated %d; want 1, 1, 0", r.Corrupt, r.Lost, r.Duplicated)
	}

	for _, mode := range []string{modePoll, modeBlock} {
		t.Run(mode, func(t *testing.T) {
			c := laneConfig{Transport: "deque", Mode: mode, Payload: defaultPayload, Capacity: 64}
			ln, err := newDequeLane(c)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.close()
			spec, _, _ := ln.share(true)
			tx, err := openDequeEnd(t.Context(), c, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.close()
			rx, err := openDequeEnd(t.Context(), c, spec, false)
			if err != nil {
				t.Fatal(err)
			}
			defer rx.close()
			msg, buf := newMsg(defaultPayload, 0), make([]byte, defaultPayload)
			seq := uint64(0)
			allocs := testing.AllocsPerRun(1000, func() {
				stamp(msg, seq, 1)
				seq++
				if err := tx.send(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := rx.recv(buf); err != nil {
					t.Fatal(err)
				}
				if err := tx.send(msg); err != nil {
					t.Fatal(err)
				}
				l, err := rx.(leaser).claim()
				if err != nil {
					t.Fatal(err)
				}
				if err := rx.(leaser).ack(l); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per message", allocs)
			}
		})
	}
	checkNoLeftovers(t)
}
