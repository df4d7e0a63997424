package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"golang.org/x/sys/unix"
)

// The child side of the participant-table tests (attach recovers dead
// entries, crash-looping consumers, the repairer entry's own death, holders
// in other pid namespaces, inherited descriptors). Each child names the
// file it works on with proctest.PathArg and logs "word value" lines.

var tableHelper = proctest.Helper{Test: "TestParticipantTableHelperProcess", Prefix: "table-"}

// leaseHeldPoint is the crash point a consumer child dies at while it
// holds the lease it just took (a test point: no production code names
// it).
const leaseHeldPoint = "test.lease.processing"

// TestParticipantTableHelperProcess is the child side. Roles (KIND is
// "ring" or "deque" in each name):
//
//	KIND-lease          attach ("attached INDEX", "pid PID"), claim one
//	                    message ("got ID"), then die at leaseHeldPoint, or
//	                    with HOLD=1 print "holding 1" and keep the lease
//	                    until killed
//	deque-own           attach, Adopt ("owner 1"), with CLAIM=1 also lease
//	                    one message ("got ID"), print "holding 1", and keep
//	                    both until killed
//	KIND-attach         attach ("attached INDEX") and exit without Close
//	KIND-repair         Repair through OpenKINDForRepair (ATTACH=1: through
//	                    an attached handle) and log the report (logRepair)
//	KIND-judge          judge entry ENTRY and Check, read-only (logJudge)
//	KIND-hold-repairer  hold the repairer entry and the repair lock, as a
//	                    repair at work does ("holding 1"), until STOP exists
//	ring-hold-lock      attach and hold the repair lock ("holding 1") until
//	                    STOP exists, as an attached repair at work does
//	ring-inherit        attach ("attached INDEX"), lease one message
//	                    ("got ID"), hand the
//	                    file's descriptor to a grandchild (hold-fd, its log
//	                    in GRANDCHILD_LOG; "grandchild PID"), print
//	                    "holding 1" and wait to be killed
//	hold-fd             keep descriptor 3 open until STOP exists
func TestParticipantTableHelperProcess(t *testing.T) { tableHelper.Serve(tableChild) }

