package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// run --batch, on the ring and the deque, polling and blocking, with one
// consumer and with several: every message reaches exactly one consumer
// once, and every consumer gets its end marker (several batching
// consumers could otherwise take two markers in one batch and leave
// another consumer waiting: end_markers.go). The run's own tally says so
// (its consumers check every message's checksum and range, the parent
// merges what they saw), and so do the lists the consumers write with
// --record, read here on their own.
//
// The batches do not divide the producers' shares, so each producer's
// last batch is a partial one pushed when it closes; one batch is larger
// than the lane, so pushes fit only part of it.
func TestBatchedRunsDeliverEveryMessageOnce(t *testing.T) {
	for _, tr := range []string{"ring", "deque"} {
		for _, mode := range []string{modePoll, modeBlock} {
			for _, tc := range []struct{ consumers, batch int }{{1, 7}, {2, 7}, {3, 100}} {
				t.Run(fmt.Sprintf("%s/%s/1x%d/batch%d", tr, mode, tc.consumers, tc.batch), func(t *testing.T) {
					s := testRunSpec(tr, mode)
					s.Consumers, s.Batch = tc.consumers, tc.batch
					if tr == "deque" {
						s.Producers = 1 // the owner
					}
					s.Record = filepath.Join(t.TempDir(), "rec")
					r, err := runThroughput(t.Context(), s, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := failure(&r); err != nil {
						t.Error(err)
					}
					if r.Lost != 0 || r.Duplicated != 0 || r.Corrupt != 0 || r.Killed != 0 {
						t.Errorf("lost %d, duplicated %d, corrupt %d, killed %d; want all 0", r.Lost, r.Duplicated, r.Corrupt, r.Killed)
					}
					if r.Messages != testMsgs || r.Batch != tc.batch || r.Consumers != tc.consumers || r.Producers != s.Producers {
						t.Errorf("result: %d messages, batch %d, %d×%d; want %d, %d, %d×%d",
							r.Messages, r.Batch, r.Producers, r.Consumers, testMsgs, tc.batch, s.Producers, tc.consumers)
					}
					// Every message and every end marker was stolen once,
					// and nothing else left the deque.
					if d := r.Deque; d != nil && d.Stolen != uint64(testMsgs+tc.consumers) {
						t.Errorf("deque: %d stolen, want %d messages and %d end markers", d.Stolen, testMsgs, tc.consumers)
					}
					checkRecordedOnce(t, s.Record, s.Consumers, s.perProducer())
					checkNoLeftovers(t)
				})
			}
		}
	}
}

// checkRecordedOnce reads the consumers' --record lists: together they
// must hold every producer's sequence numbers [0, per[p]) exactly once.
func checkRecordedOnce(t *testing.T, dir string, consumers int, per []int64) {
	t.Helper()
	got := map[[2]int64]int{}
	for c := range consumers {
		b, err := os.ReadFile(filepath.Join(dir, "consumer-"+strconv.Itoa(c)+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Fields(strings.ReplaceAll(string(b), " ", ":")) {
			p, seq, ok := strings.Cut(line, ":")
			pn, err1 := strconv.ParseInt(p, 10, 64)
			sn, err2 := strconv.ParseInt(seq, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("consumer %d: bad line %q", c, line)
			}
			got[[2]int64{pn, sn}]++
		}
	}
	want := 0
	for p, n := range per {
		for seq := range n {
			if k := got[[2]int64{int64(p), seq}]; k != 1 {
				t.Errorf("producer %d seq %d recorded %d times, want once", p, seq, k)
			}
		}
		want += int(n)
	}
	if len(got) != want {
		t.Errorf("%d distinct messages recorded, want %d", len(got), want)
	}
}
