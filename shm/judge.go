package shm

// Verdict is what a table learns about a process it recorded.
type Verdict struct {
	State  ProcState
	Dead   bool   // proven dead: what it left may be repaired
	Reason string // why, for humans
}

// Judge decides whether a process recorded in a shared table as (pid,
// start, boot tag) is dead. complete is false for a record still being
// written (its start time may be missing): then only a vanished or zombie
// pid proves death. A record from another boot is dead. When liveness
// cannot be read, the process counts as alive: repairs never act on a
// guess.
func Judge(pid int32, start, boot uint64, complete bool) Verdict {
	if !complete {
		_, st, err := LookupProcess(pid)
		if err != nil {
			return Verdict{State: st, Reason: "being registered; liveness unknown: " + err.Error()}
		}
		return Verdict{State: st, Dead: st == ProcGone || st == ProcZombie, Reason: "being registered; pid " + st.String()}
	}
	if here := BootTag(); boot != 0 && here != 0 && boot != here {
		return Verdict{State: ProcGone, Dead: true, Reason: "recorded in an earlier boot"}
	}
	st, err := ProcessID{PID: pid, Start: start}.Status()
	if err != nil {
		return Verdict{State: st, Reason: "liveness unknown, treated as alive: " + err.Error()}
	}
	return Verdict{State: st, Dead: st.Dead(), Reason: st.String()}
}
