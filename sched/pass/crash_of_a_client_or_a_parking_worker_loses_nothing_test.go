package pass

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// reclaimDead runs a watchdog scan over the queue's table from the test
// process, as a pool's watchdog would.
func reclaimDead(t *testing.T, f schedFiles) heartbeat.WatchReport {
	t.Helper()
	hb, err := heartbeat.Open(f.hb)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	submit, err := transport.OpenRing(f.submit)
	if err != nil {
		t.Fatal(err)
	}
	defer submit.Close()
	return heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Queues: []heartbeat.Repairable{submit}}).Scan(true)
}

func workerStats(t *testing.T, w *proctest.Child) (orphaned, orphanedResults, cancelled int) {
	t.Helper()
	w.Stop(t)
	line := w.WaitLine(t, "stats")
	if _, err := fmt.Sscanf(line, "stats orphaned=%d orphaned-results=%d cancelled=%d", &orphaned, &orphanedResults, &cancelled); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return
}

// A client killed just after pushing a pass (pass.client.after-push):
// once a watchdog has reclaimed its slot, the worker that claims the pass
// skips it unrun and counts it, and the queue drains.
func TestClientKilledAfterPushIsSkippedOnceReclaimed(t *testing.T) {
	f := newSchedFiles(t)
	c := passHelper.Start(t, "client", append(append(f.env(), "COUNT=1", "LABEL=dead", fmt.Sprintf("CLOSURE=%d", closureEcho)),
		proctest.Arm(crashPassClientAfterPush, 1)...)...)
	c.WaitKilled(t, crashPassClientAfterPush)
	if rep := reclaimDead(t, f); len(rep.Reclaimed) != 1 {
		t.Fatalf("watchdog report %+v", rep)
	}
	w := startWorkers(t, f, 1)[0]
	submit, err := transport.OpenRingReadOnly(f.submit)
	if err != nil {
		t.Fatal(err)
	}
	defer submit.Close()
	eventually(t, "the dead client's pass acked", func() bool { return submit.Counters().Acked == 1 })
	if o, r, _ := workerStats(t, w); o != 1 || r != 0 {
		t.Fatalf("orphaned %d, orphaned results %d; want 1, 0", o, r)
	}
}

// A client killed between taking a cancel-board entry and writing its
// token (pass.board.after-claim) leaves a half-written entry: once its
// slot is reclaimed, the pool's sweep frees the entry, and the closure
// still running for the dead client is cancelled (ErrSubmitterGone).
func TestClientKilledMidCancelRequestIsSweptAndItsRunCancelled(t *testing.T) {
	f := newSchedFiles(t)
	gate := filepath.Join(t.TempDir(), "gate")
	w := startWorkers(t, f, 1, "WATCHDOG=1")[0]
	c := passHelper.Start(t, "canceller", append(append(f.env(), "GATE="+gate), proctest.Arm(crashPassBoardAfterClaim, 1)...)...)
	c.WaitLine(t, "ready")
	w.WaitLine(t, "running c")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.WaitKilled(t, crashPassBoardAfterClaim)
	line := w.WaitLine(t, "saw cancel c")
	if !strings.Contains(line, ErrSubmitterGone.Error()) {
		t.Fatalf("closure's cause: %q", line)
	}
	b, err := openBoard(f.submit, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	eventually(t, "the half-written entry swept", func() bool { return b.owner(0).Load() == 0 })
	if _, r, cn := workerStats(t, w); r != 1 || cn != 0 {
		t.Fatalf("orphaned results %d, cancelled %d; want 1, 0", r, cn)
	}
}

// A worker process killed while it holds a parked result (its client's
// reply ring full: pass.worker.after-park) loses nothing: its passes run
// again in another worker, whose results wait (parked) until the client
// reads again, and the client resolves every pass once with its own
// result. The client is stopped (SIGSTOP) while its ring is filled with
// results it does not await, so that the ring is full when the passes end.
func TestWorkerKilledWhileParkingLosesNothing(t *testing.T) {
	f := newSchedFiles(t)
	gate := filepath.Join(t.TempDir(), "gate")
	doomed := startWorkers(t, f, 1, append([]string{"GATE=" + gate}, proctest.Arm(crashPassWorkerAfterPark, 1)...)...)[0]
	c := passHelper.Start(t, "client", append(f.env(), "COUNT=4", "LABEL=p", "REPLY_CAPACITY=8", fmt.Sprintf("CLOSURE=%d", closureGate))...)
	var slot int
	fmt.Sscanf(c.WaitLine(t, "ready"), "ready %d", &slot)
	c.WaitLine(t, "submitted")
	stopProcess(t, c)
	reply, err := transport.OpenRing(ReplyPath(f.submit, slot))
	if err != nil {
		t.Fatal(err)
	}
	fake := make([]byte, resultHeader)
	encodeResult(fake, 0, StatusOK, nil) // token 0: no pass has it
	filled := 0
	for reply.TryPush(fake) == nil {
		filled++
	}
	reply.Close()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	doomed.WaitKilled(t, crashPassWorkerAfterPark)
	w := startWorkers(t, f, 1, "GATE="+gate, "WATCHDOG=1")[0]
	continueProcess(t, c)
	line := c.WaitLine(t, "done")
	if want := fmt.Sprintf("resolved=4 unmatched=%d", filled); !strings.HasPrefix(line, "done "+want) {
		t.Fatalf("client: %s (want %s)", line, want)
	}
	c.Stop(t)
	w.Stop(t)
}

func stopProcess(t *testing.T, c *proctest.Child) {
	t.Helper()
	if err := c.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Cmd.Process.Signal(syscall.SIGCONT) })
	// kill returns before every thread has stopped: a thread running on
	// the other core went on popping for milliseconds on a loaded machine
	// (it took the ring's fill, and the test waited for a park that never
	// came). Wait until /proc shows every thread stopped.
	for !allThreadsStopped(c.Cmd.Process.Pid) {
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of pid is in the stopped
// state ('T' in /proc/PID/task/TID/stat).
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

func continueProcess(t *testing.T, c *proctest.Child) {
	t.Helper()
	if err := c.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
