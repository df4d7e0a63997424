package pass

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

// board is the cancel board (layout kind 7) shared by a submit queue's
// clients and pools: how a submitter's cancellation reaches the worker
// that runs the pass, in whichever process that is.
//
// A request names a token and its submitter's registration (the owner).
// Tokens are never reused (the submit ring's counter), so every write of
// a token entry can be a CAS on the token's value: no ABA across requests.
// Who clears an entry: its owner, when the pass's result arrives or when
// it closes; or anyone who finds the owner's registration gone (sweep).
type board struct {
	reg      *shm.Region
	lay      layout.CancelBoardLayout
	area     shm.Words
	epoch    *atomic.Uint32
	requests *atomic.Uint64
}

// BoardPath is the cancel board of the submit queue at submitPath.
func BoardPath(submitPath string) string { return submitPath + ".cancel" }

func openBoard(submitPath string, entries int) (*board, error) {
	if entries <= 0 {
		entries = layout.CBDefaultEntries
	}
	if entries > layout.CBMaxEntries {
		return nil, fmt.Errorf("%w: cancel board of %d entries, at most %d", heartbeat.ErrInvalidConfig, entries, layout.CBMaxEntries)
	}
	spec := shm.Spec{Kind: layout.KindCancelBoard, Geometry: layout.CancelBoardGeometry(uint32(entries))}
	b, _, err := shm.OpenOrCreateAs(BoardPath(submitPath), spec, newBoard)
	return b, err
}

func newBoard(reg *shm.Region) (*board, error) {
	hdr := reg.Header()
	lay, err := layout.NewCancelBoardLayout(hdr.Geometry)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", layout.ErrGeometry, reg.Path(), err)
	}
	area := shm.Words(reg.Bytes()[hdr.HeaderSize:])
	if uint64(len(area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", layout.ErrGeometry, reg.Path(), len(area), lay.BodySize)
	}
	return &board{reg: reg, lay: lay, area: area, epoch: area.U32(layout.CBOffEpoch), requests: area.U64(layout.CBOffRequests)}, nil
}

func (b *board) close() error { return b.reg.Close() }

func (b *board) owner(i uint64) *atomic.Uint64 {
	return b.area.U64(b.lay.EntryOff(i) + layout.CBEntryOwner)
}
func (b *board) token(i uint64) *atomic.Uint64 {
	return b.area.U64(b.lay.EntryOff(i) + layout.CBEntryToken)
}

func ownerWord(t heartbeat.Ticket) uint64 { return layout.CBOwner{Slot: t.Slot, Gen: t.Gen}.Pack() }

// request posts a cancellation of token on behalf of owner and wakes every
// pool's watcher. False: the board is full.
func (b *board) request(owner heartbeat.Ticket, token uint64) bool {
	// Counted before the entry is taken, uncounted after it is freed: a
	// death in between over-counts (workers scan a little more), never
	// under-counts (workers would skip the scan with a request posted).
	b.requests.Add(1)
	w := ownerWord(owner)
	for i := uint64(0); i < b.lay.Entries; i++ {
		if b.owner(i).CompareAndSwap(0, w) {
			shm.CrashPoint(crashPassBoardAfterClaim)
			b.token(i).Store(token)
			b.epoch.Add(1)
			_, _ = shm.FutexWake(b.epoch, math.MaxInt32)
			return true
		}
	}
	b.requests.Add(math.MaxUint64) // -1
	return false
}

// clear removes owner's request for token (one that is not there is fine).
func (b *board) clear(owner heartbeat.Ticket, token uint64) {
	w := ownerWord(owner)
	for i := uint64(0); i < b.lay.Entries; i++ {
		if b.token(i).Load() == token && b.owner(i).Load() == w {
			b.free(i, token, w)
			return
		}
	}
}

// clearOwner removes every request of owner (a client closing).
func (b *board) clearOwner(owner heartbeat.Ticket) {
	w := ownerWord(owner)
	for i := uint64(0); i < b.lay.Entries; i++ {
		tok := b.token(i).Load() // before the owner, as in sweep
		if b.owner(i).Load() == w {
			b.free(i, tok, w)
		}
	}
}

// sweep frees the entries of owners whose registration has ended (their
// clients closed or were reclaimed after proof of death) and returns how
// many it freed.
func (b *board) sweep(hb *heartbeat.Table) int {
	n := 0
	for i := uint64(0); i < b.lay.Entries; i++ {
		// The token before the owner: a token read before the entry was
		// freed and taken again cannot match the new one (tokens are
		// never reused), so free's CAS on it fails; read after the owner
		// it could be the new request's, and free would wipe it.
		tok := b.token(i).Load()
		w := b.owner(i).Load()
		o, ok := layout.UnpackCBOwner(w)
		if !ok || hb.Holds(heartbeat.Ticket{Slot: o.Slot, Gen: o.Gen}) {
			continue
		}
		if b.free(i, tok, w) {
			n++
		}
	}
	return n
}

// free clears entry i if it still holds token for owner word w: token
// first (a CAS on a value never reused), then the owner, and whoever wins
// the owner's CAS uncounts it.
func (b *board) free(i, token, w uint64) bool {
	if !b.token(i).CompareAndSwap(token, 0) {
		return false // cleared and reused meanwhile
	}
	if !b.owner(i).CompareAndSwap(w, 0) {
		return false
	}
	b.requests.Add(math.MaxUint64)
	return true
}

// has reports whether token is on the board. With no request posted it
// costs one load.
func (b *board) has(token uint64) bool {
	if b.requests.Load() == 0 {
		return false
	}
	for i := uint64(0); i < b.lay.Entries; i++ {
		if b.token(i).Load() == token {
			return true
		}
	}
	return false
}

// each calls fn with every token on the board.
func (b *board) each(fn func(token uint64)) {
	if b.requests.Load() == 0 {
		return
	}
	for i := uint64(0); i < b.lay.Entries; i++ {
		if t := b.token(i).Load(); t != 0 {
			fn(t)
		}
	}
}

// wake bumps the epoch and wakes every watcher (they rescan; a spurious
// wake costs one scan).
func (b *board) wake() {
	b.epoch.Add(1)
	_, _ = shm.FutexWake(b.epoch, math.MaxInt32)
}
