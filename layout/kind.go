package layout

import (
	"errors"
	"fmt"
)

// Kind says what a shmkit file holds. These values are part of the format.
type Kind uint16

// File kinds. A value, once assigned, is never reused for another kind.
const (
	KindRegion      Kind = 1 // an opaque body of Capacity bytes (raw shared words, benchmarks)
	KindRing        Kind = 2 // bounded MPMC ring of fixed-size slots (transport)
	KindDeque       Kind = 3 // work-stealing deque (transport)
	KindHashMap     Kind = 4 // fixed-size key/value map (transport)
	KindHeartbeat   Kind = 5 // heartbeat table of participants (sched/heartbeat)
	KindAllGather   Kind = 6 // all-gather consensus rounds among N processes (sched/gather)
	KindCancelBoard Kind = 7 // cancellation requests of a Pass scheduler's submitters (sched/pass)
)

var kindNames = map[Kind]string{
	KindRegion:      "region",
	KindRing:        "ring",
	KindDeque:       "deque",
	KindHashMap:     "hashmap",
	KindHeartbeat:   "heartbeat",
	KindAllGather:   "allgather",
	KindCancelBoard: "cancelboard",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// Spec describes how one kind uses the common header's geometry and how its
// own area is laid out after the header.
type Spec struct {
	Kind Kind
	// ParamNames names Geometry.Params; an empty name marks a parameter the
	// kind does not use, which must then be zero.
	ParamNames [3]string
	// UsesSlotSize is false for kinds whose SlotSize must be zero.
	UsesSlotSize bool
	// Body validates a geometry and returns the size of the kind's area
	// (everything after the header) and its field table, with offsets
	// relative to the start of that area. It must reject geometry it cannot
	// lay out rather than wrap around.
	Body func(g Geometry) (size uint64, m Map, err error)
}

// BodySize validates g for this kind and returns the size of its area.
func (s *Spec) BodySize(g Geometry) (uint64, error) {
	if !s.UsesSlotSize && g.SlotSize != 0 {
		return 0, fmt.Errorf("slot size %d must be 0", g.SlotSize)
	}
	for i, name := range s.ParamNames {
		if name == "" && g.Params[i] != 0 {
			return 0, fmt.Errorf("param%d = %d must be 0", i, g.Params[i])
		}
	}
	size, _, err := s.Body(g)
	return size, err
}

var specs = map[Kind]*Spec{}

// register is called from each kind's file at init.
func register(s *Spec) {
	if _, dup := specs[s.Kind]; dup {
		panic("layout: kind registered twice: " + s.Kind.String())
	}
	specs[s.Kind] = s
}

// SpecOf returns the spec of a kind, or ErrUnknownKind.
func SpecOf(k Kind) (*Spec, error) {
	s, ok := specs[k]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownKind, uint16(k))
	}
	return s, nil
}

// Region: an opaque body of Capacity bytes, a multiple of the cache line.
func init() {
	register(&Spec{
		Kind: KindRegion,
		Body: func(g Geometry) (uint64, Map, error) {
			if g.Capacity == 0 || g.Capacity%CacheLine != 0 || g.Capacity > MaxFileSize-HeaderSize {
				return 0, Map{}, errors.New("region size must be a non-zero multiple of 64")
			}
			return g.Capacity, Map{Fields: []Field{{Name: "region.body", Offset: 0, Size: g.Capacity, Meaning: "opaque bytes owned by the user"}}}, nil
		},
	})
}
