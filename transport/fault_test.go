package transport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Files truncated or holed under the library (issue 15, item 3): opens,
// attaches, slow paths and blocked calls return errors instead of dying
// of SIGBUS. The per-message fast paths are not guarded.

func skipUnderRace(t *testing.T) {
	t.Helper()
	if proctest.RaceEnabled {
		t.Skip("an atomic that faults inside the race runtime cannot be recovered: run without -race")
	}
}

// closedRing creates a ring at a fresh path with one message in it, and
// closes it.
func closedRing(t *testing.T, capacity uint64) string {
	t.Helper()
	r, err := CreateRing(ringPath(t), RingConfig{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.TryPush([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	p := r.Path()
	r.Close()
	return p
}

// unusable is the documented errors of a file that cannot be used.
var unusable = []error{shm.ErrFault, shm.ErrTruncated, shm.ErrSizeMismatch, shm.ErrSparse, shm.ErrNotReady,
	layout.ErrBadMagic, layout.ErrChecksum, layout.ErrTooShort, layout.ErrInvalid, layout.ErrGeometry, ErrCorrupt}

func whichUnusable(err error) string {
	for _, u := range unusable {
		if errors.Is(err, u) {
			return strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(u.Error(), "shm: "), "layout: "), "transport: ")
		}
	}
	return ""
}

// TestAttachWhileTruncated: a child truncates the ring and restores it in
// a loop while this process opens and attaches to it a fixed number of
// times (ring and read-only view; the deque the same). No attach may
// crash; every failure names the file and says it is unusable.
func TestAttachWhileTruncated(t *testing.T) {
	skipUnderRace(t)
	for _, kind := range []string{"ring", "deque"} {
		t.Run(kind, func(t *testing.T) {
			var p string
			var open [2]func() error
			if kind == "ring" {
				p = closedRing(t, 1024)
				open[0] = func() error { r, err := OpenRing(p, shm.WithReadyTimeout(0)); closeIf(r, err); return err }
				open[1] = func() error { r, err := OpenRingReadOnly(p, shm.WithReadyTimeout(0)); closeIf(r, err); return err }
			} else {
				d, err := CreateDeque(ringPath(t), DequeConfig{Capacity: 1024})
				if err != nil {
					t.Fatal(err)
				}
				p = d.Path()
				d.Close()
				open[0] = func() error { d, err := OpenDeque(p, shm.WithReadyTimeout(0)); closeIf(d, err); return err }
				open[1] = func() error { d, err := OpenDequeReadOnly(p, shm.WithReadyTimeout(0)); closeIf(d, err); return err }
			}
			proctest.StartTruncator(t, ringHelper.Test, p)
			const opens = 1500
			seen := map[string]int{}
			for i := 0; i < opens; i++ {
				err := open[i%2]()
				if err == nil {
					seen["ok"]++
					continue
				}
				w := whichUnusable(err)
				if w == "" || !strings.Contains(err.Error(), p) {
					t.Fatalf("open %d: %v: not a documented error naming the file", i, err)
				}
				seen[w]++
			}
			t.Logf("%d opens: %v", opens, seen)
		})
	}
}

func closeIf[T interface{ Close() error }](h T, err error) {
	if err == nil {
		h.Close()
	}
}

// TestSparseRingOpens: a valid ring copied sparse is refused by read-only
// opens (ErrSparse) and filled by attaching ones, which then find its
// message.
func TestSparseRingOpens(t *testing.T) {
	src := closedRing(t, 1024)
	dst := ringPath(t)
	proctest.SparseCopy(t, src, dst)
	if _, err := OpenRingReadOnly(dst); !errors.Is(err, shm.ErrSparse) || !strings.Contains(err.Error(), dst) {
		t.Fatalf("read-only: %v", err)
	}
	r, err := OpenRing(dst)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	defer r.Close()
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "kept" {
		t.Fatalf("pop: %q, %v", buf[:n], err)
	}
	if err := r.CheckFile(); err != nil {
		t.Fatal(err)
	}
}

// TestSparseOnFullTmpfs: a sparse copy of a ring and of a deque on a full
// tmpfs: OpenRing and OpenDeque fail with ErrSparse and ErrNoSpace (they
// died of SIGBUS inside attach), read-only opens with ErrSparse. Needs
// root to mount a small tmpfs.
func TestSparseOnFullTmpfs(t *testing.T) {
	dir := proctest.SmallTmpfs(t, "256k")
	ring := filepath.Join(dir, "ring")
	proctest.SparseCopy(t, closedRing(t, 4096), ring)
	d, err := CreateDeque(ringPath(t), DequeConfig{Capacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	deque := filepath.Join(dir, "deque")
	proctest.SparseCopy(t, d.Path(), deque)
	proctest.FillFilesystem(t, dir)
	for name, open := range map[string]func() error{
		"OpenRing":          func() error { r, err := OpenRing(ring); closeIf(r, err); return err },
		"OpenDeque":         func() error { d, err := OpenDeque(deque); closeIf(d, err); return err },
		"OpenRingReadOnly":  func() error { r, err := OpenRingReadOnly(ring); closeIf(r, err); return err },
		"OpenDequeReadOnly": func() error { d, err := OpenDequeReadOnly(deque); closeIf(d, err); return err },
	} {
		err := open()
		if !errors.Is(err, shm.ErrSparse) || (!strings.HasSuffix(name, "ReadOnly") && !errors.Is(err, shm.ErrNoSpace)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBlockedClaimNoticesTruncation: a consumer blocked on an empty ring
// whose file is truncated under it returns ErrTruncated (it waited until
// its context ended, and then died of SIGBUS waking up), and Close after
// that returns instead of crashing.
func TestBlockedClaimNoticesTruncation(t *testing.T) {
	skipUnderRace(t)
	r := newRing(t, RingConfig{Capacity: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := r.Claim(ctx)
		got <- err
	}()
	for r.Counters().EmptyHits == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // asleep on the futex by now
	if err := os.Truncate(r.Path(), 0); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var err error
	select {
	case err = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Claim still blocked 10 s after its file was truncated")
	}
	if !errors.Is(err, shm.ErrTruncated) || !strings.Contains(err.Error(), r.Path()) {
		t.Fatalf("Claim: %v", err)
	}
	t.Logf("Claim returned after %v: %v", time.Since(began).Round(time.Millisecond), err)
	if err := r.Close(); !errors.Is(err, shm.ErrFault) {
		t.Fatalf("Close of a truncated ring: %v", err)
	}
}

// TestSlowPathsAfterTruncation: Check, Scan and Repair of a ring and a
// deque whose file was truncated under them report a fault (Check is not
// Clean) instead of crashing.
func TestSlowPathsAfterTruncation(t *testing.T) {
	skipUnderRace(t)
	r := newRing(t, RingConfig{Capacity: 1024})
	d := newDeque(t, DequeConfig{Capacity: 1024})
	for _, p := range []string{r.Path(), d.Path()} {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	fault := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, shm.ErrFault) || !errors.Is(err, shm.ErrTruncated) {
			t.Errorf("%s: %v", what, err)
		}
	}
	cr := r.Check()
	fault("ring Check", cr.Fault)
	if cr.Clean() {
		t.Error("a faulted Check is Clean")
	}
	fault("ring Scan", r.Scan().Fault)
	_, err := r.Repair()
	fault("ring Repair", err)
	fault("deque Check", d.Check().Fault)
	fault("deque Scan", d.Scan().Fault)
	_, err = d.Repair()
	fault("deque Repair", err)
	if err := r.CheckFile(); !errors.Is(err, shm.ErrTruncated) {
		t.Errorf("ring CheckFile: %v", err)
	}
}