func tableChild(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	path := proctest.EnvPath()
	switch role {
	case "ring-lease":
		r, err := OpenRing(path)
		if err != nil {
			return err
		}
		fmt.Printf("attached %d\npid %d\n", r.Participant(), os.Getpid())
		l, err := r.Claim(ctx)
		if err != nil {
			return err
		}
		return holdLease(ctx, l)
	case "deque-lease":
		d, err := OpenDeque(path)
		if err != nil {
			return err
		}
		fmt.Printf("attached %d\npid %d\n", d.Participant(), os.Getpid())
		l, err := d.Claim(ctx)
		if err != nil {
			return err
		}
		return holdLease(ctx, l)
	case "deque-own":
		d, err := OpenDeque(path)
		if err != nil {
			return err
		}
		if _, err := d.Adopt(); err != nil {
			return err
		}
		fmt.Printf("attached %d\nowner 1\n", d.Participant())
		if os.Getenv("CLAIM") == "1" {
			l, err := d.Claim(ctx)
			if err != nil {
				return err
			}
			return holdLease(ctx, l)
		}
		fmt.Println("holding 1")
		<-ctx.Done()
		return errors.New("deque-own: not killed")
	case "ring-attach", "deque-attach":
		var q interface{ Participant() int }
		var err error
		if role == "ring-attach" {
			q, err = OpenRing(path)
		} else {
			q, err = OpenDeque(path)
		}
		if err != nil {
			return err
		}
		fmt.Printf("attached %d\n", q.Participant())
		return nil // keep the entry: exit without Close
	case "ring-repair", "deque-repair":
		var rep check.RepairReport
		var err error
		if role == "ring-repair" {
			var r *Ring
			if os.Getenv("ATTACH") == "1" {
				r, err = OpenRing(path)
			} else {
				r, err = OpenRingForRepair(path)
			}
			if err != nil {
				return err
			}
			rep, err = r.Repair()
		} else {
			var d *Deque
			if os.Getenv("ATTACH") == "1" {
				d, err = OpenDeque(path)
			} else {
				d, err = OpenDequeForRepair(path)
			}
			if err != nil {
				return err
			}
			rep, err = d.Repair()
		}
		logRepair(rep)
		return err
	case "ring-judge", "deque-judge":
		var peers []check.Peer
		var report check.Report
		if role == "ring-judge" {
			r, err := OpenRingReadOnly(path)
			if err != nil {
				return err
			}
			peers, report = r.Peers(), r.Check()
		} else {
			d, err := OpenDequeReadOnly(path)
			if err != nil {
				return err
			}
			peers, report = d.Peers(), d.Check()
			fmt.Printf("owneralive %d\n", b2i(d.Scan().OwnerAlive))
		}
		logJudge(peers[proctest.EnvInt("ENTRY")], report)
		return nil
	case "ring-hold-repairer", "deque-hold-repairer":
		var h *fileHandle
		if role == "ring-hold-repairer" {
			r, err := OpenRingForRepair(path)
			if err != nil {
				return err
			}
			h = &r.fileHandle
		} else {
			d, err := OpenDequeForRepair(path)
			if err != nil {
				return err
			}
			h = &d.fileHandle
		}
		return h.tab.AsRepairer(func() error {
			if _, ok := h.tab.LockRepairFrom(); !ok {
				return errors.New("hold-repairer: repair lock busy")
			}
			defer h.tab.UnlockRepair()
			fmt.Println("holding 1")
			return waitForFile(ctx, os.Getenv("STOP"))
		})
	case "ring-hold-lock":
		r, err := OpenRing(path)
		if err != nil {
			return err
		}
		if _, ok := r.tab.LockRepairFrom(); !ok {
			return errors.New("hold-lock: repair lock busy")
		}
		fmt.Println("holding 1")
		err = waitForFile(ctx, os.Getenv("STOP"))
		r.tab.UnlockRepair()
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		return err
	case "ring-inherit":
		r, err := OpenRing(path)
		if err != nil {
			return err
		}
		l, err := r.Claim(ctx)
		if err != nil {
			return err
		}
		id, err := decodeMsg(l.Data())
		if err != nil {
			return err
		}
		f, err := r.reg.InheritableFile()
		if err != nil {
			return err
		}
		logf, err := os.Create(os.Getenv("GRANDCHILD_LOG"))
		if err != nil {
			return err
		}
		// Not a proctest child: it must outlive this process, so its
		// output goes to a file (a pipe of ours would keep our own Wait
		// in the test process from returning), and its deadline is its
		// own -test.timeout.
		gc := exec.Command(os.Args[0], "-test.run=^"+tableHelper.Test+"$", "-test.count=1", "-test.timeout=60s")
		gc.Env = append(os.Environ(), proctest.RoleEnv+"="+tableHelper.Prefix+"hold-fd")
		gc.ExtraFiles = []*os.File{f}
		gc.Stdout, gc.Stderr = logf, logf
		if err := gc.Start(); err != nil {
			return err
		}
		f.Close() // the grandchild has its own copy, as descriptor 3
		fmt.Printf("attached %d\ngot %d\ngrandchild %d\nholding 1\n", r.Participant(), id, gc.Process.Pid)
		<-ctx.Done()
		return errors.New("ring-inherit: not killed")
	case "hold-fd":
		if _, err := unix.FcntlInt(3, unix.F_GETFD, 0); err != nil {
			return fmt.Errorf("hold-fd: descriptor 3: %w", err)
		}
		fmt.Println("holdingfd 1")
		return waitForFile(ctx, os.Getenv("STOP"))
	}
	return fmt.Errorf("unknown role %q", role)
}

// holdLease logs the leased message, then dies at leaseHeldPoint, or with
// HOLD=1 keeps it until killed.
func holdLease(ctx context.Context, l Lease) error {
	id, err := decodeMsg(l.Data())
	if err != nil {
		return err
	}
	fmt.Printf("got %d\n", id)
	if os.Getenv("HOLD") == "1" {
		fmt.Println("holding 1")
		<-ctx.Done()
		return errors.New("holding a lease: not killed")
	}
	shm.CrashPoint(leaseHeldPoint)
	return errors.New("passed " + leaseHeldPoint + ": not armed")
}

