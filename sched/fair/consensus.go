package fair

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// ConsensusTransport exchanges words among the participants of a
// distributed turn: each process runs its own Scheduler over the same
// request stream, and they agree through the transport before acting.
//
// AllGather is a collective call: every participant calls it, in the same
// order, with the same number of words; it returns when everyone has, and
// appends to dst every participant's words, participant 0's first, so
// that the result has Participants()*len(local) words. An error fails the
// round; a transport whose participants passed different word counts must
// report an error rather than return a mis-shaped result.
//
// The shared-memory implementation, for processes on one machine, is
// gather.Member (package sched/gather, which imports this one: fair itself
// depends on no transport).
type ConsensusTransport interface {
	Participants() int
	AllGather(dst, local []uint32) ([]uint32, error)
}

// ConsensusCapacity is implemented by a ConsensusTransport whose rounds
// carry a bounded number of words per participant (gather.Member does).
// CheckLimits reports an error when a round of a distributed turn under l,
// with work descriptors of up to maxDescriptor words, may not fit
// (Limits.ConsensusWords).
//
// RunDistributedTurn and CancelDistributed ask a transport that implements
// it, before any round, with maxDescriptor 0 (descriptors are not known in
// advance; a longer descriptor than the transport carries still fails its
// round): a transport too small for the limits fails the call with
// ErrTransportCapacity and the transport's error, and poisons nothing,
// instead of failing a round, and poisoning every participant, the first
// turn with enough work in flight.
type ConsensusCapacity interface {
	CheckLimits(l Limits, maxDescriptor int) error
}

// checkCapacity refuses a transport that says it is too small for the
// limits.
func (s *Scheduler[W, S, B, O]) checkCapacity(t ConsensusTransport) error {
	c, ok := t.(ConsensusCapacity)
	if !ok {
		return nil
	}
	if err := c.CheckLimits(s.limits, 0); err != nil {
		return fmt.Errorf("%w: %w", ErrTransportCapacity, err)
	}
	return nil
}

// Consensus messages. Each starts with a tag naming its kind and the
// caller's 64-bit protocol id, so that a participant running a different
// step or protocol disagrees on the first words. Every word is compared
// across participants, except completion statuses, which are combined.
//
//	schedule:    tag, protocol (lo, hi), drain cycles (lo, hi), count,
//	             then per transition: request (lo, hi), sequence (lo, hi),
//	             descriptor length, descriptor words
//	disposition: tag, protocol (lo, hi), request (lo, hi), cause
//	completions: tag, protocol (lo, hi), count,
//	             then per submitted transition: request (lo, hi),
//	             sequence (lo, hi), status
const (
	// Tags: arbitrary, distinct words.
	fairTagSchedule    uint32 = 0x53434844
	fairTagDisposition uint32 = 0x50534944
	fairTagCompletions uint32 = 0x504d4f43

	fairScheduleHeader   = 6
	fairCompletionHeader = 4
	fairCompletionEntry  = 5
)

// ConsensusWords returns the most words one participant contributes to a
// round of a distributed turn under these limits when no work descriptor
// has more than maxDescriptor words: the MaxWords a gather.Config
// (package sched/gather) for the group needs. It saturates at math.MaxInt.
func (l Limits) ConsensusWords(maxDescriptor int) int {
	if maxDescriptor > math.MaxInt-5 {
		return math.MaxInt
	}
	perWork := 5 + max(maxDescriptor, 0) // request, sequence, length, descriptor
	schedule := math.MaxInt
	if l.MaxNewSubmissionsPerTurn <= (math.MaxInt-fairScheduleHeader)/perWork {
		schedule = fairScheduleHeader + l.MaxNewSubmissionsPerTurn*perWork
	}
	completions := math.MaxInt
	if l.MaxInFlightGlobal <= (math.MaxInt-fairCompletionHeader)/fairCompletionEntry {
		completions = fairCompletionHeader + l.MaxInFlightGlobal*fairCompletionEntry
	}
	const disposition = 6
	return max(schedule, completions, disposition)
}

// Completion statuses as one participant observes them.
const (
	obsIncomplete uint32 = 0
	obsComplete   uint32 = 1
	obsFailed     uint32 = 2
)

// resolution is the group's verdict on one submitted transition.
type resolution uint8

const (
	resIncomplete    resolution = iota // someone has not completed it yet
	resComplete                        // complete everywhere
	resFailedPending                   // failed somewhere, still running somewhere
	resFailedDone                      // failed somewhere, terminal everywhere
)

