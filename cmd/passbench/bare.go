package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/bareref"
	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// `passbench bare` is the bare loop: the shmkit ring and its references in
// the smallest loop that passes messages between two processes, so that
// what is measured is the queue and not passbench. 56-byte messages in
// 64-byte slots, 1024 slots, one producer and one consumer process that
// spin on the non-blocking calls (yielding to the Go scheduler only after
// spinLimit failed tries in a row); per message, nothing but the call and
// the store of a sequence number into the message. No clock reads,
// checksums or histograms: the consumer counts, each side reads the clock
// once before and once after its loop, and after the loop the consumer
// checks that the last message it got was the last one sent. Round trips
// read the clock once per round, into an array allocated before the loop.
//
// The bare ring (internal/bareref) is a reference only: a Vyukov ring
// without any crash safety, not for use.

// bareFormat is the JSON format of `passbench bare`.
const bareFormat = "passbench.bare/1"

// The bare loop's geometry: what the goals are stated for.
const (
	barePayload  = 56
	bareSlotSize = 64
	bareSlots    = 1024
)

// Defaults of `passbench bare`.
const (
	defaultBareMessages       = 10_000_000
	defaultBareSocketMessages = 400_000
	defaultBareRounds         = 200_000
	defaultBareRepeat         = 5
	defaultBareBatch          = 32
	maxBareBatch              = 1024
)

// Rows of the bare loop, by their JSON id.
const (
	bareRing      = "ring"
	bareRingBatch = "ring-batch"
	bareRingLoan  = "ring-loan"
	bareRef       = "bare"
	bareRefBatch  = "bare-batch"
	bareRefLocked = "bare-locked"
	bareChan      = "chan"
	bareUDS       = "uds"
	bareRingRTT   = "ring-rtt"
	bareRefRTT    = "bare-rtt"
	barePingPong  = "pingpong"
)

// bareLabelRef is how every table names the reference ring.
const bareLabelRef = "bare ring (reference, no crash safety, not for use)"

// bareRow is one row of the bare loop.
type bareRow struct {
	ID     string
	RTT    bool
	Socket bool // counts --socket-messages, not --messages
	Label  func(s *bareSpec) string
	About  string
}

func fixed(l string) func(*bareSpec) string { return func(*bareSpec) string { return l } }

var bareRows = []bareRow{
	{ID: bareRing, Label: fixed("shmkit ring, TryPush / TryPop"),
		About: "transport.Ring: one TryPush per message, one TryPop into a 56-byte buffer"},
	{ID: bareRingBatch, Label: func(s *bareSpec) string { return fmt.Sprintf("shmkit ring, batches of %d", s.Batch) },
		About: "transport.Ring: TryPushBatch of --batch messages (the rest of a batch again when only part fitted), TryPopBatch into --batch buffers"},
	{ID: bareRingLoan, Label: fixed("shmkit ring, TryLoan/Publish → TryClaim/Ack"),
		About: "transport.Ring zero-copy both ways: the producer copies the message into a loan's Data in place and publishes it, the consumer leases it, reads its sequence number in place and acks"},
	{ID: bareRef, Label: fixed(bareLabelRef),
		About: "internal/bareref: a minimal Vyukov ring in a region file, one CAS and one store per side; no owner stamps, no repair: a process killed mid-call wedges it for good"},
	{ID: bareRefBatch, Label: func(s *bareSpec) string { return fmt.Sprintf("bare ring, batches of %d (reference)", s.Batch) },
		About: "internal/bareref's batch calls: one tail CAS for the run of free positions and a plain store per slot, one head CAS for the run of published ones; the most a batch can gain without crash safety"},
	{ID: bareRefLocked, Label: fixed("bare ring + shmkit's locked instructions (reference)"),
		About: "internal/bareref's stamped calls: the reference with the CAS on the slot word before the tail or head CAS and the counter add that shmkit's ring makes per message, and nothing else of shmkit's; the floor of a slot-word design with crash safety"},
	{ID: bareChan, Label: fixed("Go buffered channel, 2 goroutines"),
		About: "a chan [56]byte with 1024 slots between two goroutines of one process (not locked to threads)"},
	{ID: bareUDS, Socket: true, Label: fixed("Unix socket, one message per syscall"),
		About: "one write(2) and one read(2) of 56 bytes on a blocking AF_UNIX SOCK_SEQPACKET socket pair"},
	{ID: bareRingRTT, RTT: true, Label: fixed("shmkit ring round trip"),
		About: "two transport.Rings, one each way; each side pushes with TryPush and spins on TryPop; one message in flight"},
	{ID: bareRefRTT, RTT: true, Label: fixed("bare ring round trip (reference)"),
		About: "the same with two reference rings"},
	{ID: barePingPong, RTT: true, Label: fixed("cache-line ping-pong, one word"),
		About: "one 32-bit word on its own cache line: one side stores odd values, the other answers with the next even one; no message"},
}

