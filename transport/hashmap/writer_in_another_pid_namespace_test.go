package hashmap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Invariant: a writer running in another pid namespace (as a container's
// process sharing /dev/shm does: it records pid 1, which names another
// process here) is judged alive from the host while it lives, because it
// holds its entry lock: Peers reports its lock held and its namespace,
// Check reports nothing, Repair (attached, or without an entry) leaves its
// home lock and its locked bucket alone, and a host writer of the same key
// waits for it instead of taking its turn. Once it is SIGKILLed its entry
// lock is released and it is proven dead from the host, which rolls back
// what it left and frees its entry; nothing acknowledged is lost.

func init() {
	// Stop in the middle of an update of key KEY, holding the key's home
	// lock and its bucket's lock, until killed.
	hmRoles["hold-mid-update"] = func(m *Map) error {
		key := hmKey(uint32(proctest.EnvInt("KEY")))
		home := layout.HashMapHash(key) & m.mask
		if _, err := m.lockHome(m.home(home), home); err != nil {
			return err
		}
		f, err := m.find(home, key)
		if err != nil {
			return err
		}
		if !f.found {
			return fmt.Errorf("key %q absent", key)
		}
		w := layout.UnpackHashMapWord(f.raw)
		w.Owner = m.tab.Self // the lock step of Map.update
		if !m.ctl(f.idx).CompareAndSwap(f.raw, w.Pack()) {
			return errors.New("bucket lock lost")
		}
		fmt.Printf("pid %d\n", shm.Self().PID)
		fmt.Printf("held %d\n", f.idx)
		for {
			time.Sleep(time.Second) // until killed (the parent's deadline bounds it)
		}
	}
}

func TestWriterInAnotherPidNamespaceIsAliveUntilKilled(t *testing.T) {
	proctest.RequirePidNamespaces(t)
	m := hmCrashMap(t, 4)
	m.homeWaitMax = 50 * time.Millisecond
	model := hmPreload(t, m)
	c := hmHelper.StartInPidNamespace(t, "hold-mid-update", proctest.PathArg(m.Path()), "KEY=0")
	idx, err := strconv.ParseUint(strings.TrimPrefix(c.WaitLine(t, "held "), "held "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	childPID, _ := strconv.Atoi(strings.TrimPrefix(c.WaitLine(t, "pid "), "pid "))
	key := hmKey(0)
	home := layout.HashMapHash(key) & m.mask
	words := func() [2]uint64 { return [2]uint64{m.home(home).Load(), m.ctl(idx).Load()} }
	held := words()
	owner := int(layout.UnpackHashMapWord(held[1]).Owner) - 1
	if held[0] == 0 || owner < 0 {
		t.Fatalf("the child holds home lock %#x, bucket word %#x", held[0], held[1])
	}

	v, err := OpenForRepair(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ro, err := OpenReadOnly(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	here := shm.PidNamespace()
	// Alive, from every handle of the host.
	for _, h := range []*Map{m, v, ro} {
		p := h.Peers()[owner]
		if p.State != "active" || p.Lock != shm.LockHeld || !p.OtherNS || p.PidNS == 0 || p.PidNS == here || p.Dead || p.Unknown || int(p.ID.PID) != childPID {
			t.Fatalf("the writer in another pid namespace (pid %d there) judged from the host: %+v", childPID, p)
		}
		if !strings.Contains(p.Where(), "another pid namespace") {
			t.Fatalf("Where names it %q", p.Where())
		}
		if rep := h.Check(); !rep.Clean() {
			t.Fatalf("Check reports the live writer: %+v", rep.Findings)
		}
		if s := h.Scan(); s.Problems != 0 || len(s.HomeLocks) != 1 || !s.HomeLocks[0].Alive {
			t.Fatalf("Scan: %+v", s)
		}
	}
	t.Logf("judged from the host while it runs: %s, %s", m.Peers()[owner].Where(), m.Peers()[owner].Reason)
	for _, h := range []*Map{m, v} {
		if rep, err := h.Repair(); err != nil || rep.Changed() || len(rep.Done) != 0 || words() != held {
			t.Fatalf("Repair with the live writer: %+v %v (words %#x, were %#x)", rep, err, words(), held)
		}
	}
	if _, err := m.Put(key, []byte("host")); !errors.Is(err, transport.ErrDeadlineOrClose) || words() != held {
		t.Fatalf("a host Put of the key the live writer holds: %v (words %#x, were %#x)", err, words(), held)
	}

	// SIGKILL (to unshare, which takes its namespace down with it).
	c.Kill()
	c.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for v.Peers()[owner].Lock == shm.LockHeld {
		select {
		case <-ctx.Done():
			t.Fatal("the killed writer's entry lock was never released")
		case <-time.After(time.Millisecond):
		}
	}
	p := v.Peers()[owner]
	if !p.Dead || !p.OtherNS || p.Lock != shm.LockReleased || !strings.Contains(p.Reason, "another pid namespace") {
		t.Fatalf("the killed writer judged from the host: %+v", p)
	}
	t.Logf("judged from the host once killed: %s", p.Reason)
	plan := v.PlanRepair()
	for _, f := range plan {
		if f.Location == fmt.Sprintf("bucket[%d].ctl", idx) && !strings.Contains(f.Detail, "another pid namespace") {
			t.Errorf("the plan names the dead writer as if its pid meant a process here: %s", f.Detail)
		}
	}
	rep, err := v.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(hmPin(plan), hmPin(rep.Done), hmSortFindings); d != "" {
		t.Fatalf("Repair did not do what PlanRepair said (-plan +done):\n%s", d)
	}
	if rep.Count(check.ActionUnlock) != 1 || rep.Count(check.ActionReleaseHome) != 1 || rep.Count(check.ActionFreeEntry) != 1 || len(rep.DeadPeers) != 1 {
		t.Fatalf("repair of the killed writer: %+v", rep)
	}
	if rep := v.Check(); !rep.Clean() {
		t.Fatalf("Check after the repair: %+v", rep.Findings)
	}
	hmCheckExact(t, m, model)
	hmCheckUsable(t, m, model)
}
