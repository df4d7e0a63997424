package pass

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// Three client processes submit 1000 passes each to one pool of two
// worker processes, which are SIGKILLed and replaced while the clients
// run. Every client gets back exactly its own results (the client role
// checks each pass's result against its own arguments), none is lost, and
// a pass run twice after a kill resolves once (the second result counts
// as unmatched, never as another pass's).
func TestResultsReachOnlyTheirOwnSubmitterWhileWorkersDie(t *testing.T) {
	f := newSchedFiles(t)
	count := 1000
	if testing.Short() {
		count = 200
	}
	workers := startWorkers(t, f, 2, "WATCHDOG=1")
	var clients []*proctest.Child
	for i := 0; i < 3; i++ {
		c := passHelper.Start(t, "client", append(f.env(), fmt.Sprintf("COUNT=%d", count), fmt.Sprintf("LABEL=c%d", i))...)
		clients = append(clients, c)
	}
	for _, c := range clients {
		c.WaitLine(t, "ready")
	}
	done := func() int {
		n := 0
		for _, c := range clients {
			if out, _ := c.Output(); strings.Contains(out, "done") {
				n++
			}
		}
		return n
	}
	// Kill a worker, replace it, a few times while the clients run (as long
	// as they do: a fast machine may finish first, and then the crash
	// safety is the crash-point tests' to show).
	kills := 0
	for kills < 4 && done() < len(clients) {
		time.Sleep(100 * time.Millisecond)
		victim := workers[kills%len(workers)]
		victim.Kill()
		<-victim.Done()
		workers[kills%len(workers)] = startWorkers(t, f, 1, "WATCHDOG=1")[0]
		kills++
	}
	for _, c := range clients {
		line := c.WaitLine(t, "done")
		if !strings.Contains(line, fmt.Sprintf("resolved=%d ", count)) {
			t.Errorf("client: %s", line)
		}
	}
	t.Logf("%d worker kills", kills)
	for _, c := range clients {
		c.Stop(t)
	}
	for _, w := range workers {
		w.Stop(t)
	}
}

// A client SIGKILLed mid-run stalls nobody: the other two finish, the
// pools' watchdog reclaims the dead client's slot, and the passes it left
// are skipped (Stats.Orphaned) or their results dropped
// (Stats.OrphanedResults) or left in its reply ring: every pass it pushed
// is one of the three, as docs/design.md says.
func TestDeadSubmitterStallsNoOtherAndItsPassesAreAccounted(t *testing.T) {
	f := newSchedFiles(t)
	count := 1000
	if testing.Short() {
		count = 200
	}
	workers := startWorkers(t, f, 2, "WATCHDOG=1")
	var clients []*proctest.Child
	for i := 0; i < 3; i++ {
		c := passHelper.Start(t, "client", append(f.env(), fmt.Sprintf("COUNT=%d", count), fmt.Sprintf("LABEL=c%d", i))...)
		clients = append(clients, c)
	}
	slots := make([]int, len(clients))
	for i, c := range clients {
		fmt.Sscanf(c.WaitLine(t, "ready"), "ready %d", &slots[i])
	}
	victim := clients[0]
	time.Sleep(20 * time.Millisecond)
	victim.Kill()
	<-victim.Done()
	for _, c := range clients[1:] {
		line := c.WaitLine(t, "done")
		if !strings.Contains(line, fmt.Sprintf("resolved=%d unmatched=0", count)) {
			t.Errorf("client: %s", line)
		}
	}
	submit, err := transport.OpenRingReadOnly(f.submit)
	if err != nil {
		t.Fatal(err)
	}
	defer submit.Close()
	// Nothing stalls: the queue drains, the victim's passes included.
	eventually(t, "the submit queue drained", func() bool {
		c := submit.Counters()
		return c.Acked == c.Claimed && c.Pushed == c.Claimed
	})
	for _, c := range clients[1:] {
		c.Stop(t)
	}
	orphaned, orphanedResults := 0, 0
	for _, w := range workers {
		w.Stop(t)
		var a, b, cn int
		line := w.WaitLine(t, "stats")
		if _, err := fmt.Sscanf(line, "stats orphaned=%d orphaned-results=%d cancelled=%d", &a, &b, &cn); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		orphaned, orphanedResults = orphaned+a, orphanedResults+b
	}
	reply, err := transport.OpenRingReadOnly(ReplyPath(f.submit, slots[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Close()
	pushedByVictim := int(submit.Counters().Pushed) - 2*count
	delivered := int(reply.Counters().Pushed)
	t.Logf("victim pushed %d passes: %d results delivered to its ring, %d skipped, %d results dropped", pushedByVictim, delivered, orphaned, orphanedResults)
	if delivered+orphaned+orphanedResults != pushedByVictim {
		t.Fatalf("victim pushed %d passes, accounted for %d delivered + %d skipped + %d dropped", pushedByVictim, delivered, orphaned, orphanedResults)
	}
}
