package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// openedFixtures lists the fixtures under testdata/ ringctl opens (their
// header decodes and the kind table has their kind), and which of them
// are healthy.
func openedFixtures(t *testing.T) (names []string, healthy map[string]bool) {
	t.Helper()
	for name, b := range fixtureFiles(t) {
		if h, err := layout.DecodeFile(b); err == nil && kinds[h.Kind] != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) < 9 {
		t.Fatalf("only %v of the fixtures are opened", names)
	}
	return names, map[string]bool{"ring.shm": true, "deque.shm": true, "hashmap.shm": true, "deque-ids.shm": true}
}

// TestInspectVerifyRepairAgreeOnEveryFixture: inspect's problems, verify's
// and repair's plan are one Check of the file: over every fixture ringctl
// opens, the three count the same findings (in the same order, with the
// same locations), repair's to_repair is the number with an action other
// than none, and a damaged fixture has problems while a healthy one has
// none.
func TestInspectVerifyRepairAgreeOnEveryFixture(t *testing.T) {
	dir := fixtureDir(t)
	names, healthy := openedFixtures(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			var ins checkJSON
			var ver verifyReport
			var rep repairReport
			for _, c := range []struct {
				args  []string
				codes []int
				into  any
			}{
				{[]string{"inspect", path, "--json"}, []int{0}, &ins},
				{[]string{"verify", path, "--json"}, []int{0, 1}, &ver},
				{[]string{"repair", path, "--json"}, []int{0, 1}, &rep},
			} {
				r := run(t, "", c.args...)
				if err := json.Unmarshal([]byte(r.stdout), c.into); err != nil || !contains(c.codes, r.code) {
					t.Fatalf("%v: exit %d, %v: %+v", c.args, r.code, err, r)
				}
			}
			locations := func(fs []findingJSON) []string {
				out := []string{}
				for _, f := range fs {
					out = append(out, f.Kind+" "+f.Location+" "+f.Action)
				}
				return out
			}
			if ins.Problems != len(ins.Findings) || ins.Problems != len(ver.Problems) || ins.Problems != len(rep.Plan) {
				t.Fatalf("inspect %d problems (%d listed), verify %d, repair lists %d findings", ins.Problems, len(ins.Findings), len(ver.Problems), len(rep.Plan))
			}
			if a, b, c := strings.Join(locations(ins.Findings), "; "), strings.Join(locations(ver.Problems), "; "), strings.Join(locations(rep.Plan), "; "); a != b || b != c {
				t.Fatalf("findings differ:\ninspect %s\nverify  %s\nrepair  %s", a, b, c)
			}
			withAction := 0
			for _, f := range rep.Plan {
				if f.Action != string(check.ActionNone) {
					withAction++
				}
			}
			if rep.ToRepair != withAction {
				t.Fatalf("to_repair %d, findings with an action %d", rep.ToRepair, withAction)
			}
			if ver.Clean != (len(ver.Problems) == 0) || healthy[name] != ver.Clean {
				t.Fatalf("verify: clean %v with %d problems; the fixture is healthy: %v", ver.Clean, len(ver.Problems), healthy[name])
			}
		})
	}
}

func contains(codes []int, code int) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// TestSummaryOnItsOwnLine: a report on stdout and the summary on stderr
// never run together on one line ("...nothing changed (use
// --apply)ringctl: ..."), also when both go to one terminal or file: the
// report ends with a newline, the summary is a line of its own.
func TestSummaryOnItsOwnLine(t *testing.T) {
	f := []findingJSON{
		{Kind: "orphaned_lease", Location: "slot[0].word", Offset: 0x340, Owner: 0, Action: "requeue", Detail: "a repair requeues it"},
		{Kind: "poisoned", Location: "slot[1].word", Offset: 0x380, Owner: -1, Action: "none", Detail: "left alone"},
	}
	for _, rep := range []repairReport{
		{Path: "./x", ToRepair: 1, Plan: f},
		{Path: "./x", ToRepair: 1, Plan: f, Applied: true, Result: newRepairResult(repairDone{corruptLabel: "corrupt slots left alone",
			counts: []repairCount{{check.ActionRequeue, "messages requeued at the tail", 1}}}, []string{"busy"})},
		{Path: "./x", Plan: f[1:]},
		{Path: "./x"},
	} {
		var b bytes.Buffer
		if err := rep.write(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.HasSuffix(out, "\n") {
			t.Fatalf("the report does not end with a newline:\n%s", out)
		}
		if len(rep.Plan) > 0 && !strings.HasPrefix(out, "./x: "+plural(len(rep.Plan), "problem", "problems")+" found, ") {
			t.Fatalf("no problems line of its own opens the report:\n%s", out)
		}
	}
	var b bytes.Buffer
	if err := (verifyReport{Path: "./x", Problems: f}).write(&b); err != nil || !strings.HasSuffix(b.String(), "\n") {
		t.Fatalf("%v:\n%s", err, b.String())
	}

	// The binary, stdout and stderr into one pipe, over every fixture.
	dir := fixtureDir(t)
	names, _ := openedFixtures(t)
	for _, name := range names {
		for _, verb := range []string{"inspect", "verify", "repair"} {
			exe := ringctl(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, exe, verb, filepath.Join(dir, name))
			var both bytes.Buffer
			cmd.Stdout, cmd.Stderr = &both, &both
			cmd.Run()
			cancel()
			out := both.String()
			if !strings.HasSuffix(out, "\n") || strings.Count(out, "ringctl: ") != strings.Count("\n"+out, "\nringctl: ") {
				t.Fatalf("%s %s: a message runs into another:\n%s", verb, name, out)
			}
		}
	}
}
