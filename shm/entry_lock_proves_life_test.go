package shm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
)

// Entry locks are the proof of life (entrylock.go): a range locked by one
// open file description is seen held by every other (other handles of
// this process, other processes, other pid namespaces), its own handle
// included, and released once the holder's descriptor is gone.

const lockOff, lockLen = layout.HeaderSize + 64, 64

var lockHelper = proctest.Helper{Test: "TestEntryLockHelperProcess", Prefix: "lock-"}

// TestEntryLockHelperProcess: "lock-hold" opens the file, locks the range,
// logs "locked" and sleeps until killed.
func TestEntryLockHelperProcess(t *testing.T) {
	lockHelper.Serve(func(role string) error {
		r, err := Open(proctest.EnvPath(), layout.KindRegion)
		if err != nil {
			return err
		}
		if err := r.LockEntry(lockOff, lockLen); err != nil {
			return err
		}
		fmt.Println("locked", PidNamespace())
		for {
			time.Sleep(time.Hour)
		}
	})
}

func TestEntryLockSeenByEveryOtherHandle(t *testing.T) {
	path := shmPath(t)
	a := mustCreate(t, path)
	b, err := Open(path, layout.KindRegion)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ro, err := Open(path, layout.KindRegion, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	if st, err := b.EntryLock(lockOff, lockLen); st != LockReleased || err != nil {
		t.Fatalf("before locking: %v %v", st, err)
	}
	if err := a.LockEntry(lockOff, lockLen); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Region{"holder": a, "another handle": b, "a read-only handle": ro} {
		if st, err := r.EntryLock(lockOff, lockLen); st != LockHeld || err != nil {
			t.Errorf("%s sees %v %v, want held", name, st, err)
		}
	}
	if err := b.LockEntry(lockOff, lockLen); !errors.Is(err, ErrEntryLocked) {
		t.Errorf("second handle locks a held range: %v", err)
	}
	if err := a.LockEntry(lockOff, lockLen); !errors.Is(err, ErrEntryLocked) {
		t.Errorf("holder locks its range twice: %v", err)
	}
	if err := ro.LockEntry(lockOff+lockLen, lockLen); !errors.Is(err, ErrLockUnsupported) {
		t.Errorf("a read-only handle takes a lock: %v", err)
	}
	// Ranges are independent: the next entry is free.
	if err := b.LockEntry(lockOff+lockLen, lockLen); err != nil {
		t.Errorf("next entry: %v", err)
	}
	if err := a.UnlockEntry(lockOff, lockLen); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.EntryLock(lockOff, lockLen); st != LockReleased {
		t.Errorf("after unlock: %v", st)
	}
	// Closing the holder's descriptor releases what it holds.
	if st, _ := a.EntryLock(lockOff+lockLen, lockLen); st != LockHeld {
		t.Errorf("b's lock seen %v by a", st)
	}
	b.Close()
	if st, _ := a.EntryLock(lockOff+lockLen, lockLen); st != LockReleased {
		t.Errorf("after the holder closed: %v", st)
	}
	// A closed region cannot tell.
	if st, err := b.EntryLock(lockOff, lockLen); st != LockUnknown || err == nil {
		t.Errorf("closed region: %v %v", st, err)
	}
}

// TestEntryLockReleasedWhenTheHolderDies: a holder process is seen
// holding until it is SIGKILLed, then released; the same across a pid
// namespace boundary.
func TestEntryLockReleasedWhenTheHolderDies(t *testing.T) {
	for _, ns := range []bool{false, true} {
		name := "same namespace"
		if ns {
			name = "another pid namespace"
		}
		t.Run(name, func(t *testing.T) {
			path := shmPath(t)
			r := mustCreate(t, path)
			var c *proctest.Child
			if ns {
				c = lockHelper.StartInPidNamespace(t, "hold", proctest.PathArg(path))
			} else {
				c = lockHelper.Start(t, "hold", proctest.PathArg(path))
			}
			line := c.WaitLine(t, "locked ")
			childNS, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "locked ")), 10, 64)
			if err != nil || ns && (childNS == 0 || childNS == PidNamespace()) {
				t.Fatalf("child logged %q: not in a namespace of its own", line)
			}
			// As the child records itself: pid 1 of its namespace.
			holder := Holder{PID: 1, Start: 1, Boot: BootTag(), PidNS: childNS, Complete: true}
			if !ns {
				holder = Holder{PID: int32(c.PID()), Boot: BootTag(), PidNS: PidNamespace(), Complete: true}
				id, _, err := LookupProcess(holder.PID)
				if err != nil {
					t.Fatal(err)
				}
				holder.Start = id.Start
			}
			v := r.JudgeEntry(lockOff, lockLen, holder)
			if v.Dead || v.Unknown || v.Lock != LockHeld {
				t.Fatalf("live holder judged %+v", v)
			}
			if ns && (!v.OtherNS || !strings.Contains(v.Reason, "another pid namespace")) {
				t.Errorf("holder in another namespace: %+v", v)
			}
			c.Kill()
			c.Wait()
			v = r.JudgeEntry(lockOff, lockLen, holder)
			if !v.Dead || v.Lock != LockReleased {
				t.Fatalf("killed holder judged %+v", v)
			}
		})
	}
}