// bareSpec is one `passbench bare` invocation.
type bareSpec struct {
	Messages       int64 // per shared-memory and channel throughput run
	SocketMessages int64 // per socket run
	Rounds         int   // measured round trips per run
	Warmup         int   // unmeasured round trips first
	Repeat         int   // runs of every row, interleaved
	Batch          int   // messages per batch call
	Timeout        time.Duration
}

func (s *bareSpec) check() error {
	switch {
	case s.Messages < 1 || s.Messages > 1<<40:
		return cliutil.Usage("--messages must be in [1, %d], got %d", int64(1)<<40, s.Messages)
	case s.SocketMessages < 1 || s.SocketMessages > 1<<40:
		return cliutil.Usage("--socket-messages must be in [1, %d], got %d", int64(1)<<40, s.SocketMessages)
	case s.Rounds < 1 || s.Warmup < 0 || s.Rounds+s.Warmup > maxRounds:
		return cliutil.Usage("--rounds must be at least 1 and --warmup not negative, together below %d", maxRounds)
	case s.Repeat < 1 || s.Repeat > 1000:
		return cliutil.Usage("--repeat must be in [1, 1000], got %d", s.Repeat)
	case s.Batch < 1 || s.Batch > maxBareBatch:
		return cliutil.Usage("--batch must be in [1, %d], got %d", maxBareBatch, s.Batch)
	case s.Timeout <= 0:
		return cliutil.Usage("--timeout must be positive, got %v", s.Timeout)
	}
	return nil
}

// BareReport is what `passbench bare --json` prints.
type BareReport struct {
	Envelope
	Payload  int         `json:"payload_bytes"`
	SlotSize int         `json:"slot_bytes"`
	Slots    int         `json:"slots"`
	Batch    int         `json:"batch"`
	Repeat   int         `json:"repeat"`
	Rows     []BareRow   `json:"rows"`
	Runs     []BareRun   `json:"runs"`
	Ratios   []PairRatio `json:"ratios"`
	CPU      CPUUse      `json:"cpu"`
	rows     []*bareRow  // the rows measured, in order
	byRow    map[string][]float64
}

// BareRow summarizes one row's runs.
type BareRow struct {
	ID         string  `json:"id"`
	Label      string  `json:"label"`
	Kind       string  `json:"kind"`               // throughput or rtt
	Messages   int64   `json:"messages,omitempty"` // throughput: per run
	Rounds     int     `json:"rounds,omitempty"`   // rtt: measured rounds per run
	MsgsPerSec *Spread `json:"msgs_per_sec,omitempty"`
	P50Ns      *Spread `json:"p50_ns,omitempty"`
	MeanNs     *Spread `json:"mean_ns,omitempty"`
}

// BareRun is one run of one row.
type BareRun struct {
	Row        string  `json:"row"`
	Round      int     `json:"round"` // 1, 2, ...: the rows take turns
	Messages   int64   `json:"messages"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`     // throughput: messages ÷ seconds; rtt: rounds ÷ seconds
	P50Ns      float64 `json:"p50_ns,omitempty"` // rtt
	MeanNs     float64 `json:"mean_ns,omitempty"`
}

// PairRatio is one row against another, as the median of the rounds'
// ratios (each round's two runs saw the same machine), with its spread.
type PairRatio struct {
	Name  string `json:"name"`
	Ratio Spread `json:"ratio"`
	Goal  string `json:"goal,omitempty"` // e.g. ">= 0.8"
	Met   *bool  `json:"met,omitempty"`  // with a goal: the median meets it
}

// withGoal sets a ratio's goal and whether its median meets it.
func (p PairRatio) withGoal(op string, limit float64) PairRatio {
	p.Goal = fmt.Sprintf("%s %g", op, limit)
	met := p.Ratio.N > 0 && ((op == ">=" && p.Ratio.Median >= limit) || (op == "<=" && p.Ratio.Median <= limit))
	p.Met = &met
	return p
}

