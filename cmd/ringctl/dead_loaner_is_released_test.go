package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// A ring position on loan (transport.Ring.TryLoan) is a slot being written:
// while its process lives, inspect counts it as writing and verify and
// repair find nothing to do; once the process is SIGKILLed, verify reports
// an orphaned write, repair's plan releases it, --apply does, and the
// messages published after it are drained exactly once.

var loanHelper = proctest.Helper{Test: "TestRingctlLoanHelperProcess", Prefix: "ringctl-loan-"}

// TestRingctlLoanHelperProcess is the child side: role "holder" takes a
// loan of 5 bytes on the ring, writes 2 of them, prints "holding 1" and
// waits, holding it, until killed.
func TestRingctlLoanHelperProcess(t *testing.T) {
	loanHelper.Serve(func(role string) error {
		if role != "holder" {
			return fmt.Errorf("unknown role %q", role)
		}
		r, err := transport.OpenRing(proctest.EnvPath())
		if err != nil {
			return err
		}
		l, err := r.TryLoan(5)
		if err != nil {
			return err
		}
		copy(l.Data(), "lo")
		fmt.Println("holding 1")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		<-ctx.Done() // killed long before
		return ctx.Err()
	})
}

func TestDeadLoanerIsReleased(t *testing.T) {
	path := newRing(t, 8)
	r, err := transport.OpenRing(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.TryPush([]byte("one")); err != nil {
		t.Fatal(err)
	}
	holder := loanHelper.Start(t, "holder", proctest.PathArg(path))
	holder.WaitLine(t, "holding")
	for _, m := range []string{"two", "three"} {
		if err := r.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Alive: a slot being written, nothing to repair.
	if ins := inspectJSON(t, path); ins.States.Writing != 1 || ins.States.Ready != 3 || ins.States.Orphaned != 0 || ins.Problems != 0 {
		t.Fatalf("a live loan: inspect %+v", ins)
	}
	if res := run(t, "", "verify", path); res.code != 0 {
		t.Fatalf("a live loan: verify %+v", res)
	}
	var plan repairReport
	if res := run(t, "", "repair", path, "--json"); res.code != 0 || json.Unmarshal([]byte(res.stdout), &plan) != nil || plan.ToRepair != 0 {
		t.Fatalf("a live loan: repair plan %+v", res)
	}

	holder.Kill()
	if err := holder.Wait(); err == nil {
		t.Fatal("the holder was not killed")
	}
	if ins := inspectJSON(t, path); ins.States.Writing != 0 || ins.States.Orphaned != 1 {
		t.Fatalf("a dead loan: inspect %+v", ins)
	}
	var ver verifyReport
	if res := run(t, "", "verify", path, "--json"); res.code != 1 || json.Unmarshal([]byte(res.stdout), &ver) != nil {
		t.Fatalf("a dead loan: verify %+v", res)
	}
	found := false
	for _, p := range ver.Problems {
		if p.Kind == "orphaned_write" {
			found = p.Location == "slot[1].word" && p.Action == "release" && p.Position != nil && *p.Position == 1
		}
	}
	if !found || len(ver.Problems) != 2 {
		t.Fatalf("a dead loan: verify problems %+v", ver.Problems)
	}
	if res := run(t, "", "repair", path, "--json"); res.code != 1 || json.Unmarshal([]byte(res.stdout), &plan) != nil || plan.ToRepair != 2 {
		t.Fatalf("a dead loan: repair plan %+v", res)
	}
	var rep repairReport
	res := run(t, "", "repair", path, "--apply", "--no-backup", "--json")
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &rep) != nil || rep.Result == nil ||
		rep.Result.Counts["release"] != 1 || len(rep.Result.DeadParticipants) != 1 || len(rep.Result.Problems) != 0 {
		t.Fatalf("a dead loan: repair --apply %+v", res)
	}
	if res := run(t, "", "drain", path); res.code != 0 || res.stdout != "one\ntwo\nthree\n" {
		t.Fatalf("drain after the repair: %+v", res)
	}
	if res := run(t, "", "verify", path); res.code != 0 {
		t.Fatalf("verify after the repair: %+v", res)
	}
}
