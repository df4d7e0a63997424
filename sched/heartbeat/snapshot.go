package heartbeat

import (
	"bytes"
	"fmt"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// LeaseInfo is one lease a participant has recorded.
type LeaseInfo struct {
	Ring       uint64 // layout.FileID of the ring
	Slot       uint32
	Lap        uint32
	Deliveries int
	Held       time.Duration // since the claim
}

// Participant is a snapshot of one heartbeat slot, with a liveness verdict.
type Participant struct {
	Slot       int
	State      string // free, claiming, active, reclaiming
	Gen        uint32
	ID         shm.ProcessID
	Boot       uint64 // boot tag recorded at registration (shm.BootTag)
	PidNS      uint64 // pid namespace recorded at registration (shm.PidNamespace), 0 if unknown
	Self       bool   // registered through the Table handle that took this snapshot
	Label      string
	Registered time.Time
	BeatAge    time.Duration // since the last beat (CLOCK_MONOTONIC)
	Leases     []LeaseInfo
	Unstable   bool // a lease record kept changing while it was read
	// HalfWritten are the rings of the lease records that were being
	// written when read (Unstable), as far as the record names one (0:
	// not named yet). For a member proven dead they are final: it died
	// inside RecordLease, and its lease is in that ring.
	HalfWritten []uint64
	LastExit    layout.LastExit
	Verdict     shm.Verdict // for claiming, active and reclaiming slots

	ctl uint64 // the ctl word this snapshot was taken from
}

// Health classifies a snapshot: "free", "dead" (proven), "unknown" (the
// verdict could not decide: treated as alive, never reclaimed), "stale"
// (alive but not beating within stale; stale <= 0 disables it), "alive",
// or "corrupt" for a slot state the format does not define.
func (p Participant) Health(stale time.Duration) string {
	switch {
	case p.State == "free":
		return "free"
	case p.State != "claiming" && p.State != "active" && p.State != "reclaiming":
		return "corrupt"
	case p.Verdict.Dead:
		return "dead"
	case p.Verdict.Unknown:
		return "unknown"
	case p.State == "active" && stale > 0 && p.BeatAge > stale:
		return "stale"
	}
	return "alive"
}

// Holder is what the slot records about its member's process.
func (p Participant) Holder() shm.Holder {
	return shm.Holder{PID: p.ID.PID, Start: p.ID.Start, Boot: p.Boot, PidNS: p.PidNS, Complete: p.State != "claiming"}
}

// Where names the member's process for humans: "pid 1234", or "pid 1 in
// another pid namespace (pid:[4026532...])" for a member registered in
// another pid namespace than this process's, whose pid means another
// process here.
func (p Participant) Where() string { return p.Holder().Where() }

// OtherNamespace reports whether the member registered in another pid
// namespace than this process's (both known and different).
func (p Participant) OtherNamespace() bool {
	ns := shm.PidNamespace()
	return p.PidNS != 0 && ns != 0 && p.PidNS != ns
}

// Snapshot reads slot i. It writes nothing, so inspectors may call it on a
// read-only mapping while the table is in use.
func (h *Table) Snapshot(i int) (Participant, error) {
	if i < 0 || uint64(i) >= h.lay.Capacity {
		return Participant{}, fmt.Errorf("%w: %s: slot %d of %d", ErrInvalidConfig, h.Path(), i, h.lay.Capacity)
	}
	return h.snapshot(uint64(i), shm.MonoNow()), nil
}

// Snapshots reads every slot.
func (h *Table) Snapshots() []Participant {
	now := shm.MonoNow()
	out := make([]Participant, h.lay.Capacity)
	for i := range out {
		out[i] = h.snapshot(uint64(i), now)
	}
	return out
}

func (h *Table) snapshot(i uint64, now int64) Participant {
	base := h.lay.SlotOff(i)
	v := h.ctl(i).Load()
	c := layout.UnpackPeer(v)
	p := Participant{Slot: int(i), State: layout.HBStateName(c.State), Gen: c.Gen, ctl: v,
		LastExit: layout.UnpackLastExit(h.area.U64(base + layout.HBSlotLastExit).Load())}
	if c.State == layout.HBFree {
		return p
	}
	p.ID = shm.ProcessID{PID: int32(c.PID), Start: h.area.U64(base + layout.HBSlotStart).Load()}
	p.Boot = h.area.U64(base + layout.HBSlotBoot).Load()
	p.PidNS = h.area.U64(base + layout.HBSlotPidNS).Load()
	label := h.area[base+layout.HBSlotLabel : base+layout.HBSlotLabel+layout.HBLabelSize]
	if n := bytes.IndexByte(label, 0); n >= 0 {
		label = label[:n]
	}
	p.Label = string(label)
	if ns := int64(h.area.U64(base + layout.HBSlotRegistered).Load()); ns > 0 {
		p.Registered = time.Unix(0, ns)
	}
	if beat := int64(h.area.U64(base + layout.HBSlotBeat).Load()); beat > 0 && beat <= now {
		p.BeatAge = time.Duration(now - beat)
	}
	// Judge first, then read the leases: a member proven dead records
	// nothing more, so what is read after the verdict is all it held.
	// Read before it, a lease recorded just before the member died would
	// be missing, and its slot freed with the lease still out.
	switch c.State {
	case layout.HBClaiming, layout.HBActive, layout.HBReclaiming:
		p.Self = h.own[i].Load()
		p.Verdict = h.judge(i, p)
		if c.State == layout.HBReclaiming {
			// A watchdog proved it dead and is requeueing its work.
			p.Verdict.Dead, p.Verdict.Unknown = true, false
		}
	default:
		p.Verdict = shm.Verdict{Reason: "corrupt state"}
	}
	for j := uint64(0); j < h.lay.Leases; j++ {
		l, ok, stable := h.readLease(i, j, now)
		if !stable {
			p.Unstable = true
			p.HalfWritten = append(p.HalfWritten, h.area.U64(h.lay.LeaseOff(i, j)+layout.HBLeaseRing).Load())
		}
		if ok {
			p.Leases = append(p.Leases, l)
		}
	}
	return p
}

// judge decides whether slot i's member is alive. The proof is the entry
// lock (shm.Region.JudgeEntry): a member locks its slot before claiming it
// and until it has freed it. This handle cannot see its own locks, so the
// slots it registered itself are answered for here, alive.
func (h *Table) judge(i uint64, p Participant) shm.Verdict {
	if h.own[i].Load() {
		return shm.Verdict{Lock: shm.LockHeld, Reason: "registered through this handle"}
	}
	off, n := h.slotLock(i)
	return h.reg.JudgeEntry(off, n, p.Holder())
}

// readLease reads one lease record under its seqlock: a few tries, then
// reported unstable rather than spinning on a writer that may be dead.
func (h *Table) readLease(i, j uint64, now int64) (l LeaseInfo, ok, stable bool) {
	off := h.lay.LeaseOff(i, j)
	ver := h.area.U32(off + layout.HBLeaseVersion)
	for try := 0; try < 8; try++ {
		v1 := ver.Load()
		if v1&1 != 0 {
			continue
		}
		ring := h.area.U64(off + layout.HBLeaseRing).Load()
		pos := h.area.U64(off + layout.HBLeasePos).Load()
		deliveries := h.area.U32(off + layout.HBLeaseDeliveries).Load()
		claimed := int64(h.area.U64(off + layout.HBLeaseClaimed).Load())
		if ver.Load() != v1 {
			continue
		}
		if ring == 0 {
			return l, false, true
		}
		l = LeaseInfo{Ring: ring, Slot: uint32(pos), Lap: uint32(pos >> 32), Deliveries: int(deliveries)}
		if claimed > 0 && claimed <= now {
			l.Held = time.Duration(now - claimed)
		}
		return l, true, true
	}
	return l, false, false
}
