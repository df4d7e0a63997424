package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	app := newApp(&out, &errOut)
	cliutil.Prepare(app) // the grammar cliutil.Run gives every tool
	ordered, _ := cliutil.Reorder(app, append([]string{"passbench"}, args...))
	err := app.RunContext(t.Context(), ordered)
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

// The default comparison, scaled down: every row in every round, the
// median runs, the ratios, the verdict, the table.
func TestCompare(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "cmp.svg")
	var stdout, stderr bytes.Buffer
	app := newApp(&stdout, &stderr)
	cliutil.Prepare(app) // the grammar cliutil.Run gives every tool
	ordered, _ := cliutil.Reorder(app, []string{"passbench", "compare",
		"--messages", strconv.Itoa(testMsgs), "--rounds", "100", "--warmup", "10", "--repeat", "2", "--json", "--plot", plot})
	err := app.RunContext(t.Context(), ordered)
	if code := cliutil.Code(err); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	out := stdout.String()
	// stdout is no terminal: one stage line per run, then where the plot
	// went.
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	labels := lineupLabels(defaultCompareBatch)
	if len(lines) != 2*len(labels)+1 {
		t.Fatalf("%d lines on stderr, want %d:\n%s", len(lines), 2*len(labels)+1, stderr.String())
	}
	for i, l := range lines[:2*len(labels)] {
		kind := kindThroughput
		length := strconv.Itoa(testMsgs) + " msgs"
		if i%len(labels) >= len(compareThroughput) {
			kind, length = kindRTT, "100 round trips"
		}
		want := fmt.Sprintf("passbench: run %d/%d, round %d of 2: %s %s (%s)", i+1, 2*len(labels), i/len(labels)+1, kind, labels[i%len(labels)], length)
		if l != want {
			t.Errorf("stage line %d: %q, want %q", i+1, l, want)
		}
	}
	if want := "passbench: plot written to " + plot + " (2 panels)"; lines[len(lines)-1] != want {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}
	var raw struct {
		Format  string           `json:"format"`
		Runs    []map[string]any `json:"runs"`
		AllRuns []map[string]any `json:"all_runs"`
		Ratios  []map[string]any `json:"ratios"`
		Verdict []string         `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	rows := len(compareThroughput) + len(compareRTT)
	if raw.Format != compareFormat || len(raw.Runs) != rows || len(raw.AllRuns) != 2*rows {
		t.Fatalf("format %q, %d runs, %d in all", raw.Format, len(raw.Runs), len(raw.AllRuns))
	}
	deques, dequeBatches, batches, loans, bare := 0, 0, 0, 0, 0
	for _, r := range raw.Runs {
		checkRunJSON(t, r)
		switch {
		case r["transport"] == "deque":
			deques++
			if _, ok := r["deque"].(map[string]any); !ok || r["producers"] != 1.0 {
				t.Errorf("deque run: %v", r)
			}
			if r["batch"] == float64(defaultCompareBatch) {
				dequeBatches++
			}
		case r["batch"] == float64(defaultCompareBatch):
			batches++
		case r["loan"] == true:
			loans++
		case r["transport"] == bareTransport:
			bare++
		}
	}
	if deques != 5 || dequeBatches != 2 || batches != 2 || loans != 1 || bare != 2 {
		t.Errorf("%d deque (%d of them batch), %d ring batch, %d loan, %d reference runs; want 5 (2), 2, 1, 2",
			deques, dequeBatches, batches, loans, bare)
	}
	ratios := map[string]bool{}
	for _, r := range raw.Ratios {
		if _, ok := r["met"]; ok {
			t.Errorf("a goal without --hogs: %v", r)
		}
		name, _ := r["name"].(string)
		ratios[name] = true
	}
	for _, want := range []string{"throughput ring/poll batch 32 ÷ ring/poll", "throughput ring/block batch 32 ÷ ring/poll",
		"throughput deque/poll batch 32 ÷ deque/poll", "throughput deque/block batch 32 ÷ deque/block",
		"throughput ring/poll ÷ deque/poll batch 32"} {
		if !ratios[want] {
			t.Errorf("no ratio %q among %v", want, ratios)
		}
	}
	if len(raw.Verdict) < 5 {
		t.Errorf("verdict: %q", raw.Verdict)
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
	for _, want := range []string{"machine:", "ring/poll", "ring/block", "ring/poll batch 32", "ring/poll loan",
		"bare ring (reference, no crash safety)", "deque/poll", "deque/block", "deque/poll batch 32", "deque/block batch 32", "1×2", "uds", "pipe", "chan", "spin",
		"futex ping-pong (sleeps every round)", "÷ ring/poll", "[", "verdict:", "docs/bench.md", "other processes used"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "goals (from the ring issue)") {
		t.Error("the goals text is still there")
	}
	checkNoLeftovers(t)
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"compare", "--messages", "10", "--duration", "1s"},
		{"--messages", "10"}, // the comparison's flags are compare's
		{"--no-such-flag"},
		{"compare", "--format", "yaml"},
		{"run", "--json", "--format", "text"},
		{"compare", "extra"},
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
		{"pass", "--submitters", "0"},
		{"pass", "--inflight", "0"},
		{"pass", "--inflight", "897"}, // a 1024-slot reply ring allows 896
		{"pass", "--capacity", "16", "--inflight", "15"},
		{"pass", "--passes", "2"}, // fewer than the 3 submitters
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
	return passSpec{Workers: 2, Threads: 1, Submitters: 3, Passes: testMsgs, Payload: defaultPassPayload,
		Capacity: 64, Timeout: time.Minute}
}

// checkPerSubmitter checks a pass run's rows against its totals: one row
// per submitter, by id; their passes, resolved, lost, duplicated and
// corrupt add up to the run's; in a counted run each submitted its share
// (per); each has its own interval, rate and latencies, within the run's.
func checkPerSubmitter(t *testing.T, r *Result, per []int64) {
	t.Helper()
	if r.Pass == nil || len(r.Pass.PerSubmitter) != r.Producers || r.Pass.Submitters != r.Producers {
		t.Fatalf("%d submitters, pass = %+v", r.Producers, r.Pass)
	}
	var passes, resolved, lost, dup, corrupt int64
	for i, p := range r.Pass.PerSubmitter {
		if p.ID != i {
			t.Errorf("row %d is submitter %d", i, p.ID)
		}
		if per != nil && p.Messages != per[i] {
			t.Errorf("submitter %d submitted %d passes, its share is %d", i, p.Messages, per[i])
		}
		if p.Lost != p.Messages-p.Resolved {
			t.Errorf("submitter %d: lost %d, but %d of %d resolved", i, p.Lost, p.Resolved, p.Messages)
		}
		if p.Resolved > 0 {
			if p.Seconds <= 0 || p.Seconds > r.Seconds || p.MsgsPerSec <= 0 {
				t.Errorf("submitter %d: %v s (the run: %v s), %v passes/s", i, p.Seconds, r.Seconds, p.MsgsPerSec)
			}
			l := p.Latency
			if l.Min <= 0 || l.Min > l.P50 || l.P50 > l.P99 || l.P99 > l.Max || l.Min < r.Latency.Min || l.Max > r.Latency.Max {
				t.Errorf("submitter %d: latency %+v, the run's %+v", i, l, r.Latency)
			}
		}
		passes += p.Messages
		resolved += p.Resolved
		lost += p.Lost
		dup += p.Duplicated
		corrupt += p.Corrupt
	}
	if passes != r.Messages || lost != r.Lost || dup != r.Duplicated || corrupt != r.Corrupt {
		t.Errorf("submitters' sums: %d passes, %d lost, %d dup, %d corrupt; the run: %d, %d, %d, %d",
			passes, lost, dup, corrupt, r.Messages, r.Lost, r.Duplicated, r.Corrupt)
	}
	if n := r.Hist.TotalCount(); n != resolved {
		t.Errorf("%d latencies, %d passes resolved", n, resolved)
	}
}

// checkPassClean checks a pass run that nothing disturbed: every
// submitter resolved every one of its passes, once.
func checkPassClean(t *testing.T, r *Result, s passSpec) {
	t.Helper()
	if r.Lost != 0 || r.Corrupt != 0 || r.Duplicated != 0 || r.Killed != 0 {
		t.Errorf("lost %d, corrupt %d, duplicated %d, killed %d; want all 0", r.Lost, r.Corrupt, r.Duplicated, r.Killed)
	}
	if err := failure(r); err != nil {
		t.Error(err)
	}
	if r.Kind != kindPass || r.Transport != "pass" || r.Messages <= 0 || r.Seconds <= 0 || r.MsgsPerSec <= 0 ||
		r.Producers != s.Submitters || r.Consumers != s.Workers {
		t.Errorf("result = %+v", r)
	}
	if s.Passes > 0 && r.Messages != s.Passes {
		t.Errorf("%d passes, want %d", r.Messages, s.Passes)
	}
	if p := r.Pass; p == nil || p.Executed != uint64(r.Messages) || p.Failed != 0 || p.StoppedEarly || p.LeftInRing != 0 ||
		p.Workers != s.Workers || p.Threads != s.Threads || p.SlotBytes != 64 {
		t.Errorf("pass = %+v", r.Pass)
	}
	checkLatency(t, r, r.Messages)
	checkPerSubmitter(t, r, s.perSubmitter())
	for _, p := range r.Pass.PerSubmitter {
		if p.Resolved != p.Messages || p.Resolved == 0 || p.StoppedEarly {
			t.Errorf("submitter %d resolved %d of %d passes (stopped early: %v)", p.ID, p.Resolved, p.Messages, p.StoppedEarly)
		}
	}
	checkNoLeftovers(t)
}

// The default topology, scaled down: 3 submitter processes, each awaiting
// its own results with the default passes in flight, and 2 worker
// processes.
func TestPassSubmittersAndWorkers(t *testing.T) {
	s := testPassSpec()
	r, err := runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, s)
	if r.Pass.Inflight != defaultPassInflight {
		t.Errorf("inflight %d, want the default %d", r.Pass.Inflight, defaultPassInflight)
	}
}

// One submitter, one worker, one pass at a time: a series of round trips;
// then a timed run with a worker of two threads and 8 in flight.
func TestPassOneAtATime(t *testing.T) {
	s := testPassSpec()
	s.Submitters, s.Workers, s.Passes, s.Inflight = 1, 1, testRounds, 1
	r, err := runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, s)

	s.Passes, s.Duration, s.Inflight, s.Threads = 0, 200*time.Millisecond, 8, 2
	r, err = runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, s)
}

// Submitters in a timed run, and more in flight than a small ring's
// default allows (capacity 16: at most 14 each).
func TestPassTimedInflight(t *testing.T) {
	s := testPassSpec()
	s.Passes, s.Duration, s.Inflight = 0, 200*time.Millisecond, 4
	r, err := runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPassClean(t, &r, s)

	s = testPassSpec()
	s.Capacity, s.Passes = 16, 600
	r, err = runPass(t.Context(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pass.Inflight != 14 {
		t.Errorf("inflight %d with 16-slot rings, want 14", r.Pass.Inflight)
	}
	checkPassClean(t, &r, s)
}

// A submitter damages one pass: the worker's closure refuses it, and that
// submitter (and only it) counts one corrupt and one lost, with the
// checksum named; every other pass is resolved.
func TestPassCorruptDetected(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		submitters, inflight int
	}{{"three", 3, 0}, {"one-at-a-time", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := testPassSpec()
			s.Submitters, s.Inflight, s.Passes = tc.submitters, tc.inflight, 600
			bad := tc.submitters - 1
			s.corrupt = &corruptAt{Producer: bad, Seq: 100}
			r, err := runPass(t.Context(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Corrupt != 1 || r.Lost != 1 || r.Duplicated != 0 || r.Pass.Failed != 1 || r.Messages != 600 {
				t.Errorf("corrupt %d, lost %d, duplicated %d, failed %d, passes %d; want 1, 1, 0, 1, 600",
					r.Corrupt, r.Lost, r.Duplicated, r.Pass.Failed, r.Messages)
			}
			checkPerSubmitter(t, &r, s.perSubmitter())
			for _, p := range r.Pass.PerSubmitter {
				want := int64(0)
				if p.ID == bad {
					want = 1
				}
				if p.Corrupt != want || p.Lost != want || p.Resolved != p.Messages-want || p.StoppedEarly {
					t.Errorf("submitter %d: %+v; want %d corrupt and lost", p.ID, p, want)
				}
			}
			err = failure(&r)
			if err == nil || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), fmt.Sprintf("submitter %d", bad)) {
				t.Errorf("failure = %v", err)
			}
			checkNoLeftovers(t)
		})
	}
}

// wantPassFields and wantSubmitterFields are the documented JSON of a pass
// run (docs/cli.md).
var (
	wantPassFields = []string{"workers", "threads", "submitters", "inflight", "slot_bytes", "executed", "failed",
		"backpressure", "released", "late_results", "orphaned", "orphaned_results", "requeued", "left_in_ring",
		"stopped_early", "per_submitter"}
	wantSubmitterFields = []string{"id", "messages", "resolved", "seconds", "msgs_per_sec", "latency_ns",
		"lost", "duplicated", "corrupt", "stopped_early"}
)

// checkPassJSON checks a pass run's JSON: the run's fields, the pass
// object's, and a row per submitter whose passes add up to the run's.
func checkPassJSON(t *testing.T, out string, submitters int) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	checkRunJSON(t, obj)
	if obj["kind"] != kindPass || obj["transport"] != "pass" || obj["producers"] != float64(submitters) {
		t.Errorf("got %v", obj)
	}
	pass, _ := obj["pass"].(map[string]any)
	for _, k := range wantPassFields {
		if _, ok := pass[k]; !ok {
			t.Errorf("pass lacks %q: %v", k, pass)
		}
	}
	rows, _ := pass["per_submitter"].([]any)
	if len(rows) != submitters {
		t.Fatalf("%d per_submitter rows, want %d", len(rows), submitters)
	}
	var sum float64
	for i, row := range rows {
		row, _ := row.(map[string]any)
		for _, k := range wantSubmitterFields {
			if _, ok := row[k]; !ok {
				t.Errorf("per_submitter[%d] lacks %q: %v", i, k, row)
			}
		}
		if row["id"] != float64(i) || row["lost"] != 0.0 || row["corrupt"] != 0.0 || row["resolved"] != row["messages"] {
			t.Errorf("per_submitter[%d] = %v", i, row)
		}
		if lat, _ := row["latency_ns"].(map[string]any); lat["p50"] == 0.0 || lat["p99"] == 0.0 {
			t.Errorf("per_submitter[%d] latency = %v", i, lat)
		}
		sum += row["messages"].(float64)
	}
	if sum != obj["messages"] {
		t.Errorf("per_submitter messages add up to %v, the run has %v", sum, obj["messages"])
	}
	return obj
}

func TestPassCommandJSON(t *testing.T) {
	out, code, err := runApp(t, "pass", "--workers", "2", "--passes", strconv.Itoa(testMsgs), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	obj := checkPassJSON(t, out, defaultSubmitters)
	if obj["messages"] != float64(testMsgs) || obj["killed"] != 0.0 || obj["payload_bytes"] != float64(defaultPassPayload) {
		t.Errorf("got %v", obj)
	}
	if _, ok := obj["chaos"]; ok {
		t.Error("chaos reported without --chaos")
	}

	// The same run as text: a row per submitter and the total.
	var rep RunReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := writeRunText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"submitter", "passes/s", "p50 µs", "p99 µs", "│ 0 ", "│ 1 ", "│ 2 ", "│ all ", "3 submitters (pass.Client) × 16 in flight", "2 workers (pass.Pool) × 1 thread\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
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

// --chaos on pass: workers are killed under 3 submitters; the parent's
// watchdog requeues their passes, and each submitter resolves all of its
// own, results that came twice dropped by its client.
func TestPassChaos(t *testing.T) {
	out, code, err := runApp(t, "pass", "--workers", "2", "--submitters", "3", "--passes", "20000",
		"--capacity", "256", "--chaos", "2", "--seed", "7", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	checkChaosJSON(t, out, 2, rolePassWorker)
	checkPassJSON(t, out, 3)
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