func appendU64(dst []uint32, v uint64) []uint32 { return append(dst, uint32(v), uint32(v>>32)) }

// gather runs one round and checks the shape of its result.
func (s *Scheduler[W, S, B, O]) gather(t ConsensusTransport, what string) ([]uint32, int, error) {
	n := t.Participants()
	if n < 1 {
		return nil, 0, fmt.Errorf("%w: %s: transport has %d participants", ErrConsensus, what, n)
	}
	out, err := t.AllGather(s.gathered[:0], s.msg)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: all-gather: %w", ErrConsensus, what, err)
	}
	s.gathered = out
	if len(out) != n*len(s.msg) {
		return nil, 0, fmt.Errorf("%w: %s: transport returned %d words for %d participants of %d words", ErrConsensus, what, len(out), n, len(s.msg))
	}
	return out, n, nil
}

// agree checks that every participant sent exactly the local message.
func (s *Scheduler[W, S, B, O]) agree(t ConsensusTransport, what string) error {
	all, n, err := s.gather(t, what)
	if err != nil {
		return err
	}
	m := len(s.msg)
	for p := 0; p < n; p++ {
		theirs := all[p*m : (p+1)*m]
		for i, w := range theirs {
			if w != s.msg[i] {
				return fmt.Errorf("%w: %s mismatch: participant %d word %d is %#x, here %#x", ErrConsensus, what, p, i, w, s.msg[i])
			}
		}
	}
	return nil
}

// agreeSchedule checks that every participant is about to submit the same
// transitions, with the same descriptors, after the same number of turns.
func (s *Scheduler[W, S, B, O]) agreeSchedule(protocol uint64, t ConsensusTransport) error {
	k := min(s.submitCapacity(), s.prepared.len())
	m := append(s.msg[:0], fairTagSchedule)
	m = appendU64(m, protocol)
	m = appendU64(m, s.drainCycles)
	m = append(m, uint32(k))
	for i := 0; i < k; i++ {
		it := s.prepared.at(i)
		m = appendU64(m, uint64(it.id.Request))
		m = appendU64(m, it.id.Sequence)
		m = append(m, uint32(len(it.desc)))
		m = append(m, it.desc...)
	}
	s.msg = m
	return s.agree(t, "schedule")
}

// agreeDisposition checks that every participant is about to cancel the
// same request for the same cause.
func (s *Scheduler[W, S, B, O]) agreeDisposition(protocol uint64, t ConsensusTransport, id RequestID, cause cancelCause) error {
	m := append(s.msg[:0], fairTagDisposition)
	m = appendU64(m, protocol)
	m = appendU64(m, uint64(id))
	s.msg = append(m, uint32(cause))
	return s.agree(t, fmt.Sprintf("disposition of request %d", id))
}

