package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The JSON formats; each changes only when its fields do.
const (
	runFormat     = "passbench.run/1"     // one Result with the envelope
	compareFormat = "passbench.compare/2" // the default comparison: rows run several times, medians
)

// Kinds of measurement.
const (
	kindThroughput = "throughput" // producers stream to consumers as fast as they can
	kindRTT        = "rtt"        // one message at a time, there and back
)

// Result is one measured run. Latencies are in nanoseconds: for a
// throughput run, one way, from the producer's clock read just before the
// send to the consumer's just after the receive (waiting in the queue
// included); for a round trip, the whole round.
type Result struct {
	Kind         string  `json:"kind"`
	Transport    string  `json:"transport"`
	Mode         string  `json:"mode"`
	Producers    int     `json:"producers"`
	Consumers    int     `json:"consumers"`
	PayloadBytes int     `json:"payload_bytes"`
	Capacity     int     `json:"capacity,omitempty"` // messages the transport buffers, when known
	Messages     int64   `json:"messages"`           // throughput: messages the producers sent; rtt: measured rounds
	Warmup       int     `json:"warmup,omitempty"`   // rtt: unmeasured rounds first
	Seconds      float64 `json:"seconds"`            // measured interval
	MsgsPerSec   float64 `json:"msgs_per_sec"`       // throughput: distinct messages delivered per second; rtt: rounds per second
	Latency      Latency `json:"latency_ns"`
	Lost         int64   `json:"lost"`            // sent but never received
	Duplicated   int64   `json:"duplicated"`      // received more than once (extra copies)
	Corrupt      int64   `json:"corrupt"`         // failed the length, checksum or range checks
	Killed       int     `json:"killed"`          // workers killed on purpose during the run (--chaos)
	Lease        bool    `json:"lease,omitempty"` // consumers leased messages (Claim/Ack) under a watchdog
	Batch        int     `json:"batch,omitempty"` // run --batch: messages per batch call on both sides
	Loan         bool    `json:"loan,omitempty"`  // run --loan: producers wrote each message into a loan in place
	Round        int     `json:"round,omitempty"` // comparison: which turn of the interleaved runs (1, 2, ...)
	Hogs         int     `json:"hogs,omitempty"`  // comparison: CPU hogs running beside (the busy-machine section)

	Ring  *RingStats   `json:"ring,omitempty"`
	Deque *DequeStats  `json:"deque,omitempty"`
	Chaos *ChaosReport `json:"chaos,omitempty"`
	Pass  *PassReport  `json:"pass,omitempty"`

	Hist *hdrhistogram.Histogram `json:"-"`
	why  string                  // the first verification failure, if any
}

// Latency summarizes a latency distribution. Percentiles come from an HDR
// histogram (3 significant digits); min, max and mean are exact.
type Latency struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Min  int64   `json:"min"`
	Mean float64 `json:"mean"`
}

// RingStats are the ring's own counters after a run: how often a side
// found the ring full or empty.
type RingStats struct {
	SlotBytes int    `json:"slot_bytes"`
	FullHits  uint64 `json:"full_hits"`
	EmptyHits uint64 `json:"empty_hits"`
	Requeued  uint64 `json:"requeued,omitempty"` // messages of dead consumers delivered again
	Poisoned  uint64 `json:"poisoned,omitempty"` // messages set aside after too many deliveries
	Burned    uint64 `json:"burned,omitempty"`   // positions producers skipped past held leases
}

// DequeStats are the deque's own counters after a run.
type DequeStats struct {
	SlotBytes   int    `json:"slot_bytes"`
	FullHits    uint64 `json:"full_hits"`              // pushes that found the deque full
	EmptyHits   uint64 `json:"empty_hits"`             // steals or claims that found it empty
	Stolen      uint64 `json:"stolen"`                 // messages thieves stole (copied out, not leased)
	Claimed     uint64 `json:"claimed,omitempty"`      // messages leased (Claim)
	OwnerPopped uint64 `json:"owner_popped,omitempty"` // messages the owner popped back at the bottom (none in a run)
	Returned    uint64 `json:"returned,omitempty"`     // leases handed back (a dead thief's, by Repair) and taken again
	Poisoned    uint64 `json:"poisoned,omitempty"`     // messages set aside after too many deliveries
}