// TestJudgeEntryVerdicts: every row of the verdict table in
// docs/design.md ("Process identity and proof of death").
func TestJudgeEntryVerdicts(t *testing.T) {
	path := shmPath(t)
	judge := mustCreate(t, path)
	holderReg, err := Open(path, layout.KindRegion)
	if err != nil {
		t.Fatal(err)
	}
	defer holderReg.Close()
	const heldOff = lockOff + lockLen
	if err := holderReg.LockEntry(heldOff, lockLen); err != nil {
		t.Fatal(err)
	}
	self := Self()
	here := PidNamespace()
	if here == 0 {
		t.Skip("this process cannot read its pid namespace")
	}
	deadPID := int32(2147483646)
	otherNS := here + 1
	cases := []struct {
		name      string
		off       uint64
		h         Holder
		dead, unk bool
		otherNS   bool
		reason    string
	}{
		{"held, our namespace", heldOff, Holder{PID: self.PID, Start: self.Start, Boot: BootTag(), PidNS: here, Complete: true}, false, false, false, "holds its entry lock"},
		{"held, another namespace, its pid unknown here", heldOff, Holder{PID: 1, Start: 7, Boot: BootTag(), PidNS: otherNS, Complete: true}, false, false, true, "pid 1 in another pid namespace"},
		{"held, pid long gone (a child inherited the descriptor)", heldOff, Holder{PID: deadPID, Start: 1, Boot: BootTag(), PidNS: here, Complete: true}, false, false, false, "holds its entry lock"},
		{"released, another boot", lockOff, Holder{PID: self.PID, Start: self.Start, Boot: BootTag() ^ 1, PidNS: here, Complete: true}, true, false, false, "earlier boot"},
		{"released, another namespace", lockOff, Holder{PID: 1, Start: 7, Boot: BootTag(), PidNS: otherNS, Complete: true}, true, false, true, "another pid namespace"},
		{"released, being registered", lockOff, Holder{PID: self.PID, PidNS: 0, Complete: false}, true, false, false, "lock released"},
		{"released, no namespace recorded", lockOff, Holder{PID: self.PID, Start: self.Start, Boot: BootTag(), Complete: true}, true, false, false, "lock released"},
		{"released, pid gone", lockOff, Holder{PID: deadPID, Start: 1, Boot: BootTag(), PidNS: here, Complete: true}, true, false, false, "pid gone"},
		{"released, pid reused", lockOff, Holder{PID: self.PID, Start: self.Start + 1, Boot: BootTag(), PidNS: here, Complete: true}, true, false, false, "pid reused"},
		{"released, the recorded process still runs", lockOff, Holder{PID: self.PID, Start: self.Start, Boot: BootTag(), PidNS: here, Complete: true}, false, true, false, "still runs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judge.JudgeEntry(c.off, lockLen, c.h)
			if v.Dead != c.dead || v.Unknown != c.unk || v.OtherNS != c.otherNS || !strings.Contains(v.Reason, c.reason) {
				t.Errorf("got %+v, want dead %v unknown %v otherNS %v reason ~%q", v, c.dead, c.unk, c.otherNS, c.reason)
			}
			if v.Dead && v.Unknown {
				t.Errorf("dead and unknown at once: %+v", v)
			}
		})
	}
	// A lock that cannot be read decides nothing.
	closed := mustCreate(t, shmPath(t))
	closed.Close()
	if v := closed.JudgeEntry(lockOff, lockLen, Holder{PID: deadPID, Complete: true}); v.Dead || !v.Unknown {
		t.Errorf("unreadable lock: %+v", v)
	}
}
