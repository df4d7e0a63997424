package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"

	"github.com/shmkit/shmkit/sched/pass"
)

// Worker roles.
const (
	roleProducer = "producer" // sends its share of the messages
	roleConsumer = "consumer" // receives and verifies until an end marker
	roleEcho     = "echo"     // sends back every message (the far side of rtt)
)

// job is everything a worker needs; a worker process gets it as JSON.
type job struct {
	Role        string     `json:"role"`
	Index       int        `json:"index"` // line in the control file
	ID          int        `json:"id"`    // producer id, or consumer number
	Lane        laneConfig `json:"lane"`
	Producers   int        `json:"producers"`              // valid producer ids are [0, Producers)
	PerProducer []int64    `json:"per_producer,omitempty"` // messages each producer sends; nil in a timed run
	Workers     int        `json:"workers"`                // lines in the control file
	Control     string     `json:"control"`                // control file path
	Tx          endSpec    `json:"tx"`                     // where a producer or echo sends
	Rx          endSpec    `json:"rx"`                     // where a consumer or echo receives
	Record      string     `json:"record,omitempty"`       // consumer: file to list received messages in
	Corrupt     *corruptAt `json:"corrupt,omitempty"`      // tests only

	// Leased consumption (run --lease or --chaos, ring and deque):
	// consumers Claim and Ack, show their leases in the heartbeat table
	// (ring only), and mark what they receive in the shared bitmap.
	Lease     bool   `json:"lease,omitempty"`
	Heartbeat string `json:"heartbeat,omitempty"` // heartbeat table path; none for a deque
	Seen      string `json:"seen,omitempty"`      // shared bitmap path
	Latency   string `json:"latency,omitempty"`   // shared latency histograms' path
	LatSlots  int    `json:"lat_slots,omitempty"` // ... and how many it holds
	LatSlot   int    `json:"lat_slot,omitempty"`  // this consumer's (a replacement takes its victim's)

	// Gated: a producer sends a sequence number only while it is below
	// the control file's gate word (0: no gate). A counted --chaos run
	// holds the producers there until each kill is made.
	Gated bool `json:"gated,omitempty"`
}

// report is what a worker hands back when it is done.
type report struct {
	Role     string `json:"role"`
	ID       int    `json:"id"`
	Sent     int64  `json:"sent,omitempty"`     // producer: messages sent; pass submitter: passes submitted
	Received int64  `json:"received,omitempty"` // consumer: valid messages, copies included; pass submitter: passes resolved with their own arguments echoed
	Corrupt  int64  `json:"corrupt,omitempty"`  // consumer: messages that failed verification; pass submitter: bad results
	Why      string `json:"why,omitempty"`      // consumer, pass submitter: the first verification failure
	First    int64  `json:"first,omitempty"`    // shm.MonoNow of the first send or receive (pass submitter: Submit)
	Last     int64  `json:"last,omitempty"`     // ... and of the last (pass submitter: result)

	// A pass worker's counters.
	Pass *pass.Stats `json:"pass,omitempty"`

	// A pass submitter's: results that came again for a resolved pass
	// (the client dropped them), whether it gave up on missing results,
	// and its client's own counters.
	Duplicated   int64             `json:"duplicated,omitempty"`
	StoppedEarly bool              `json:"stopped_early,omitempty"`
	Client       *pass.ClientStats `json:"client,omitempty"`

	// A consumer's received set and latencies, in memory and on the wire.
	seen     *seenSet
	rec      *recorder
	SeenWire [][]byte      `json:"seen,omitempty"`
	RecWire  *wireRecorder `json:"latency,omitempty"`
}

// toWire prepares a report for printing by a worker process.
func (r *report) toWire() error {
	var err error
	if r.seen != nil {
		if r.SeenWire, err = r.seen.encode(); err != nil {
			return err
		}
	}
	if r.rec != nil {
		w, err := r.rec.wire()
		if err != nil {
			return err
		}
		r.RecWire = &w
	}
	return nil
}

// fromWire is the inverse of toWire, in the parent.
func (r *report) fromWire() error {
	var err error
	if r.SeenWire != nil {
		if r.seen, err = decodeSeen(r.SeenWire); err != nil {
			return err
		}
	}
	if r.RecWire != nil {
		if r.rec, err = r.RecWire.recorder(); err != nil {
			return fmt.Errorf("latency histogram: %w", err)
		}
	}
	return nil
}

// runWorker is a worker's life after its ends are open, the same in a
// worker process and in a goroutine: say ready, wait for go, do the role.
// lk is set for a leased consumer.
func runWorker(ctx context.Context, j *job, ctl *control, tx, rx endpoint, lk *leaseKit) (*report, error) {
	ctl.markReady(j.Index)
	_, deadline, err := ctl.awaitGo(ctx)
	if err != nil {
		return nil, err
	}
	_, progress := ctl.worker(j.Index)
	switch j.Role {
	case roleProducer:
		var gate *atomic.Uint32
		if j.Gated {
			gate = ctl.gate
		}
		return produce(ctx, j, tx, deadline, gate)
	case roleConsumer:
		if lk != nil {
			le, ok := rx.(leaser)
			if !ok {
				return nil, fmt.Errorf("leased consumption needs a ring or a deque, not %s", j.Lane.Transport)
			}
			return consumeLeased(j, le, lk, ctl.line(j.Index))
		}
		return consume(j, rx, progress)
	case roleEcho:
		if err := echo(j, rx, tx); err != nil {
			return nil, err
		}
		return &report{Role: roleEcho, ID: j.ID}, nil
	}
	return nil, fmt.Errorf("unknown role %q", j.Role)
}

// workerMain runs a worker process: open the control file and the ends the
// job names, run, print the report on stdout.
func workerMain(jobJSON string) (err error) {
	var j job
	if err := json.Unmarshal([]byte(jobJSON), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	tr, err := lookupTransport(j.Lane.Transport)
	if err != nil {
		return err
	}
	if tr.openEnd == nil {
		return fmt.Errorf("transport %s has no ends to open in another process", tr.Name)
	}
	ctl, err := openControl(j.Control, j.Workers)
	if err != nil {
		return err
	}
	defer ctl.close()
	// The process ends when its parent does (watchParent): no cancellation.
	ctx := context.Background()
	var tx, rx endpoint
	defer func() {
		for _, e := range []endpoint{tx, rx} {
			if e != nil {
				err = errors.Join(err, e.close())
			}
		}
	}()
	if j.Role == roleProducer || j.Role == roleEcho {
		if tx, err = tr.openEnd(ctx, j.Lane, j.Tx, true); err != nil {
			return err
		}
	}
	if j.Role == roleConsumer || j.Role == roleEcho {
		if rx, err = tr.openEnd(ctx, j.Lane, j.Rx, false); err != nil {
			return err
		}
	}
	tx, rx = wrapEnds(j.Lane, tx, rx)
	var lk *leaseKit
	if j.Role == roleConsumer && j.Lease {
		if lk, err = openLeaseKit(&j); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, lk.close()) }()
	}
	// One goroutine does all the work: keep it on one thread, as the
	// measuring side does.
	runtime.LockOSThread()
	rep, err := runWorker(ctx, &j, ctl, tx, rx, lk)
	if err != nil {
		return err
	}
	if err := rep.toWire(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}
