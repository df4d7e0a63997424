package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Deques (layout.KindDeque, transport.Deque) share the ring's slot words,
// participant table and geometry; what differs is read here: top and
// bottom instead of head and tail, the owner word, the returned state and
// the pending hint. Each command asks fileKind first and takes the
// deque's path for a deque file, the ring's for anything else (whose open
// then says "wrong file kind" for kinds ringctl does not handle).

// fileKind returns the kind of the file at path, read from its header
// through a read-only mapping that is closed again. An error is the open's
// (missing, not a shmkit file, ...), worded as every command words it.
func fileKind(c *cli.Context, path string) (layout.Kind, error) {
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return 0, err
	}
	reg, err := shm.OpenAny(path, append(opts, shm.ReadOnly())...)
	if err != nil {
		return 0, fileErr(path, err)
	}
	defer reg.Close()
	return reg.Header().Kind, nil
}

// openDequeView maps a deque read-only without attaching: for inspectors.
func openDequeView(c *cli.Context, path string) (*transport.Deque, error) {
	return openWith(c, path, transport.OpenDequeReadOnly)
}

// openDequeViewBytes is openDequeView plus the raw mapping, for the words
// the deque's handle does not expose (the owner word, participant control
// words, the repair lock, the pending count); see openWithBytes.
func openDequeViewBytes(c *cli.Context, path string) (*transport.Deque, *shm.Region, error) {
	return openWithBytes(c, path, layout.KindDeque, transport.OpenDequeReadOnly)
}

// openDequeAttached opens a deque read-write and attaches to it as a
// participant, never as its owner (ringctl does not Adopt): it may steal,
// claim, take returned and poisoned messages, and repair.
func openDequeAttached(c *cli.Context, path string) (*transport.Deque, error) {
	return openWith(c, path, transport.OpenDeque)
}

// dequeLayout derives the deque's offsets from its (validated) header.
func dequeLayout(path string, h layout.Header) (layout.RingLayout, error) {
	l, err := layout.NewDequeLayout(h.Geometry)
	if err != nil {
		return l, fileErr(path, fmt.Errorf("%w: %v", layout.ErrGeometry, err))
	}
	return l, nil
}

// dequeLen is the number of messages between top and bottom, as
// Deque.Len computes it (0 when bottom is not above top, or they are more
// than a deque apart).
func dequeLen(c transport.DequeCounters, capacity uint64) uint64 {
	if c.Bottom <= c.Top || c.Bottom-c.Top > capacity {
		return 0
	}
	return c.Bottom - c.Top
}

// roleWord is a decoded role word: a deque's owner word or the repair lock
// of a ring or deque (transport's lockValue: the holder's participant
// index+1 in bits 0-15, its entry's generation in bits 16-39). none when
// the word is 0; corrupt when it names no entry of the table.
type roleWord struct {
	raw     uint64
	index   int
	gen     uint32
	none    bool
	corrupt bool
}

func decodeRole(raw, participants uint64) roleWord {
	o := roleWord{raw: raw, index: int(raw&0xffff) - 1, gen: uint32(raw>>16) & 0xffffff}
	switch stamp := raw & 0xffff; {
	case raw == 0:
		o.none, o.index = true, -1
	case raw>>40 != 0 || stamp == 0 || stamp > participants:
		o.corrupt, o.index = true, -1
	}
	return o
}

// holderGone reports whether the holder a role word names can be replaced:
// its entry is proven dead, or no longer has the generation the word
// records (freed and perhaps taken again since). It reads the entry's
// control word from the mapping: run it under guard.
func (o roleWord) holderGone(peerOff func(uint64) uint64, base uint64, mem []byte, peers []transport.PeerStatus) bool {
	if o.none || o.corrupt || o.index >= len(peers) {
		return false
	}
	return peers[o.index].Dead || layout.UnpackPeer(load64(mem, base+peerOff(uint64(o.index)))).Gen != o.gen
}

// dequeSlotCounts is the number of slots in each class (a deque's
// inspect "states"): the ring's classes and returned.
type dequeSlotCounts struct {
	Free     uint64 `json:"free"`
	Ready    uint64 `json:"ready"`
	Writing  uint64 `json:"writing"`
	Reading  uint64 `json:"reading"`
	Leased   uint64 `json:"leased"`
	Returned uint64 `json:"returned"`
	Orphaned uint64 `json:"orphaned"`
	Poisoned uint64 `json:"poisoned"`
	Corrupt  uint64 `json:"corrupt"`
}

func (n dequeSlotCounts) rows() [][]string {
	names := []string{classFree, classReady, classWriting, classReading, classLeased, classReturned, classOrphaned, classPoisoned, classCorrupt}
	out := [][]string{}
	for i, v := range []uint64{n.Free, n.Ready, n.Writing, n.Reading, n.Leased, n.Returned, n.Orphaned, n.Poisoned, n.Corrupt} {
		out = append(out, []string{names[i], strconv.FormatUint(v, 10)})
	}
	return out
}

// classReturned: a message handed back (Release, a dead consumer), taken
// again before newer ones. Deques only.
const classReturned = "returned"

// countDequeClasses counts the slots of a deque's scan in each class.
func countDequeClasses(slots []transport.SlotReport, capacity uint64) dequeSlotCounts {
	n := dequeSlotCounts{Free: capacity - uint64(len(slots))}
	for _, s := range slots {
		switch classOf(s) {
		case classReady:
			n.Ready++
		case classWriting:
			n.Writing++
		case classReading:
			n.Reading++
		case classLeased:
			n.Leased++
		case classReturned:
			n.Returned++
		case classOrphaned:
			n.Orphaned++
		case classPoisoned:
			n.Poisoned++
		case classCorrupt:
			n.Corrupt++
		default:
			n.Free++
		}
	}
	return n
}

// taker says who holds a deque slot that has an owner stamp: "owner" when
// the stamp is the deque owner's participant (its pop at the bottom, or a
// lease it took at the top), "thief" otherwise; "" for a slot nobody holds.
func taker(s transport.SlotReport, owner roleWord) string {
	switch {
	case s.Owner < 0 || s.Problem == transport.SlotCorrupt:
		return ""
	case !owner.none && !owner.corrupt && s.Owner == owner.index:
		return "owner"
	}
	return "thief"
}