// runBare measures every row Repeat times, the rows taking turns.
func runBare(ctx context.Context, s bareSpec, u *ui) (BareReport, error) {
	if err := s.check(); err != nil {
		return BareReport{}, err
	}
	rep := BareReport{Envelope: newEnvelope(bareFormat), Payload: barePayload, SlotSize: bareSlotSize,
		Slots: bareSlots, Batch: s.Batch, Repeat: s.Repeat, byRow: map[string][]float64{}}
	for i := range bareRows {
		rep.rows = append(rep.rows, &bareRows[i])
	}
	var done atomic.Int64
	stop := u.track("bare runs", "runs", int64(s.Repeat*len(rep.rows)), 0, done.Load)
	defer stop()
	before := sampleCPU()
	for round := 1; round <= s.Repeat; round++ {
		for _, row := range rep.rows {
			if u != nil && !u.tty { // on a terminal, the bar says it
				u.stage("run %d/%d, round %d of %d: %s", done.Load()+1, s.Repeat*len(rep.rows), round, s.Repeat, row.Label(&s))
			}
			run, err := runBareRow(ctx, row, &s)
			done.Add(1)
			if err != nil {
				return rep, fmt.Errorf("bare %s, round %d: %w", row.ID, round, err)
			}
			run.Round = round
			rep.Runs = append(rep.Runs, run)
		}
	}
	rep.CPU = cpuUseBetween(before, sampleCPU(), runtime.NumCPU())
	rep.summarize(&s)
	return rep, nil
}

// series returns one figure per round of a row: msgs/s for throughput,
// p50 for round trips.
func (rep *BareReport) series(id string, f func(BareRun) float64) []float64 {
	out := make([]float64, rep.Repeat)
	for i := range out {
		out[i] = math.NaN()
	}
	for _, r := range rep.Runs {
		if r.Row == id && r.Round >= 1 && r.Round <= rep.Repeat {
			out[r.Round-1] = f(r)
		}
	}
	return out
}

func runRate(r BareRun) float64 { return r.MsgsPerSec }
func runP50(r BareRun) float64  { return r.P50Ns }
func runMean(r BareRun) float64 { return r.MeanNs }

// summarize fills Rows and Ratios from Runs.
func (rep *BareReport) summarize(s *bareSpec) {
	rep.Rows = nil
	for _, row := range rep.rows {
		br := BareRow{ID: row.ID, Label: row.Label(s), Kind: kindThroughput}
		if row.RTT {
			br.Kind, br.Rounds = kindRTT, s.Rounds
			p50, mean := spreadOf(rep.series(row.ID, runP50)), spreadOf(rep.series(row.ID, runMean))
			br.P50Ns, br.MeanNs = &p50, &mean
		} else {
			br.Messages = s.Messages
			if row.Socket {
				br.Messages = s.SocketMessages
			}
			r := spreadOf(rep.series(row.ID, runRate))
			br.MsgsPerSec = &r
		}
		rep.Rows = append(rep.Rows, br)
	}
	rep.Ratios = bareRatios(rep, s)
}

// bareRatios are the ratios the ring's goals are stated in (docs/bench.md,
// "The bare loop"), then the others worth knowing.
func bareRatios(rep *BareReport, s *bareSpec) []PairRatio {
	rate := func(id string) []float64 { return rep.series(id, runRate) }
	p50 := func(id string) []float64 { return rep.series(id, runP50) }
	r := func(name string, a, b []float64) PairRatio { return PairRatio{Name: name, Ratio: spreadRatio(a, b)} }
	return []PairRatio{
		r("ring ÷ bare ring", rate(bareRing), rate(bareRef)).withGoal(">=", 0.8),
		r(fmt.Sprintf("ring batches of %d ÷ bare ring", s.Batch), rate(bareRingBatch), rate(bareRef)).withGoal(">=", 2),
		r("ring rtt p50 ÷ ping-pong p50", p50(bareRingRTT), p50(barePingPong)).withGoal("<=", 1.5),
		r("ring ÷ bare ring + locked instructions", rate(bareRing), rate(bareRefLocked)),
		r("bare ring + locked instructions ÷ bare ring", rate(bareRefLocked), rate(bareRef)),
		r(fmt.Sprintf("bare ring batches of %d ÷ bare ring", s.Batch), rate(bareRefBatch), rate(bareRef)),
		r(fmt.Sprintf("ring batches of %d ÷ bare ring batches", s.Batch), rate(bareRingBatch), rate(bareRefBatch)),
		r("ring loans ÷ bare ring", rate(bareRingLoan), rate(bareRef)),
		r("ring ÷ chan", rate(bareRing), rate(bareChan)),
		r("ring ÷ uds", rate(bareRing), rate(bareUDS)),
		r("bare ring ÷ chan", rate(bareRef), rate(bareChan)),
		r("bare ring rtt p50 ÷ ping-pong p50", p50(bareRefRTT), p50(barePingPong)),
		r("ring rtt p50 ÷ bare ring rtt p50", p50(bareRingRTT), p50(bareRefRTT)),
	}
}