// name is how tables and ratios call the run: "ring/poll", "uds".
func (r *Result) name() string {
	n := r.Transport
	switch r.Transport {
	case "ring", "deque":
		n = r.Transport + "/" + r.Mode
	case bareTransport:
		n = "bare ring (reference, no crash safety)"
	case "futex":
		// Not a floor: ring/block beats it by spinning before it sleeps.
		n = "futex ping-pong (sleeps every round)"
	}
	if r.Batch > 1 {
		n += fmt.Sprintf(" batch %d", r.Batch)
	}
	if r.Loan {
		n += " loan"
	}
	return n
}

// label is name, with the producers × consumers when they are not 1×1:
// how ratios and plots tell two runs of one transport apart.
func (r *Result) label() string {
	if r.Kind == kindThroughput && (r.Producers != 1 || r.Consumers != 1) {
		return fmt.Sprintf("%s %d×%d", r.name(), r.Producers, r.Consumers)
	}
	return r.name()
}

// Envelope says where and when results were measured.
type Envelope struct {
	Format      string  `json:"format"`
	Date        string  `json:"date"` // RFC 3339, UTC
	Machine     Machine `json:"machine"`
	ClockReadNs int64   `json:"clock_read_ns"` // cost of one shm.MonoNow read, included in every latency
}

func newEnvelope(format string) Envelope {
	return Envelope{
		Format:      format,
		Date:        time.Now().UTC().Format(time.RFC3339),
		Machine:     detectMachine(),
		ClockReadNs: clockReadCost(),
	}
}

// RunReport is what `run --json` and `rtt --json` print: one object.
type RunReport struct {
	Envelope
	Result
}

// writeJSON prints v as one indented JSON value.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// histMax is the largest latency the histogram tracks; anything longer (a
// minute-long stall) is recorded as histMax and still counted.
const histMax = int64(time.Minute)

// recorder collects latencies without allocating.
type recorder struct {
	h        *hdrhistogram.Histogram
	min, max int64
	sum      float64
}

func newRecorder() *recorder {
	return &recorder{h: hdrhistogram.New(1, histMax, 3), min: math.MaxInt64}
}

func (r *recorder) record(ns int64) {
	ns = max(1, min(ns, histMax))
	_ = r.h.RecordValue(ns) // cannot fail: ns is within the tracked range
	r.min = min(r.min, ns)
	r.max = max(r.max, ns)
	r.sum += float64(ns)
}

// merge adds what another recorder saw.
func (r *recorder) merge(o *recorder) {
	r.h.Merge(o.h)
	r.min = min(r.min, o.min)
	r.max = max(r.max, o.max)
	r.sum += o.sum
}

// fill puts the distribution into res.
func (r *recorder) fill(res *Result) {
	res.Hist = r.h
	res.Latency = r.latency()
}

// latency summarizes the distribution (all zeros if it is empty).
func (r *recorder) latency() Latency {
	n := r.h.TotalCount()
	if n == 0 {
		return Latency{}
	}
	// The histogram reports the top of a value's bucket; never let a
	// percentile exceed the exact maximum.
	at := func(p float64) int64 { return min(r.h.ValueAtPercentile(p), r.max) }
	return Latency{
		P50: at(50), P90: at(90), P99: at(99), P999: at(99.9),
		Min: r.min, Max: r.max, Mean: r.sum / float64(n),
	}
}

// wire is a recorder as a worker process reports it.
type wireRecorder struct {
	Hist []byte  `json:"hist"` // HDR V2 compressed encoding
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Sum  float64 `json:"sum"`
}

func (r *recorder) wire() (wireRecorder, error) {
	b, err := r.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	return wireRecorder{Hist: b, Min: r.min, Max: r.max, Sum: r.sum}, err
}

func (w wireRecorder) recorder() (*recorder, error) {
	h, err := hdrhistogram.Decode(w.Hist)
	if err != nil {
		return nil, err
	}
	return &recorder{h: h, min: w.Min, max: w.Max, sum: w.Sum}, nil
}
