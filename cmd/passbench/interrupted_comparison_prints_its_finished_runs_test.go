package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// lineupLabels are the comparison's rows in the order they are measured.
func lineupLabels(batch int) []string {
	var out []string
	for _, tm := range compareThroughput {
		r := Result{Kind: kindThroughput, Transport: tm.Transport, Mode: tm.Mode, Producers: 1, Consumers: tm.Consumers, Loan: tm.Loan}
		if tm.Batched {
			r.Batch = batch
		}
		out = append(out, r.label())
	}
	for _, tm := range compareRTT {
		out = append(out, (&Result{Kind: kindRTT, Transport: tm[0], Mode: tm[1]}).label())
	}
	return out
}

var interruptedLine = regexp.MustCompile(`^passbench: interrupted \(interrupt signal received\) in run (\d+)/(\d+), round 1 of 2, (throughput|rtt) (.+): printed the (\d+) finished runs$`)

// Ctrl-C in the middle of the comparison: the built command, in its own
// process group, gets SIGINT there (as from a terminal: children too)
// once it has announced its third run. It must print the runs that
// finished (text and --json), say where it was interrupted, exit 1, and
// leave no file behind.
func TestInterruptedComparisonPrintsItsFinishedRuns(t *testing.T) {
	bin := proctest.BuildCommand(t, "passbench")
	labels := lineupLabels(defaultCompareBatch)
	for _, asJSON := range []bool{true, false} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			// The deadline only keeps a broken build from hanging the
			// suite; nothing below depends on how long a run takes.
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			args := []string{"compare", "--duration", "300ms", "--repeat", "2", "--rounds", "2000", "--warmup", "10"}
			if asJSON {
				args = append(args, "--json")
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			errPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			var lines []string
			sent := false
			sc := bufio.NewScanner(errPipe)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if !sent && strings.HasPrefix(sc.Text(), "passbench: run 3/") {
					if err := syscall.Kill(-pid, syscall.SIGINT); err != nil {
						t.Fatal(err)
					}
					sent = true
				}
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("%v, want exit status 1; stderr:\n%s", err, strings.Join(lines, "\n"))
			}
			if !sent {
				t.Fatalf("never announced run 3; stderr:\n%s", strings.Join(lines, "\n"))
			}
			// One stage line per run started, in the line-up's order.
			last := lines[len(lines)-1]
			m := interruptedLine.FindStringSubmatch(last)
			if m == nil {
				t.Fatalf("last line %q does not say where it was interrupted", last)
			}
			at, _ := strconv.Atoi(m[1])
			finished, _ := strconv.Atoi(m[5])
			if finished != at-1 || finished < 2 || m[4] != labels[at-1] || m[2] != strconv.Itoa(2*len(labels)) {
				t.Fatalf("%q: interrupted in run %d (%s) with %d finished", last, at, m[4], finished)
			}
			for i := 1; i <= at; i++ {
				want := fmt.Sprintf("passbench: run %d/%d, round 1 of 2: ", i, 2*len(labels))
				if i > len(lines) || !strings.HasPrefix(lines[i-1], want) || !strings.Contains(lines[i-1], " "+labels[i-1]+" (") {
					t.Errorf("stage line %d: %q, want %q... %s", i, lines[min(i, len(lines))-1], want, labels[i-1])
				}
			}
			if asJSON {
				var rep CompareReport
				if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, stdout.String())
				}
				in := rep.Interrupted
				if in == nil || in.Round != 1 || in.Row != labels[at-1] || in.Cause != "interrupt signal received" {
					t.Errorf("interrupted = %+v", in)
				}
				if len(rep.AllRuns) != finished || len(rep.Rows) != finished || len(rep.Runs) != finished {
					t.Errorf("%d runs, %d rows, %d medians; want %d each", len(rep.AllRuns), len(rep.Rows), len(rep.Runs), finished)
				}
				for i, row := range rep.Rows {
					if row.Label != labels[i] || row.MsgsPerSec == nil || row.MsgsPerSec.N != 1 || row.Lost != 0 {
						t.Errorf("row %d: %+v, want %s with one run", i, row, labels[i])
					}
				}
			} else {
				out := stdout.String()
				head := fmt.Sprintf("INTERRUPTED (interrupt signal received) in round 1 at %s %s: the tables hold only the %d runs that finished", m[3], m[4], finished)
				if strings.Count(out, head) != 2 {
					t.Errorf("the text does not start and end with %q:\n%s", head, out)
				}
				for _, l := range labels[:finished] {
					if !strings.Contains(out, l+" ") {
						t.Errorf("the text lacks the finished row %q:\n%s", l, out)
					}
				}
				if !strings.Contains(out, "verdict:") {
					t.Errorf("no verdict:\n%s", out)
				}
			}
			if l, _ := filepath.Glob(fmt.Sprintf("/dev/shm/passbench-%d-*", pid)); len(l) != 0 {
				t.Errorf("left behind: %v", l)
			}
		})
	}
}
