package transport

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The participant table records every process attached to a ring (pid,
// start time, boot), so that owner stamps in slot words can be proven dead
// from the ring file alone, after every process is gone.

func bootTag() uint64 {
	id, err := shm.BootID()
	if err != nil {
		return 0
	}
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

type peerEntry struct {
	ctl, start, boot, attached *atomic.Uint64
}

func (r *Ring) peer(i uint64) peerEntry {
	off := r.lay.ParticipantOff(i)
	u64 := func(o uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.area[off+o])) }
	return peerEntry{ctl: u64(0), start: u64(8), boot: u64(16), attached: u64(24)}
}

// attach takes a free participant entry. When the table is full it reclaims
// the entries of dead processes (a repair pass) and tries once more.
func (r *Ring) attach() error {
	for attempt := 0; attempt < 2; attempt++ {
		if r.tryAttach() {
			return nil
		}
		if _, err := r.Repair(); err != nil && attempt == 0 {
			return fmt.Errorf("%w: %s: %d entries: %v", ErrTooManyPeers, r.Path(), r.lay.Participants, err)
		}
	}
	return fmt.Errorf("%w: %s: all %d entries belong to live processes", ErrTooManyPeers, r.Path(), r.lay.Participants)
}

func (r *Ring) tryAttach() bool {
	self := shm.Self()
	for i := uint64(0); i < r.lay.Participants; i++ {
		e := r.peer(i)
		v := e.ctl.Load()
		c := layout.UnpackPeer(v)
		if c.State != layout.PeerFree {
			continue
		}
		claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: c.Gen, PID: uint32(self.PID)}.Pack()
		if !e.ctl.CompareAndSwap(v, claiming) {
			continue
		}
		e.start.Store(self.Start)
		e.boot.Store(r.boot)
		e.attached.Store(uint64(time.Now().UnixNano()))
		shm.CrashPoint("ring.attach.after-claim-entry")
		active := layout.PeerCtl{State: layout.PeerActive, Gen: c.Gen, PID: uint32(self.PID)}.Pack()
		if !e.ctl.CompareAndSwap(claiming, active) {
			// Only a repairer that proved our pid gone could change it:
			// impossible while we run. Treat as lost and keep looking.
			continue
		}
		r.self, r.selfCtl = uint16(i+1), active
		return true
	}
	return false
}

// detach hands this participant's leases back to the ring and frees its
// entry. Slots it is writing or reading cannot exist: Close comes after
// every other call has returned.
func (r *Ring) detach() error {
	me := r.self
	var firstErr error
	for i := uint64(0); i < r.lay.Capacity; i++ {
		w := r.slotWord(i)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != me || sw.Validate(&r.lay) != nil {
			continue
		}
		if _, err := r.recoverSlot(i, raw, sw); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	e := r.peer(uint64(me - 1))
	c := layout.UnpackPeer(r.selfCtl)
	free := layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}.Pack()
	e.ctl.CompareAndSwap(r.selfCtl, free)
	r.self = 0
	return firstErr
}

// PeerStatus says what the ring file knows of one participant entry.
type PeerStatus struct {
	Index    int
	State    string // free, claiming, active, dead
	ID       shm.ProcessID
	Attached time.Time
	Proc     shm.ProcState // liveness of ID, for claiming/active/dead entries
	Dead     bool          // proven dead: the entry's slots may be repaired
	Reason   string        // why it is judged dead or alive
	Self     bool          // this handle
}

// peerStatus judges entry i. It acts on nothing; a dead verdict is a proof
// (pid gone, zombie, pid reused, or a different boot), never a timeout.
func (r *Ring) peerStatus(i uint64) (PeerStatus, uint64) {
	e := r.peer(i)
	v := e.ctl.Load()
	c := layout.UnpackPeer(v)
	ps := PeerStatus{Index: int(i), State: layout.PeerStateName(c.State), ID: shm.ProcessID{PID: int32(c.PID), Start: e.start.Load()}}
	if ns := e.attached.Load(); ns != 0 {
		ps.Attached = time.Unix(0, int64(ns))
	}
	ps.Self = r.self == uint16(i+1)
	switch c.State {
	case layout.PeerFree:
		return ps, v
	case layout.PeerClaiming:
		// Start time may not be written yet: only a pid that no longer
		// exists proves the claimer dead.
		_, st, err := shm.LookupProcess(int32(c.PID))
		ps.Proc = st
		ps.Dead = err == nil && (st == shm.ProcGone || st == shm.ProcZombie)
		ps.Reason = "claiming: pid " + st.String()
		return ps, v
	case layout.PeerActive, layout.PeerDead:
	default:
		ps.Reason = "corrupt state"
		return ps, v
	}
	if b := e.boot.Load(); b != 0 && r.boot != 0 && b != r.boot {
		ps.Dead, ps.Proc, ps.Reason = true, shm.ProcGone, "attached in an earlier boot"
		return ps, v
	}
	st, err := ps.ID.Status()
	ps.Proc = st
	switch {
	case err != nil:
		ps.Reason = "liveness unknown, treated as alive: " + err.Error()
	case st.Dead():
		ps.Dead, ps.Reason = true, st.String()
	default:
		ps.Reason = st.String()
	}
	if c.State == layout.PeerDead {
		ps.Dead = true // a repair already proved it; finishing is idempotent
	}
	return ps, v
}

// Peers reports every participant entry.
func (r *Ring) Peers() []PeerStatus {
	out := make([]PeerStatus, r.lay.Participants)
	for i := range out {
		out[i], _ = r.peerStatus(uint64(i))
	}
	return out
}