// agreeCompletions gathers every participant's view of the submitted
// transitions (which must be the same transitions, in the same order) and
// returns the group's verdict on each.
func (s *Scheduler[W, S, B, O]) agreeCompletions(protocol uint64, t ConsensusTransport, verdicts []resolution) ([]resolution, error) {
	m := append(s.msg[:0], fairTagCompletions)
	m = appendU64(m, protocol)
	m = append(m, uint32(len(s.submitted)))
	s.observe()
	for i, it := range s.submitted {
		m = appendU64(m, uint64(it.id.Request))
		m = appendU64(m, it.id.Sequence)
		m = append(m, s.obs[i].status)
	}
	clear(s.obs)
	s.msg = m
	all, n, err := s.gather(t, "completions")
	if err != nil {
		return verdicts, err
	}
	width := len(m)
	for p := 0; p < n; p++ {
		theirs := all[p*width : (p+1)*width]
		for i, w := range theirs {
			isStatus := i >= fairCompletionHeader && (i-fairCompletionHeader)%fairCompletionEntry == fairCompletionEntry-1
			if isStatus {
				if w > obsFailed {
					return verdicts, fmt.Errorf("%w: completions: participant %d word %d holds status %d", ErrConsensus, p, i, w)
				}
				continue
			}
			if w != m[i] {
				return verdicts, fmt.Errorf("%w: completions mismatch: participant %d word %d is %#x, here %#x", ErrConsensus, p, i, w, m[i])
			}
		}
	}
	for j := range s.submitted {
		failed, terminal, complete := false, true, true
		at := fairCompletionHeader + j*fairCompletionEntry + fairCompletionEntry - 1
		for p := 0; p < n; p++ {
			switch all[p*width+at] {
			case obsFailed:
				failed, complete = true, false
			case obsIncomplete:
				terminal, complete = false, false
			}
		}
		v := resIncomplete
		switch {
		case failed && terminal:
			v = resFailedDone
		case failed:
			v = resFailedPending
		case complete:
			v = resComplete
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, nil
}

// RunDistributedTurn runs one bounded turn in step with the other
// participants of t, each of which runs the same request stream through
// its own scheduler with the same protocol id:
//
//  1. requests whose deadlines expired at now are cancelled, each after
//     every participant confirms it (now must be a clock the participants
//     share, such as a logical turn time, or they will disagree);
//  2. completions are resolved only as the group sees them: work commits
//     when it completed everywhere; work that failed anywhere fails, but
//     its output is kept until it is terminal everywhere;
//  3. up to MaxNewSubmissionsPerTurn transitions are prepared, and the
//     group confirms it is about to submit the same ones, with the same
//     descriptors, before any is submitted.
//
// A transport too small for the limits (ConsensusCapacity) fails the turn
// with ErrTransportCapacity before any round. Any disagreement, or a
// transport failure, poisons the scheduler and returns an error wrapping
// ErrConsensus. Submission errors poison it too,
// since the other participants did submit. The progress holds what was
// resolved even when an error stops the turn.
func (s *Scheduler[W, S, B, O]) RunDistributedTurn(protocol uint64, t ConsensusTransport, now time.Time, backend Backend[W, B, O]) (Progress[W, O], error) {
	var p Progress[W, O]
	if err := s.usable(); err != nil {
		return p, err
	}
	if err := s.checkCapacity(t); err != nil {
		return p, err
	}
	for _, id := range s.expiredRequests(now) {
		if err := s.agreeDisposition(protocol, t, id, causeDeadline); err != nil {
			s.poison(err.Error(), now)
			return p, err
		}
		if err := s.cancel(s.reqs[id], causeDeadline, now); err != nil {
			return p, err
		}
	}
	if err := s.pollDistributed(protocol, t, now, &p); err != nil {
		s.poison(err.Error(), now)
		return p, err
	}
	if _, err := s.Prepare(s.limits.MaxNewSubmissionsPerTurn, now); err != nil {
		return p, err
	}
	if err := s.agreeSchedule(protocol, t); err != nil {
		s.poison(err.Error(), now)
		return p, err
	}
	n, err := s.Submit(now, backend)
	p.NewlySubmitted = n
	if err != nil {
		s.poison(err.Error(), now)
		return p, err
	}
	return p, nil
}

// pollDistributed resolves completions by the group's verdict.
func (s *Scheduler[W, S, B, O]) pollDistributed(protocol uint64, t ConsensusTransport, now time.Time, p *Progress[W, O]) error {
	verdicts, err := s.agreeCompletions(protocol, t, s.verdicts[:0])
	s.verdicts = verdicts
	if err != nil {
		return err
	}
	done := 0
	for _, v := range verdicts {
		if v == resComplete {
			done++
		}
	}
	p.Committed = slices.Grow(p.Committed, done)
	items := s.beginResolve()
	for j, it := range items {
		switch verdicts[j] {
		case resIncomplete:
			s.submitted = append(s.submitted, it)
		case resComplete:
			s.resolve(it, now, p)
		case resFailedPending:
			if it.disp != dispFail {
				s.markFailing(it)
			}
			s.submitted = append(s.submitted, it)
		case resFailedDone:
			if it.disp != dispFail {
				s.markFailing(it)
			}
			s.resolve(it, now, p)
		}
	}
	s.endResolve(items, now)
	return nil
}

// markFailing gives submitted work the fail disposition: it failed on some
// participant and will fail here once it is terminal everywhere.
func (s *Scheduler[W, S, B, O]) markFailing(it *fairItem[W, S, B, O]) {
	if it.disp == dispAbandon {
		s.abandoned--
	}
	it.disp, it.life = dispFail, WorkFailed
	s.failed++
}

// CancelDistributed cancels a request once every participant of t
// confirms it is cancelling the same request. A disagreement poisons the
// scheduler.
func (s *Scheduler[W, S, B, O]) CancelDistributed(protocol uint64, id RequestID, t ConsensusTransport, now time.Time) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.checkCapacity(t); err != nil {
		return err
	}
	if err := s.agreeDisposition(protocol, t, id, causeExplicit); err != nil {
		s.poison(err.Error(), now)
		return err
	}
	r, err := s.cancellable(id)
	if err != nil {
		return err
	}
	return s.cancel(r, causeExplicit, now)
}