// logRepair logs a repair's report: "requeued N" (at the tail or in
// place), "returned N", "deferred N", "freed N" (entries), "freeowner N",
// "deadpeer PID" per participant proven dead and "holder PID" per message
// recovered, naming the process the report blames for it.
func logRepair(rep check.RepairReport) {
	fmt.Printf("requeued %d\nreturned %d\ndeferred %d\nfreed %d\nfreeowner %d\n",
		rep.Count(check.ActionRequeue)+rep.Count(check.ActionRequeueInPlace), rep.Count(check.ActionReturn),
		rep.Count(check.ActionDefer), rep.Count(check.ActionFreeEntry), rep.Count(check.ActionFreeOwner))
	for _, p := range rep.DeadPeers {
		fmt.Printf("deadpeer %d\n", p.ID.PID)
	}
	for _, f := range rep.Done {
		switch f.Action {
		case check.ActionRequeue, check.ActionRequeueInPlace, check.ActionReturn:
			fmt.Printf("holder %d\n", f.OwnerID.PID)
		}
	}
}

// logJudge logs a judge's verdict on one entry ("dead", "unknown",
// "otherns", "lockheld", each 0 or 1, and "recordedpid") and what Check
// says: "orphaned N" (orphaned leases and reads), "deadentries N",
// "deadowner N", and one "where: ..." line for people.
func logJudge(p check.Peer, rep check.Report) {
	fmt.Printf("dead %d\nunknown %d\notherns %d\nlockheld %d\nrecordedpid %d\n",
		b2i(p.Dead), b2i(p.Unknown), b2i(p.OtherNS), b2i(p.Lock == shm.LockHeld), p.ID.PID)
	fmt.Printf("where: %s (%s)\n", p.Where(), p.Reason)
	var orphaned, deadEntries, deadOwner int
	for _, f := range rep.Findings {
		switch f.Problem {
		case check.ProblemOrphanedLease, check.ProblemOrphanedRead:
			orphaned++
		case check.ProblemDeadParticipant:
			deadEntries++
		case check.ProblemDeadOwner:
			deadOwner++
		}
	}
	fmt.Printf("orphaned %d\ndeadentries %d\ndeadowner %d\n", orphaned, deadEntries, deadOwner)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitForFile waits until path exists or ctx ends (an error then).
func waitForFile(ctx context.Context, path string) error {
	if path == "" {
		return errors.New("no STOP file named")
	}
	for !proctest.Exists(path) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never appeared: %w", path, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// waitUntil polls cond until it holds, failing the test after limit: for
// what another process does on its own time (a namespace torn down, a
// grandchild's exit), never to assert how fast.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: never %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTableChild starts a child of tableHelper on path, bounded by
// proctest.DefaultTimeout.
func startTableChild(t testing.TB, path, role string, env ...string) *proctest.Child {
	t.Helper()
	return tableHelper.Start(t, role, append(env, proctest.PathArg(path))...)
}

// runTableChild runs a child of tableHelper on path to a clean exit.
func runTableChild(t testing.TB, path, role string, env ...string) proctest.Log {
	t.Helper()
	return tableHelper.Run(t, role, append(env, proctest.PathArg(path))...).Log()
}

// runTableChildToCrash runs a child of tableHelper on path to its death at
// point (the after-th pass).
func runTableChildToCrash(t testing.TB, path, role, point string, after int, env ...string) *proctest.Child {
	t.Helper()
	return tableHelper.RunToCrash(t, role, point, after, append(env, proctest.PathArg(path))...)
}

// only is the single value logged with word, failing the test unless
// there is exactly one.
func only(t testing.TB, l proctest.Log, word string) uint64 {
	t.Helper()
	if len(l[word]) != 1 {
		t.Fatalf("child logged %q %d times, want once: %v", word, len(l[word]), l)
	}
	return l[word][0]
}
