package transport

import (
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/shm"
)

// Family is a kind of shared transport file.
type Family uint8

// Transport families.
const (
	FamilyRing    Family = iota + 1 // bounded MPMC ring: Ring
	FamilyDeque                     // work-stealing deque: Deque
	FamilyHashMap                   // fixed-size key/value map: hashmap.Map (package transport/hashmap)
)

var familyNames = [...]string{FamilyRing: "ring", FamilyDeque: "deque", FamilyHashMap: "hashmap"}

func (f Family) String() string {
	if int(f) < len(familyNames) && familyNames[f] != "" {
		return familyNames[f]
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// IsQueue reports whether the family carries push/pop messages (a Queue).
func (f Family) IsQueue() bool { return f == FamilyRing || f == FamilyDeque }

// ShapeKind is the pattern of a workload.
type ShapeKind uint8

// Workload patterns.
const (
	Streaming    ShapeKind = iota + 1 // producers stream messages to consumers, in order
	WorkStealing                      // one producer keeps its newest work; idle workers steal the oldest
	KeyValue                          // readers look values up by key; writers update them
)

// Shape describes a workload, for Pick. Build one with StreamingShape,
// WorkStealingShape or KeyValueShape.
type Shape struct {
	Kind      ShapeKind
	Producers int // Streaming: processes or goroutines pushing
	Consumers int // Streaming: popping; WorkStealing: thieves
	Readers   int // KeyValue
	Writers   int // KeyValue
}

// StreamingShape is a stream from producers to consumers (MPMC).
func StreamingShape(producers, consumers int) Shape {
	return Shape{Kind: Streaming, Producers: producers, Consumers: consumers}
}

// WorkStealingShape is one fast producer whose work is stolen by thieves.
func WorkStealingShape(thieves int) Shape {
	return Shape{Kind: WorkStealing, Producers: 1, Consumers: thieves}
}

// KeyValueShape is a lookup table shared by readers and writers.
func KeyValueShape(readers, writers int) Shape {
	return Shape{Kind: KeyValue, Readers: readers, Writers: writers}
}

func (s Shape) String() string {
	switch s.Kind {
	case Streaming:
		return fmt.Sprintf("streaming %d producers -> %d consumers", s.Producers, s.Consumers)
	case WorkStealing:
		return fmt.Sprintf("work stealing, 1 producer, %d thieves", s.Consumers)
	case KeyValue:
		return fmt.Sprintf("key-value, %d readers, %d writers", s.Readers, s.Writers)
	}
	return fmt.Sprintf("shape(%d)", uint8(s.Kind))
}

// ErrShape marks a workload shape Pick cannot place.
var ErrShape = errors.New("transport: invalid workload shape")

// Pick chooses the transport family for a workload shape, and says why:
//
//   - key-value lookups go to the hash map: the work is addressed by key,
//     not queued, and readers must never wait for writers;
//   - work stealing goes to the deque: its single owner pushes and pops
//     its newest work at the bottom without contention, and thieves
//     take the oldest from the top, which keeps the owner's cache warm
//     and spreads the backlog;
//   - streaming goes to the ring: any number of producers, consumers
//     served in order (FIFO), and a held lease never stalls producers
//     (they pass it), which a deque's owner cannot do.
//
// A streaming shape with more than one producer can never be a deque
// (one owner pushes); a work-stealing shape is always one producer.
// Counts below zero, or a streaming shape without producers or consumers,
// are ErrShape.
func Pick(s Shape) (Family, string, error) {
	switch s.Kind {
	case KeyValue:
		if s.Readers < 0 || s.Writers < 0 || s.Readers+s.Writers == 0 {
			return 0, "", fmt.Errorf("%w: %v", ErrShape, s)
		}
		return FamilyHashMap, "lookups by key: a hash map with lock-free readers", nil
	case WorkStealing:
		if s.Consumers < 0 || s.Producers != 1 {
			return 0, "", fmt.Errorf("%w: %v", ErrShape, s)
		}
		return FamilyDeque, "one producer keeps its newest work, thieves steal the oldest: a work-stealing deque", nil
	case Streaming:
		if s.Producers < 1 || s.Consumers < 1 {
			return 0, "", fmt.Errorf("%w: %v", ErrShape, s)
		}
		return FamilyRing, "an ordered stream, any number of producers: the MPMC ring", nil
	}
	return 0, "", fmt.Errorf("%w: %v", ErrShape, s)
}

// OpenQueue opens the file at path as a Queue of family f, creating it
// with cfg if it does not exist. A deque is owned by whoever created it;
// one opened here is adopted if it has no live owner (a process that
// finds a live owner gets a thief's handle). The hash map is not a queue:
// ErrNotQueue.
func OpenQueue(f Family, path string, cfg RingConfig, opts ...shm.Option) (Queue, bool, error) {
	switch f {
	case FamilyRing:
		return OpenOrCreateRing(path, cfg, opts...)
	case FamilyDeque:
		d, created, err := OpenOrCreateDeque(path, cfg, opts...)
		if err != nil || created {
			return d, created, err
		}
		if _, err := d.Adopt(); err != nil && !errors.Is(err, ErrOwnerAlive) {
			d.Close()
			return nil, false, err
		}
		return d, false, nil
	}
	return nil, false, fmt.Errorf("%w: %s: %v", ErrNotQueue, path, f)
}

// ErrNotQueue marks a family that does not carry push/pop messages.
var ErrNotQueue = errors.New("transport: not a push/pop transport")
