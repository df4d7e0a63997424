package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

const helperTest = "TestHbdumpHelperProcess"

// TestHbdumpHelperProcess is the participant process of the real-process
// test: it registers in the table, beats, attaches to the ring and, as the
// holder, claims the ring's message and records the lease; a survivor pops
// from the ring once told to.
func TestHbdumpHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	if !ok || role != "hbdump-participant" {
		return
	}
	if err := participant(); err != nil {
		fmt.Fprintln(os.Stderr, "participant:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func participant() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	hb, err := heartbeat.Open(os.Getenv("HB_TABLE"))
	if err != nil {
		return err
	}
	defer hb.Close()
	m, err := hb.Register(os.Getenv("HB_LABEL"))
	if err != nil {
		return err
	}
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for ctx.Err() == nil {
			m.Beat()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r, err := transport.OpenRing(os.Getenv("HB_RING"))
	if err != nil {
		return err
	}
	defer r.Close()
	if os.Getenv("HB_HOLD") == "1" {
		l, err := r.TryClaim()
		if err != nil {
			return err
		}
		if _, err := m.RecordLease(r.ID(), l.Slot(), l.Lap(), l.Deliveries); err != nil {
			return err
		}
		fmt.Println("ready holding", string(l.Data()))
		<-ctx.Done() // until SIGKILLed
		return nil
	}
	fmt.Println("ready")
	for ctx.Err() == nil {
		if _, err := os.Stat(os.Getenv("HB_GO")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, r.MaxPayload())
	for ctx.Err() == nil {
		n, err := r.TryPop(buf)
		if err == nil {
			fmt.Println("got", string(buf[:n]))
			break
		}
		if !errors.Is(err, transport.ErrEmpty) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-ctx.Done()
	<-beating
	return m.Unregister()
}

func waitOutput(t *testing.T, c *proctest.Child, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		out, errOut := c.Output()
		if strings.Contains(out, want) {
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("child exited before printing %q: %v\n%s\n%s", want, c.Wait(), out, errOut)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("child never printed %q", want)
}

// TestReapRealProcesses: three registered participants, one SIGKILLed
// while holding a lease on a ring. check names it and exits 1; reap
// --apply requeues its message, which a survivor consumes; check exits 0.
// The survivors are never touched.
func TestReapRealProcesses(t *testing.T) {
	dir := t.TempDir()
	table, ringPath, goFile := filepath.Join(dir, "t.hb"), filepath.Join(dir, "jobs.ring"), filepath.Join(dir, "go")
	if res := runHbdump(t, dir, "create", "./t.hb", "--capacity", "8"); res.code != 0 {
		t.Fatalf("create: %+v", res)
	}
	r, err := transport.CreateRing(ringPath, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.TryPush([]byte("job-7")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	env := []string{"HB_TABLE=" + table, "HB_RING=" + ringPath, "HB_GO=" + goFile}
	holder := proctest.Start(t, helperTest, "hbdump-participant", append(env, "HB_LABEL=holder", "HB_HOLD=1")...)
	waitOutput(t, holder, "ready holding job-7")
	survivors := []*proctest.Child{
		proctest.Start(t, helperTest, "hbdump-participant", append(env, "HB_LABEL=survivor-1")...),
		proctest.Start(t, helperTest, "hbdump-participant", append(env, "HB_LABEL=survivor-2")...),
	}
	for _, s := range survivors {
		waitOutput(t, s, "ready")
	}
	check := func() result { return runHbdump(t, dir, "check", "./t.hb", "--stale", "30s", "--ring", "./jobs.ring") }
	if res := check(); res.code != 0 {
		t.Fatalf("check with three live participants: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	holderPID := holder.PID()
	holder.Kill()
	holder.Wait()
	res := check()
	if res.code != 1 || !strings.Contains(res.stdout, fmt.Sprintf("pid %d (holder) dead", holderPID)) || !strings.Contains(res.stdout, "./jobs.ring@0 d1") {
		t.Fatalf("check after the kill: exit %d, want 1 naming pid %d and its lease\n%s%s", res.code, holderPID, res.stdout, res.stderr)
	}
	for _, s := range survivors {
		if strings.Contains(res.stdout, fmt.Sprintf("pid %d ", s.PID())) {
			t.Errorf("check names survivor %d:\n%s", s.PID(), res.stdout)
		}
	}
	if res := runHbdump(t, dir, "reap", "./t.hb", "--ring", "./jobs.ring"); res.code != 1 || !strings.Contains(res.stdout, "requeue 1 lease, free the slot") {
		t.Fatalf("dry run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = runHbdump(t, dir, "reap", "./t.hb", "--apply", "--ring", "./jobs.ring", "--json")
	var rep jsonReap
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || res.code != 0 {
		t.Fatalf("reap --apply: exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if len(rep.Actions) != 1 || !rep.Actions[0].Reclaimed || rep.Actions[0].Participant.PID != int32(holderPID) ||
		len(rep.Rings) != 1 || rep.Rings[0].Repair == nil || rep.Rings[0].Repair.Requeued != 1 || len(rep.Problems) != 0 {
		t.Fatalf("reap --apply report:\n%s", res.stdout)
	}

	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range survivors {
			if out, _ := s.Output(); strings.Contains(out, "got job-7") {
				got++
			}
		}
	}
	if got != 1 {
		t.Fatalf("%d survivors got the requeued message, want 1", got)
	}
	if res := check(); res.code != 0 {
		t.Fatalf("check after the reap: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The survivors kept their slots.
	res = runHbdump(t, dir, "./t.hb", "--json")
	var d jsonDump
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Participants) != 2 || d.Counts.Alive != 2 || d.Totals.Reclaimed != 1 {
		t.Fatalf("after the reap:\n%s", res.stdout)
	}
	want := map[int32]bool{int32(survivors[0].PID()): true, int32(survivors[1].PID()): true}
	for _, p := range d.Participants {
		if !want[p.PID] || p.State != hAlive || !strings.HasPrefix(p.Label, "survivor-") {
			t.Errorf("slot %d: %+v, want a survivor, alive", p.Slot, p)
		}
		delete(want, p.PID)
	}
	for _, s := range survivors {
		s.Cmd.Process.Signal(syscall.SIGTERM)
		s.MustSucceed(t)
	}
	if res := runHbdump(t, dir, "check", "./t.hb"); res.code != 0 || !strings.Contains(res.stdout, "0 alive, 0 stale, 0 dead, 8 free") {
		t.Fatalf("after the survivors left: exit %d\n%s", res.code, res.stdout)
	}
}