// bareJob is what a child of the bare loop is told.
type bareJob struct {
	Row      string `json:"row"`
	Side     int    `json:"side"` // 0: producer or pinger; 1: consumer or echo; chan has side 0 only
	Ctl      string `json:"ctl"`
	Shm      string `json:"shm,omitempty"`  // ring, bare ring region, or ping-pong word region
	Back     string `json:"back,omitempty"` // ring round trip: the ring back
	Messages int64  `json:"messages,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	Rounds   int    `json:"rounds,omitempty"`
	Warmup   int    `json:"warmup,omitempty"`
}

// bareReport is what a child of the bare loop prints.
type bareReport struct {
	Count  int64   `json:"count"` // messages sent or received, or rounds
	Start  int64   `json:"start"` // shm.MonoNow before the loop
	End    int64   `json:"end"`   // ... and after it
	P50Ns  float64 `json:"p50_ns,omitempty"`
	MeanNs float64 `json:"mean_ns,omitempty"`
}

// The bare loop's control file, a KindRegion: the go word, then one ready
// word per side, each on its own cache line.
const (
	bareCtlGo    = layout.HeaderSize
	bareCtlReady = layout.HeaderSize + layout.CacheLine // + side × CacheLine
	bareCtlBody  = 3 * layout.CacheLine
)

// bareRun is the parent's side of one run: the files it made, the
// children it started, and how to undo all of it.
type bareRun struct {
	paths  []string // unlinked once every child has opened them
	closes []func() error
	kids   []*child
}

func (b *bareRun) cleanup() error {
	for _, c := range b.kids {
		if !c.exited() {
			c.kill()
		}
	}
	var errs []error
	for _, p := range b.paths {
		if err := shm.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for i := len(b.closes) - 1; i >= 0; i-- {
		errs = append(errs, b.closes[i]())
	}
	return errors.Join(errs...)
}

// region creates a region file of body bytes.
func (b *bareRun) region(what string, body uint64) (*shm.Region, error) {
	name, err := shmName(what)
	if err != nil {
		return nil, err
	}
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: body}})
	if err != nil {
		return nil, err
	}
	b.paths = append(b.paths, r.Path())
	b.closes = append(b.closes, r.Close)
	return r, nil
}

// ring creates a shmkit ring of the bare loop's geometry.
func (b *bareRun) ring() (string, error) {
	name, err := shmName("bare-ring")
	if err != nil {
		return "", err
	}
	r, err := transport.CreateRing(name, transport.RingConfig{Capacity: bareSlots, SlotSize: bareSlotSize, Participants: 64})
	if err != nil {
		return "", err
	}
	b.paths = append(b.paths, r.Path())
	b.closes = append(b.closes, r.Close)
	return r.Path(), nil
}

// runBareRow performs one run of row: it makes the row's files, starts its
// children, waits until each has opened them, unlinks them, says go, and
// collects the children's reports.
func runBareRow(ctx context.Context, row *bareRow, s *bareSpec) (res BareRun, err error) {
	b := &bareRun{}
	defer func() { err = errors.Join(err, b.cleanup()) }()
	ctl, err := b.region("bare-ctl", bareCtlBody)
	if err != nil {
		return BareRun{}, err
	}
	j := bareJob{Row: row.ID, Ctl: ctl.Path(), Messages: s.Messages, Batch: s.Batch, Rounds: s.Rounds, Warmup: s.Warmup}
	if row.Socket {
		j.Messages = s.SocketMessages
	}
	sides := 2
	var files [2][]*os.File
	switch row.ID {
	case bareRing, bareRingBatch, bareRingLoan:
		j.Shm, err = b.ring()
	case bareRingRTT:
		if j.Shm, err = b.ring(); err == nil {
			j.Back, err = b.ring()
		}
	case bareRef, bareRefBatch, bareRefLocked, bareRefRTT:
		var reg *shm.Region
		if reg, err = b.region("bare-ref", 2*uint64(bareref.Size(bareSlots, bareSlotSize))); err == nil {
			j.Shm = reg.Path()
			err = initBareRefs(reg)
		}
	case barePingPong:
		var reg *shm.Region
		if reg, err = b.region("bare-word", layout.CacheLine); err == nil {
			j.Shm = reg.Path()
		}
	case bareUDS:
		var fds [2]int
		if fds, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0); err == nil {
			for i, fd := range fds {
				f := os.NewFile(uintptr(fd), fmt.Sprintf("uds-%d", i))
				files[i] = []*os.File{f}
				b.closes = append(b.closes, func() error {
					if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
						return err
					}
					return nil
				})
			}
		}
	case bareChan:
		sides = 1
	default:
		err = fmt.Errorf("unknown row %q", row.ID)
	}
	if err != nil {
		return BareRun{}, err
	}
	for side := range sides {
		js := j
		js.Side = side
		c, err := startChild(ctx, roleBare, js, files[side], s.Timeout)
		if err != nil {
			return BareRun{}, err
		}
		b.kids = append(b.kids, c)
	}
	goWord, _ := ctl.Uint32(bareCtlGo)
	for side, c := range b.kids {
		ready, _ := ctl.Uint32(bareCtlReady + uint64(side)*layout.CacheLine)
		if err := awaitBareReady(ctx, ready, c); err != nil {
			return BareRun{}, err
		}
	}
	// Every child has its files open: unlink them, so that nothing is
	// left behind whatever happens next, and close the parent's copies
	// of the sockets, so that a dead peer shows as an error.
	for _, p := range b.paths {
		if err := shm.Remove(p); err != nil {
			return BareRun{}, err
		}
	}
	b.paths = nil
	for _, fs := range files {
		for _, f := range fs {
			f.Close()
		}
	}
	goWord.Store(1)
	if _, err := shm.FutexWake(goWord, -1); err != nil {
		return BareRun{}, err
	}
	reps := make([]bareReport, len(b.kids))
	for i, c := range b.kids {
		select {
		case <-c.done:
		case <-ctx.Done():
			return BareRun{}, context.Cause(ctx)
		}
		if err := c.exitErr(); err != nil {
			return BareRun{}, fmt.Errorf("side %d: %w", i, err)
		}
		if err := json.Unmarshal(c.stdout.Bytes(), &reps[i]); err != nil {
			return BareRun{}, fmt.Errorf("side %d: bad report: %w", i, err)
		}
	}
	return bareResult(row, j, reps)
}

// bareResult turns the children's reports into the run's figures.
func bareResult(row *bareRow, j bareJob, reps []bareReport) (BareRun, error) {
	res := BareRun{Row: row.ID}
	first, last := reps[0], reps[len(reps)-1] // chan: one report
	if row.RTT {
		if first.Count != int64(j.Rounds) {
			return res, fmt.Errorf("pinger made %d rounds, want %d", first.Count, j.Rounds)
		}
		res.Messages, res.P50Ns, res.MeanNs = first.Count, first.P50Ns, first.MeanNs
		res.Seconds = float64(first.End-first.Start) / 1e9
	} else {
		if first.Count != j.Messages || last.Count != j.Messages {
			return res, fmt.Errorf("sent %d, received %d, want %d each", first.Count, last.Count, j.Messages)
		}
		// From the producer's clock read before its loop to the
		// consumer's after its own: the whole run.
		res.Messages, res.Seconds = j.Messages, float64(last.End-first.Start)/1e9
	}
	if res.Seconds <= 0 {
		return res, fmt.Errorf("measured interval %v s is not positive", res.Seconds)
	}
	res.MsgsPerSec = float64(res.Messages) / res.Seconds
	return res, nil
}

// initBareRefs lays out the two reference rings of a bare-ring region:
// the first at the start of the body, the second right after it (the
// round trip's way back; a throughput run uses the first only).
func initBareRefs(reg *shm.Region) error {
	body := reg.Body()
	size := bareref.Size(bareSlots, bareSlotSize)
	for i := range 2 {
		if _, err := bareref.Init(body[i*size:(i+1)*size], bareSlots, bareSlotSize); err != nil {
			return err
		}
	}
	return nil
}

// awaitBareReady waits until a child says it has opened everything.
func awaitBareReady(ctx context.Context, ready *atomic.Uint32, c *child) error {
	for ready.Load() == 0 {
		select {
		case <-c.done:
			return fmt.Errorf("exited before it was ready: %v%s", c.err, c.output())
		default:
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := shm.FutexWait(ready, 0, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return err
		}
	}
	return nil
}
