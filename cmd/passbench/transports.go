package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/shmkit/shmkit/transport"
)

// Modes of waiting. Only the ring and the deque have both; the kernel transports and the
// channel always block, and the spin floor always polls.
const (
	modePoll  = "poll"  // busy-poll with non-blocking calls, yielding now and then
	modeBlock = "block" // blocking calls: sleep until the other side acts
)

// transportInfo describes one transport passbench can measure.
type transportInfo struct {
	Name  string
	Modes []string // the first is the default
	About string   // what it does per message: the table in docs/bench.md says the same

	Throughput bool // measurable by `run`
	RTT        bool // measurable by `rtt`
	InProcess  bool // every role is a goroutine of one process (chan)

	Slotted     bool // a file of slots: --capacity a power of two, --slot-size applies (ring, deque)
	Leases      bool // consumers can lease (run --lease, --chaos): Claim, then Ack
	OneProducer bool // one producer only (the deque's owner)

	// DefaultRounds is the rtt rounds per mode when --rounds is not given.
	DefaultRounds map[string]int

	newLane func(laneConfig) (lane, error)                                                   // message transports
	openEnd func(ctx context.Context, c laneConfig, e endSpec, write bool) (endpoint, error) // in a child process
	floor   *floor                                                                           // spin and futex: a raw word, not messages
}

var transports = []*transportInfo{
	{
		Name: "ring", Modes: []string{modePoll, modeBlock}, Throughput: true, RTT: true, Slotted: true, Leases: true,
		About:         "poll: TryPush / TryPop in a loop, with a short pause between failed tries and runtime.Gosched after 64 in a row; block: Push(ctx) / Pop(ctx), which re-try, yield, then sleep on the ring's futex",
		DefaultRounds: map[string]int{modePoll: 100000, modeBlock: 20000},
		newLane:       newRingLane, openEnd: openRingEnd,
	},
	{
		Name: "deque", Modes: []string{modePoll, modeBlock}, Throughput: true, Slotted: true, Leases: true, OneProducer: true,
		About:   "one producer, the deque's owner, pushes at the bottom; consumers are thieves that steal the oldest at the top. poll: TryPush / TrySteal in a loop, backing off as the ring's poll mode does; block: Push(ctx) / Steal(ctx), which re-try, yield, then sleep on the deque's futex",
		newLane: newDequeLane, openEnd: openDequeEnd,
	},
	{
		Name: bareTransport, Modes: []string{modePoll}, Throughput: true, RTT: true, Slotted: true,
		About:         "reference only, no crash safety, not for use: internal/bareref's minimal Vyukov ring (one CAS and one store per side), TryPush / TryPop in a loop with the ring's poll back-off",
		DefaultRounds: map[string]int{modePoll: 100000},
		newLane:       newBareLane, openEnd: openBareEnd,
	},
	{
		Name: "uds", Modes: []string{modeBlock}, Throughput: true, RTT: true,
		About:         "one write(2) and one read(2) of a whole message on a blocking AF_UNIX SOCK_SEQPACKET socket pair",
		DefaultRounds: map[string]int{modeBlock: 20000},
		newLane:       newUDSLane, openEnd: openFDEnd,
	},
	{
		Name: "pipe", Modes: []string{modeBlock}, Throughput: true, RTT: true,
		About:         "one write(2) and one read(2) of a whole message on a blocking pipe (atomic: at most PIPE_BUF bytes)",
		DefaultRounds: map[string]int{modeBlock: 20000},
		newLane:       newPipeLane, openEnd: openFDEnd,
	},
	{
		Name: "chan", Modes: []string{modeBlock}, Throughput: true, InProcess: true,
		About:   "one send and one receive of a [N]byte value on a buffered Go channel, producers and consumers being goroutines of one process",
		newLane: newChanLane,
	},
	{
		Name: "spin", Modes: []string{modePoll}, RTT: true, floor: &floors[0],
		DefaultRounds: map[string]int{modePoll: floors[0].DefaultRounds},
		About:         floors[0].About,
	},
	{
		Name: "futex", Modes: []string{modeBlock}, RTT: true, floor: &floors[1],
		DefaultRounds: map[string]int{modeBlock: floors[1].DefaultRounds},
		About:         floors[1].About,
	},
}

// lookupTransport finds a transport by name.
func lookupTransport(name string) (*transportInfo, error) {
	for _, t := range transports {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown transport %q (have %s)", name, strings.Join(transportNames(nil), ", "))
}

// transportNames lists the transports that pass keep (all if keep is nil).
func transportNames(keep func(*transportInfo) bool) []string {
	var names []string
	for _, t := range transports {
		if keep == nil || keep(t) {
			names = append(names, t.Name)
		}
	}
	return names
}

func canRun(t *transportInfo) bool { return t.Throughput }
func canRTT(t *transportInfo) bool { return t.RTT }

// mode resolves a requested mode ("" for the default) for this transport.
func (t *transportInfo) mode(m string) (string, error) {
	if m == "" {
		return t.Modes[0], nil
	}
	for _, have := range t.Modes {
		if m == have {
			return m, nil
		}
	}
	return "", fmt.Errorf("transport %s has no mode %q (have %s)", t.Name, m, strings.Join(t.Modes, ", "))
}

// laneConfig is what every process needs to know to create or open a lane.
type laneConfig struct {
	Transport     string `json:"transport"`
	Mode          string `json:"mode"`
	Payload       int    `json:"payload"`
	Capacity      int    `json:"capacity"`
	SlotSize      int    `json:"slot_size,omitempty"` // ring, deque: 0 for the smallest that fits Payload
	Participants  int    `json:"participants,omitempty"`
	DeliveryLimit int    `json:"delivery_limit,omitempty"` // ring, deque: 0 for the default
	Batch         int    `json:"batch,omitempty"`          // ring: workers send and receive with batch calls of this many (batch_end.go)
	Loan          bool   `json:"loan,omitempty"`           // ring: producers write each message into a loan in place
}

// slotConfig is the geometry of a ring or deque lane (they share it).
func (c laneConfig) slotConfig() transport.RingConfig {
	slot := uint32(c.SlotSize)
	if slot == 0 {
		slot = transport.SlotSizeFor(c.Payload)
	}
	return transport.RingConfig{
		Capacity:      uint64(c.Capacity),
		SlotSize:      slot,
		Participants:  uint32(max(64, c.Participants)),
		DeliveryLimit: uint32(c.DeliveryLimit),
	}
}

// endSpec tells a child process where one end of a lane is: a ring file's
// path, or the number of an inherited file descriptor.
type endSpec struct {
	Path string `json:"path,omitempty"`
	FD   int    `json:"fd,omitempty"`
}

// A lane carries messages one way. The parent creates it; processes open
// its write end (senders) or its read end (receivers).
type lane interface {
	// share returns what a child process needs to open one end: for a
	// file descriptor, the file it must inherit (the launcher fills in
	// endSpec.FD).
	share(write bool) (endSpec, *os.File, error)
	// open opens one end in this process; the lane keeps ownership.
	open(ctx context.Context, write bool) (endpoint, error)
	// detach is called once every child has opened its end: it unlinks
	// names and closes the parent's copies of ends it does not use, so
	// nothing is left behind and a dead peer shows as EPIPE.
	detach() error
	// capacity is how many messages the lane buffers, or 0 if unknown.
	capacity() int
	close() error
}

// An endpoint is one process's end of a lane. The producer, consumer and
// echo loops are written once against it: transports differ only here.
type endpoint interface {
	send(msg []byte) error        // one whole message
	recv(buf []byte) (int, error) // one whole message; buf is exactly the payload size
	close() error
}
