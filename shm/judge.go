package shm

import "strconv"

// Verdict is what a table learns about a process it recorded.
type Verdict struct {
	Lock    LockState // the entry lock's state (the proof)
	State   ProcState // the pid witness, where it was asked (same pid namespace); 0 otherwise
	Dead    bool      // proven dead: what it left may be repaired
	Unknown bool      // undecided: treated as alive, nothing is repaired
	OtherNS bool      // recorded in another pid namespace: its pid means another process here
	Reason  string    // why, for humans (the evidence, without the verdict: "entry lock released, pid gone")
}

// Holder is what a table recorded about the process holding an entry.
type Holder struct {
	PID      int32
	Start    uint64 // start time, clock ticks since boot (see ProcessID)
	Boot     uint64 // boot tag (BootTag) at registration
	PidNS    uint64 // pid namespace inode (PidNamespace), 0 when unknown
	Complete bool   // start, boot and namespace are written (the entry is past claiming)
}

// ID is the holder's pid and start time.
func (h Holder) ID() ProcessID { return ProcessID{PID: h.PID, Start: h.Start} }

// Where says which process the pid names, for humans: "pid 1 in another
// pid namespace (pid:[4026532...])" when it was recorded elsewhere.
func (h Holder) Where() string {
	s := "pid " + strconv.FormatInt(int64(h.PID), 10)
	if ns := PidNamespace(); h.PidNS != 0 && ns != 0 && h.PidNS != ns {
		s += " in another pid namespace (" + PidNamespaceName(h.PidNS) + ")"
	}
	return s
}

// JudgeEntry decides whether the holder recorded for the entry at
// [off, off+n) of r's file is dead. The proof is the entry lock (see
// LockEntry): a holder always locks its entry before claiming it, so a
// claiming or active entry whose lock nobody holds has no live holder,
// whatever pid namespace it ran in. The pid and start time are a second
// witness where they mean something (the same pid namespace and boot): a
// released lock with the recorded process still running (it is exiting,
// or it is a binary that took no lock) is undecided. A lock that cannot be
// read is undecided too. An undecided verdict is never Dead.
//
// Entries this region holds itself are judged alive (see EntryLock).
func (r *Region) JudgeEntry(off, n uint64, h Holder) Verdict {
	lock, err := r.EntryLock(off, n)
	switch lock {
	case LockHeld:
		v := Verdict{Lock: lock, Reason: "holds its entry lock"}
		if ns := PidNamespace(); h.PidNS != 0 && ns != 0 && h.PidNS != ns {
			v.OtherNS = true
			v.Reason += " (" + h.Where() + ")"
		}
		return v
	case LockUnknown:
		return Verdict{Lock: lock, Unknown: true, Reason: "the entry lock cannot be read: " + err.Error()}
	}
	v := Verdict{Lock: lock}
	if here := BootTag(); h.Complete && h.Boot != 0 && here != 0 && h.Boot != here {
		v.Dead, v.State, v.Reason = true, ProcGone, "recorded in an earlier boot"
		return v
	}
	ns := PidNamespace()
	if h.PidNS != 0 && ns != 0 && h.PidNS != ns {
		v.OtherNS, v.Dead = true, true
		v.Reason = "entry lock released (" + h.Where() + ")"
		return v
	}
	if !h.Complete || h.PidNS == 0 && ns != 0 {
		// Being registered (identity not written yet) or recorded with no
		// namespace: the pid may not be comparable. The lock decides.
		v.Dead, v.Reason = true, "entry lock released"
		return v
	}
	st, perr := h.ID().Status()
	v.State = st
	switch {
	case perr != nil:
		// The lock is the proof; the witness could not be asked.
		v.Dead, v.Reason = true, "entry lock released (pid witness unreadable: "+perr.Error()+")"
	case st.Dead():
		v.Dead, v.Reason = true, "entry lock released, "+pidWitness(st)
	default:
		v.Unknown, v.Reason = true, "entry lock released but "+h.ID().String()+" still runs (exiting?)"
	}
	return v
}

// pidWitness words a dead pid witness.
func pidWitness(st ProcState) string {
	switch st {
	case ProcGone:
		return "pid gone"
	case ProcZombie:
		return "pid a zombie"
	}
	return st.String() // "pid reused"
}
