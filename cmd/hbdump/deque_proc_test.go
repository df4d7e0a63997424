package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

const dequeHelperTest = "TestHbdumpDequeHelperProcess"

// TestHbdumpDequeHelperProcess is the thief of the deque test: it
// registers in the table, attaches to the deque (not as its owner),
// claims the oldest message, records the lease in its slot and waits to
// be SIGKILLed.
func TestHbdumpDequeHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || role != "hbdump-thief" {
		return
	}
	if err := dequeThief(); err != nil {
		fmt.Fprintln(os.Stderr, "thief:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func dequeThief() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	hb, err := heartbeat.Open(os.Getenv("HB_TABLE"))
	if err != nil {
		return err
	}
	defer hb.Close()
	m, err := hb.Register("thief")
	if err != nil {
		return err
	}
	m.Beat()
	d, err := transport.OpenDeque(os.Getenv("HB_DEQUE"))
	if err != nil {
		return err
	}
	defer d.Close()
	l, err := d.TryClaim()
	if err != nil {
		return err
	}
	if _, err := m.RecordLease(d.ID(), l.Slot(), l.Lap(), l.Deliveries); err != nil {
		return err
	}
	fmt.Println("ready holding", string(l.Data()))
	<-ctx.Done() // until SIGKILLed
	return nil
}

// TestReapDequeRealProcess: a thief registered in the table, SIGKILLed
// while holding a lease on a deque whose owner (this test) lives on.
// dump and check name the lease by the deque's path and position; reap
// --apply with the deque given as --ring returns the message (the
// deque's Scan shows it returned, and it can be taken again) and frees
// the thief's slot; the owner is left alone.
func TestReapDequeRealProcess(t *testing.T) {
	dir := t.TempDir()
	table, dequePath := filepath.Join(dir, "t.hb"), filepath.Join(dir, "jobs.deque")
	if res := runHbdump(t, dir, "create", "./t.hb", "--capacity", "4"); res.code != 0 {
		t.Fatalf("create: %+v", res)
	}
	owner, err := transport.CreateDeque(dequePath, transport.DequeConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	for _, m := range []string{"job-7", "job-8"} {
		if err := owner.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	thief := proctest.Start(t, dequeHelperTest, "hbdump-thief", "HB_TABLE="+table, "HB_DEQUE="+dequePath)
	waitOutput(t, thief, "ready holding job-7")
	thiefPID := thief.PID()
	thief.Kill()
	thief.Wait()

	res := runHbdump(t, dir, "check", "./t.hb", "--ring", "./jobs.deque")
	if res.code != 1 || !strings.Contains(res.stdout, fmt.Sprintf("pid %d (thief) dead", thiefPID)) || !strings.Contains(res.stdout, "./jobs.deque@0 d1") {
		t.Fatalf("check after the kill: exit %d, want 1 naming pid %d and its lease\n%s%s", res.code, thiefPID, res.stdout, res.stderr)
	}
	res = runHbdump(t, dir, "reap", "./t.hb", "--ring", "./jobs.deque")
	if res.code != 1 || !strings.Contains(res.stdout, "requeue 1 lease, free the slot") || !strings.Contains(res.stdout, "│ deque │") {
		t.Fatalf("dry run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if s := owner.Scan(); len(s.Slots) != 2 || s.States[layout.SlotLeased] != 1 {
		t.Fatalf("the dry run changed the deque: %+v", s)
	}

	res = runHbdump(t, dir, "reap", "./t.hb", "--apply", "--ring", "./jobs.deque", "--json")
	var rep jsonReap
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || res.code != 0 {
		t.Fatalf("reap --apply: exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if len(rep.Actions) != 1 || !rep.Actions[0].Reclaimed || rep.Actions[0].Participant.PID != int32(thiefPID) ||
		len(rep.Rings) != 1 || rep.Rings[0].Kind != "deque" || rep.Rings[0].RingID != fmt.Sprintf("%016x", owner.ID()) ||
		rep.Rings[0].OrphanedLeases != 1 || rep.Rings[0].Owner != "alive" ||
		rep.Rings[0].Repair == nil || rep.Rings[0].Repair.Requeued != 1 || rep.Rings[0].Repair.OwnerDied || len(rep.Problems) != 0 {
		t.Fatalf("reap --apply report:\n%s", res.stdout)
	}

	// The message is returned, the owner still owns the deque.
	s := owner.Scan()
	returned := 0
	for _, sr := range s.Slots {
		if sr.Word.State == layout.SlotReturned {
			returned++
		}
		if sr.Problem != transport.SlotOK {
			t.Errorf("slot %d after the reap: %s", sr.Index, sr.Problem)
		}
	}
	if returned != 1 || !s.OwnerAlive || !owner.IsOwner() || s.Problems != 0 {
		t.Fatalf("deque after the reap: %d returned, owner alive %v, owner %v, %d problems: %+v", returned, s.OwnerAlive, owner.IsOwner(), s.Problems, s)
	}
	buf := make([]byte, owner.MaxPayload())
	n, err := owner.TakeReturned(buf)
	if err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("take the returned message: %q, %v", buf[:n], err)
	}
	if res := runHbdump(t, dir, "check", "./t.hb", "--ring", "./jobs.deque"); res.code != 0 || !strings.Contains(res.stdout, "0 alive, 0 stale, 0 dead, 4 free") {
		t.Fatalf("check after the reap: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
