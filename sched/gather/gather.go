package gather

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/fair"
	"github.com/shmkit/shmkit/shm"
)

// Errors of all-gather groups. Each error wraps one of them and names the
// file, and the participant and round it concerns.
var (
	ErrConfig    = errors.New("gather: invalid configuration")
	ErrRankTaken = errors.New("gather: participant already joined")
	ErrTimeout   = errors.New("gather: round timed out")
	ErrPeerDead  = errors.New("gather: participant died")
	ErrPeerLeft  = errors.New("gather: participant left the group")
	ErrLength    = errors.New("gather: participants contributed different word counts")
	ErrTooLarge  = errors.New("gather: more words than an all-gather buffer holds")
	ErrCorrupt   = errors.New("gather: file inconsistent")
	ErrAborted   = errors.New("gather: group aborted by a failed round")
	ErrClosed    = errors.New("gather: member has left")
	// ErrFairCapacity: the file's buffers hold fewer words than a round of
	// a fair scheduler's distributed turn may need under its limits.
	ErrFairCapacity = errors.New("gather: all-gather buffers too small for the fair scheduler's limits")
)

// Defaults of Member.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultLiveCheck = 20 * time.Millisecond

	// A waiting participant spins (re-checks) for gatherSpin, reading the
	// clock every gatherClockEvery checks, then yields gatherYields times,
	// then sleeps on the futex. Participants are usually a few
	// microseconds apart, and a futex sleep and wake costs more than that.
	gatherSpin       = 20 * time.Microsecond
	gatherClockEvery = 64
	gatherYields     = 16
)

// defaultWords is the MaxWords of a Config that leaves it 0: the larger of
// layout.AGDefaultWords and what distributed turns under
// fair.DefaultLimits need with descriptors of no words (324: a round of
// completions for 64 transitions in flight), so that a file created with
// defaults carries the turns of schedulers built with defaults whose
// descriptors have at most 313 words.
var defaultWords = max(layout.AGDefaultWords, fair.DefaultLimits().ConsensusWords(0))

// Config sizes a new all-gather file.
type Config struct {
	Participants int // processes in the group, 1 to layout.AGMaxParticipants
	// MaxWords is the most words one participant contributes per round
	// (0: the larger of layout.AGDefaultWords and
	// fair.DefaultLimits().ConsensusWords(0), 324). For a fair scheduler's
	// distributed turns it must be at least fair.Limits.ConsensusWords
	// (FairConfig sizes it so; NewFairScheduler and every distributed turn
	// check it).
	MaxWords int
}

// FairConfig sizes a file for participants fair schedulers under limits
// whose work descriptors have at most maxDescriptor words.
func FairConfig(participants int, limits fair.Limits, maxDescriptor int) Config {
	return Config{Participants: participants, MaxWords: limits.ConsensusWords(maxDescriptor)}
}

// Group is an all-gather file: a group of processes that exchange
// words in rounds. Each process joins as one participant (Member);
// in every round each contributes its words and receives everyone's.
//
// Participant i's slot holds its identity (pid, start time, boot), the
// last round it published, and two buffers: round r is written to buffer
// r mod 2, then published by storing r in the slot's round word. A
// participant can be at most one round ahead of the slowest (it needs
// everyone's round r to finish round r), so the buffer it writes is never
// one that a slower participant is still copying.
//
// Waiting spins briefly, then sleeps on a futex word in the file; a
// publisher makes the wake system call only when a sleeper has raised the
// waiter flag. A round is bounded: a participant whose process is proven
// dead fails it at once (checked every DefaultLiveCheck while
// waiting), and one that does not arrive fails it after the round timeout.
// The first participant to fail a round records why in the file's abort
// word and wakes everyone: from then on every round of every participant
// fails with ErrAborted. A group is single-use: once aborted or
// finished, start a new one in a new file.
type Group struct {
	reg     *shm.Region
	lay     layout.AllGatherLayout
	area    shm.Words
	seq     *atomic.Uint32
	waiters *atomic.Uint32
	abort   *atomic.Uint64

	// own[i] is set while this handle holds, or is taking, participant
	// i's entry lock (from Join until Leave). A handle cannot see its own
	// locks (locks of one open file description never conflict), so it
	// answers for these participants itself: alive.
	own []atomic.Bool
}

// Create creates an all-gather file.
func Create(path string, cfg Config, opts ...shm.Option) (*Group, error) {
	g, err := cfg.geometry(path)
	if err != nil {
		return nil, err
	}
	return shm.CreateAs(path, shm.Spec{Kind: layout.KindAllGather, Geometry: g}, newGroup, opts...)
}

// Open opens an existing all-gather file.
func Open(path string, opts ...shm.Option) (*Group, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindAllGather}, newGroup, opts...)
}

// OpenOrCreate opens the file at path or creates it with cfg; any
// number of processes may race to do so.
func OpenOrCreate(path string, cfg Config, opts ...shm.Option) (*Group, bool, error) {
	g, err := cfg.geometry(path)
	if err != nil {
		return nil, false, err
	}
	return shm.OpenOrCreateAs(path, shm.Spec{Kind: layout.KindAllGather, Geometry: g}, newGroup, opts...)
}

func (c Config) geometry(path string) (layout.Geometry, error) {
	words := c.MaxWords
	if words == 0 {
		words = defaultWords
	}
	if c.Participants < 1 || c.Participants > layout.AGMaxParticipants || words < 1 || words > layout.AGMaxWords {
		return layout.Geometry{}, fmt.Errorf("%w: %s: %d participants of %d words", ErrConfig, path, c.Participants, words)
	}
	return layout.AllGatherGeometry(uint32(c.Participants), uint32(words)), nil
}

func newGroup(reg *shm.Region) (*Group, error) {
	hdr := reg.Header()
	lay, err := layout.NewAllGatherLayout(hdr.Geometry)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, reg.Path(), err)
	}
	area := reg.Bytes()[hdr.HeaderSize:]
	if uint64(len(area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", ErrCorrupt, reg.Path(), len(area), lay.BodySize)
	}
	g := &Group{reg: reg, lay: lay, area: area, own: make([]atomic.Bool, lay.Participants)}
	g.seq, g.waiters = g.area.U32(layout.AGOffSeq), g.area.U32(layout.AGOffWaiters)
	g.abort = g.area.U64(layout.AGOffAbort)
	return g, nil
}

// Path returns the file's path.
func (g *Group) Path() string { return g.reg.Path() }

// Participants returns the group's size.
func (g *Group) Participants() int { return int(g.lay.Participants) }

// MaxWords returns the most words a participant contributes per round.
func (g *Group) MaxWords() int { return int(g.lay.Words) }

// Header returns the file's common header.
func (g *Group) Header() layout.Header { return g.reg.Header() }

// Close unmaps the file. Members joined through it must not be used
// afterwards; leave first.
func (g *Group) Close() error { return g.reg.Close() }

func (g *Group) ctl(i uint64) *atomic.Uint64 {
	return g.area.U64(g.lay.SlotOff(i) + layout.AGSlotCtl)
}

func (g *Group) round(i uint64) *atomic.Uint64 {
	return g.area.U64(g.lay.SlotOff(i) + layout.AGSlotRound)
}

// Peer is one participant slot as read from the file.
type Peer struct {
	Index   int
	State   string // free, claiming, active, left
	PID     int32
	Start   uint64
	PidNS   uint64 // pid namespace recorded at join (shm.PidNamespace), 0 if unknown
	Round   uint64 // last round published
	Joined  time.Time
	Verdict shm.Verdict // for claiming and active participants: are they alive (judge)
}

// Where names the participant's process for humans: "pid 1234", or "pid 1
// in another pid namespace (pid:[4026532...])".
func (p Peer) Where() string { return shm.Holder{PID: p.PID, PidNS: p.PidNS}.Where() }

// Peers reads every participant slot and judges the joined ones, for
// inspectors and tests.
func (g *Group) Peers() []Peer {
	peers := make([]Peer, g.lay.Participants)
	for i := range peers {
		base := g.lay.SlotOff(uint64(i))
		c := layout.UnpackPeer(g.ctl(uint64(i)).Load())
		peers[i] = Peer{
			Index: i, State: layout.AGStateName(c.State), PID: int32(c.PID),
			Start:  g.area.U64(base + layout.AGSlotStart).Load(),
			PidNS:  g.area.U64(base + layout.AGSlotPidNS).Load(),
			Round:  g.round(uint64(i)).Load(),
			Joined: time.Unix(0, int64(g.area.U64(base+layout.AGSlotJoined).Load())),
		}
		if c.State == layout.AGClaiming || c.State == layout.AGActive {
			peers[i].Verdict = g.judge(uint64(i), c)
		}
	}
	return peers
}

// slotLock is the byte range of participant i's entry lock in the file:
// the first 64 bytes of its slot.
func (g *Group) slotLock(i uint64) (off, n uint64) {
	return uint64(g.reg.Header().HeaderSize) + g.lay.SlotOff(i), layout.AGSlotBuffers
}

// judge decides whether participant i, whose ctl word is c (claiming or
// active), is alive. The proof is its entry lock (shm.Region.JudgeEntry):
// a participant locks its slot before claiming it and keeps the lock
// until it has left, in whatever pid namespace it runs. Participants
// joined through this handle are answered for here: alive.
func (g *Group) judge(i uint64, c layout.PeerCtl) shm.Verdict {
	if g.own[i].Load() {
		return shm.Verdict{Lock: shm.LockHeld, Reason: "joined through this handle"}
	}
	base := g.lay.SlotOff(i)
	h := shm.Holder{PID: int32(c.PID), Complete: c.State == layout.AGActive}
	if h.Complete {
		h.Start = g.area.U64(base + layout.AGSlotStart).Load()
		h.Boot = g.area.U64(base + layout.AGSlotBoot).Load()
		h.PidNS = g.area.U64(base + layout.AGSlotPidNS).Load()
	}
	off, n := g.slotLock(i)
	return g.reg.JudgeEntry(off, n, h)
}

// Aborted returns the group's abort record, if a round has failed.
func (g *Group) Aborted() (layout.AGAbort, bool) {
	v := g.abort.Load()
	return layout.UnpackAGAbort(v), v != 0
}

// Option adjusts a member.
type Option func(*Member)

// Timeout bounds how long a round waits for the slowest participant
// (default DefaultTimeout).
func Timeout(d time.Duration) Option { return func(m *Member) { m.timeout = d } }

// LiveCheck sets how often a waiting participant checks whether the
// participants it waits for are still alive (default DefaultLiveCheck).
func LiveCheck(d time.Duration) Option { return func(m *Member) { m.liveCheck = d } }

// Member is this process's place in an all-gather group; it is the
// shared-memory fair.ConsensusTransport. It must be used by one goroutine
// at a time.
type Member struct {
	g         *Group
	rank      uint64
	ctlWord   uint64 // our active ctl word
	done      uint64 // rounds published
	timeout   time.Duration
	liveCheck time.Duration
	left      bool
}

// A Member is what a group of fair schedulers, one per process, agree
// through in distributed turns.
var _ fair.ConsensusTransport = (*Member)(nil)

// CheckLimits reports ErrFairCapacity, with the file's path, its words per
// participant and the words needed, when a round of a fair scheduler's
// distributed turn under limits, with work descriptors of up to
// maxDescriptor words, may not fit in the file's buffers.
func (g *Group) CheckLimits(limits fair.Limits, maxDescriptor int) error {
	need := limits.ConsensusWords(maxDescriptor)
	if have := g.MaxWords(); have < need {
		return fmt.Errorf("%w: %s: buffers hold %d words per participant, distributed turns under these limits (%d in flight, %d new per turn) with descriptors of up to %d words need %d (size the file with gather.FairConfig)",
			ErrFairCapacity, g.Path(), have, limits.MaxInFlightGlobal, limits.MaxNewSubmissionsPerTurn, max(maxDescriptor, 0), need)
	}
	return nil
}

// CheckLimits is the group's CheckLimits; with it a Member is a
// fair.ConsensusCapacity, so a distributed turn through a file too small
// for its scheduler's limits fails before any round.
func (m *Member) CheckLimits(limits fair.Limits, maxDescriptor int) error {
	return m.g.CheckLimits(limits, maxDescriptor)
}

var _ fair.ConsensusCapacity = (*Member)(nil)

// NewFairScheduler returns a fair scheduler under limits for distributed
// turns through m (fair.New), after checking that the group's buffers
// carry every round of those turns for work descriptors of up to
// maxDescriptor words: if not, it fails with ErrFairCapacity naming the
// file and both word counts.
func NewFairScheduler[W fair.Work, S fair.State[B], B any, O fair.Output](m *Member, limits fair.Limits, maxDescriptor int) (*fair.Scheduler[W, S, B, O], error) {
	s, err := fair.New[W, S, B, O](limits)
	if err != nil {
		return nil, err
	}
	if err := m.CheckLimits(limits, maxDescriptor); err != nil {
		return nil, err
	}
	return s, nil
}

// Join takes participant slot rank (0 <= rank < Participants) for this
// process. Each slot can be joined once in the life of the file: a slot
// already taken, even by a process since dead, gives ErrRankTaken.
func (g *Group) Join(rank int, opts ...Option) (*Member, error) {
	if g.reg.ReadOnly() {
		return nil, fmt.Errorf("%w: %s: opened read-only", ErrConfig, g.Path())
	}
	if rank < 0 || uint64(rank) >= g.lay.Participants {
		return nil, fmt.Errorf("%w: %s: participant %d outside the group of %d", ErrConfig, g.Path(), rank, g.lay.Participants)
	}
	i := uint64(rank)
	ctl := g.ctl(i)
	taken := func(v uint64) error {
		c := layout.UnpackPeer(v)
		return fmt.Errorf("%w: %s: participant %d is %s (pid %d)", ErrRankTaken, g.Path(), rank, layout.AGStateName(c.State), c.PID)
	}
	if v := ctl.Load(); v != 0 {
		return nil, taken(v)
	}
	if !g.own[i].CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: %s: participant %d is being joined through this handle", ErrRankTaken, g.Path(), rank)
	}
	// Lock before claim: a claimed slot whose lock nobody holds has no live
	// participant. The lock is kept until Leave.
	off, n := g.slotLock(i)
	if err := g.reg.LockEntry(off, n); err != nil {
		g.own[i].Store(false)
		if errors.Is(err, shm.ErrEntryLocked) {
			return nil, fmt.Errorf("%w: %s: participant %d is being joined by another process", ErrRankTaken, g.Path(), rank)
		}
		return nil, fmt.Errorf("gather: join: %w", err)
	}
	release := func() {
		_ = g.reg.UnlockEntry(off, n)
		g.own[i].Store(false)
	}
	v := ctl.Load()
	if v != 0 {
		release()
		return nil, taken(v)
	}
	self := shm.Self()
	claiming := layout.PeerCtl{State: layout.AGClaiming, PID: uint32(self.PID)}.Pack()
	if !ctl.CompareAndSwap(v, claiming) {
		release()
		return nil, fmt.Errorf("%w: %s: participant %d joined concurrently", ErrRankTaken, g.Path(), rank)
	}
	base := g.lay.SlotOff(i)
	g.area.U64(base + layout.AGSlotStart).Store(self.Start)
	g.area.U64(base + layout.AGSlotBoot).Store(shm.BootTag())
	g.area.U64(base + layout.AGSlotPidNS).Store(shm.PidNamespace())
	g.area.U64(base + layout.AGSlotJoined).Store(uint64(time.Now().UnixNano()))
	if r := g.round(i).Load(); r != 0 {
		// Claimed, and never to be active: releasing the lock shows the
		// others a participant that will not arrive.
		release()
		return nil, fmt.Errorf("%w: %s: free participant %d already at round %d", ErrCorrupt, g.Path(), rank, r)
	}
	shm.CrashPoint(crashAllgatherJoinAfterClaim)
	active := layout.PeerCtl{State: layout.AGActive, PID: uint32(self.PID)}.Pack()
	if !ctl.CompareAndSwap(claiming, active) {
		release()
		return nil, fmt.Errorf("%w: %s: participant %d changed while joining", ErrCorrupt, g.Path(), rank)
	}
	m := &Member{g: g, rank: i, ctlWord: active, timeout: DefaultTimeout, liveCheck: DefaultLiveCheck}
	for _, o := range opts {
		o(m)
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.liveCheck <= 0 {
		m.liveCheck = DefaultLiveCheck
	}
	return m, nil
}

// Rank returns the member's participant index.
func (m *Member) Rank() int { return int(m.rank) }

// Participants returns the group's size.
func (m *Member) Participants() int { return int(m.g.lay.Participants) }

// Rounds returns how many rounds the member has published.
func (m *Member) Rounds() uint64 { return m.done }

// Leave marks the member as gone: participants waiting for it in a later
// round fail with ErrPeerLeft at once instead of timing out. Its last
// round stays readable by participants still finishing it.
func (m *Member) Leave() error {
	if m.left {
		return nil
	}
	m.left = true
	g := m.g
	// The entry lock goes only after the word has left our hands: a
	// judge never sees an active participant of ours without it.
	defer func() {
		off, n := g.slotLock(m.rank)
		_ = g.reg.UnlockEntry(off, n)
		g.own[m.rank].Store(false)
	}()
	c := layout.UnpackPeer(m.ctlWord)
	left := layout.PeerCtl{State: layout.AGLeft, PID: c.PID}.Pack()
	if !g.ctl(m.rank).CompareAndSwap(m.ctlWord, left) {
		return fmt.Errorf("%w: %s: participant %d's slot changed under it", ErrCorrupt, g.Path(), m.rank)
	}
	g.wake()
	return nil
}

// wake wakes sleepers if any raised the waiter flag.
func (g *Group) wake() {
	if g.waiters.Load() != 0 && g.waiters.Swap(0) != 0 {
		g.seq.Add(1)
		shm.FutexWake(g.seq, -1)
	}
}

// AllGather contributes local to the next round and appends everyone's
// words to dst, participant 0's first. Every participant must contribute
// the same number of words (at most MaxWords); it returns when all have,
// or fails the round (and the group) as described on Group.
func (m *Member) AllGather(dst, local []uint32) ([]uint32, error) {
	g := m.g
	if m.left {
		return dst, fmt.Errorf("%w: %s: participant %d", ErrClosed, g.Path(), m.rank)
	}
	if err := g.aborted(); err != nil {
		return dst, err
	}
	r := m.done + 1
	if uint64(len(local)) > g.lay.Words {
		return dst, m.fail(layout.AGAbortTooLarge, m.rank, r, fmt.Errorf("%w: %s: participant %d has %d words for round %d, buffers hold %d",
			ErrTooLarge, g.Path(), m.rank, len(local), r, g.lay.Words))
	}
	off := g.lay.BufferOff(m.rank, r)
	words := g.area[off+layout.AGBufWords : off+layout.AGBufWords+4*uint64(len(local))]
	for i, w := range local {
		binary.LittleEndian.PutUint32(words[4*i:], w)
	}
	g.area.U32(off + layout.AGBufLen).Store(uint32(len(local)))
	g.area.U32(off + layout.AGBufRound).Store(uint32(r))
	shm.CrashPoint(crashAllgatherBeforePublish)
	g.round(m.rank).Store(r)
	m.done = r
	g.wake()
	shm.CrashPoint(crashAllgatherAfterPublish)
	if err := m.wait(r); err != nil {
		return dst, err
	}
	return m.collect(dst, local, r)
}

// aborted returns ErrAborted, with the recorded cause, once the
// group's abort word is set.
func (g *Group) aborted() error {
	v := g.abort.Load()
	if v == 0 {
		return nil
	}
	a := layout.UnpackAGAbort(v)
	if err := a.Validate(&g.lay); err != nil {
		return fmt.Errorf("%w: %s: abort word %#x: %v", ErrAborted, g.Path(), v, err)
	}
	who := ""
	if a.Culprit != 0 {
		i := uint64(a.Culprit - 1)
		c := layout.UnpackPeer(g.ctl(i).Load())
		h := shm.Holder{PID: int32(c.PID), PidNS: g.area.U64(g.lay.SlotOff(i) + layout.AGSlotPidNS).Load()}
		who = fmt.Sprintf(" concerning participant %d (%s)", i, h.Where())
	}
	return fmt.Errorf("%w: %s: participant %d failed round %d (%s%s)", ErrAborted, g.Path(), a.Reporter-1, a.Round, layout.AGAbortName(a.Reason), who)
}

// fail records the first failure in the abort word, wakes every sleeper
// and returns err.
func (m *Member) fail(reason uint8, culprit, r uint64, err error) error {
	g := m.g
	a := layout.AGAbort{Reason: reason, Reporter: uint16(m.rank + 1), Culprit: uint16(culprit + 1), Round: uint32(r)}
	if g.abort.CompareAndSwap(0, a.Pack()) {
		g.seq.Add(1)
		shm.FutexWake(g.seq, -1)
	}
	return err
}

// wait returns once every participant has published round r.
func (m *Member) wait(r uint64) error {
	g := m.g
	var spinEnd, start, deadline, nextCheck int64
	yields := 0
	for attempt := 1; ; attempt++ {
		lag, err := m.scan(r)
		if err != nil || lag < 0 {
			return err
		}
		if err := g.aborted(); err != nil {
			return err
		}
		if attempt%gatherClockEvery != 0 {
			continue // spin; read the clock only now and then
		}
		now := shm.MonoNow()
		if spinEnd == 0 {
			spinEnd = now + int64(gatherSpin)
		}
		if now < spinEnd {
			continue
		}
		if yields < gatherYields {
			yields++
			runtime.Gosched()
			continue
		}
		if start == 0 {
			// Liveness costs /proc reads: check only rounds that have
			// waited a whole check interval.
			start, deadline, nextCheck = now, now+int64(m.timeout), now+int64(m.liveCheck)
		}
		if now >= nextCheck {
			if err := m.checkLiveness(r); err != nil {
				return err
			}
			nextCheck = now + int64(m.liveCheck)
		}
		if now >= deadline {
			return m.timedOut(r, time.Duration(now-start))
		}
		// Announce a sleeper, then look again: a publisher either sees the
		// flag and wakes us, or published before we looked (Dekker, as in
		// the ring; see docs/design.md).
		s := g.seq.Load()
		g.waiters.Store(1)
		if lag, err := m.scan(r); err != nil || lag < 0 || g.abort.Load() != 0 {
			continue
		}
		sleep := time.Duration(min(deadline, nextCheck) - now)
		if err := shm.FutexWait(g.seq, s, sleep); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return fmt.Errorf("%s: round %d: %w", g.Path(), r, err)
		}
	}
}

// scan returns the index of a participant that has not published round r
// yet, or -1 when all have. A slot no participant could have written
// fails the round.
func (m *Member) scan(r uint64) (int, error) {
	g := m.g
	for i := uint64(0); i < g.lay.Participants; i++ {
		if i == m.rank {
			continue
		}
		c := layout.UnpackPeer(g.ctl(i).Load())
		switch c.State {
		case layout.AGFree, layout.AGClaiming:
			return int(i), nil
		case layout.AGActive, layout.AGLeft:
			pr := g.round(i).Load()
			switch {
			case pr > r+1:
				return 0, m.fail(layout.AGAbortCorrupt, i, r, fmt.Errorf("%w: %s: participant %d is at round %d, beyond round %d + 1 (it joined another group's rounds, or the file is corrupt)",
					ErrCorrupt, g.Path(), i, pr, r))
			case pr >= r:
				continue
			case c.State == layout.AGLeft:
				return 0, m.fail(layout.AGAbortLeft, i, r, fmt.Errorf("%w: %s: participant %d (pid %d) left after round %d, before round %d",
					ErrPeerLeft, g.Path(), i, c.PID, pr, r))
			}
			return int(i), nil
		default:
			return 0, m.fail(layout.AGAbortCorrupt, i, r, fmt.Errorf("%w: %s: participant %d has state %d", ErrCorrupt, g.Path(), i, c.State))
		}
	}
	return -1, nil
}

// laggards lists the participants that have not published round r.
func (m *Member) laggards(r uint64) []uint64 {
	g := m.g
	var out []uint64
	for i := uint64(0); i < g.lay.Participants; i++ {
		if i == m.rank {
			continue
		}
		c := layout.UnpackPeer(g.ctl(i).Load())
		if (c.State == layout.AGActive || c.State == layout.AGLeft) && g.round(i).Load() >= r {
			continue
		}
		out = append(out, i)
	}
	return out
}

// checkLiveness fails the round if a participant it waits for is proven
// dead (its entry lock released: judge). An undecided verdict counts as
// alive.
func (m *Member) checkLiveness(r uint64) error {
	g := m.g
	for _, i := range m.laggards(r) {
		raw := g.ctl(i).Load()
		c := layout.UnpackPeer(raw)
		if c.State != layout.AGActive && c.State != layout.AGClaiming {
			continue // not joined yet: only the timeout bounds it
		}
		if v := g.judge(i, c); v.Dead {
			// The lock is released once a participant leaves too, and it
			// may have published round r just before: it is dead only if,
			// read again after the verdict, it is still the same joined
			// participant and still short of round r.
			if g.ctl(i).Load() != raw || g.round(i).Load() >= r {
				continue
			}
			who := shm.Holder{PID: int32(c.PID), PidNS: g.area.U64(g.lay.SlotOff(i) + layout.AGSlotPidNS).Load()}.Where()
			return m.fail(layout.AGAbortDead, i, r, fmt.Errorf("%w: %s: participant %d (%s) died before publishing round %d: %s",
				ErrPeerDead, g.Path(), i, who, r, v.Reason))
		}
	}
	return nil
}

func (m *Member) timedOut(r uint64, waited time.Duration) error {
	g := m.g
	lag := m.laggards(r)
	if len(lag) == 0 {
		return nil
	}
	var names []string
	for _, i := range lag {
		c := layout.UnpackPeer(g.ctl(i).Load())
		names = append(names, fmt.Sprintf("%d (%s, pid %d, at round %d)", i, layout.AGStateName(c.State), c.PID, g.round(i).Load()))
	}
	return m.fail(layout.AGAbortTimeout, lag[0], r, fmt.Errorf("%w: %s: round %d waited %v for participants %s",
		ErrTimeout, g.Path(), r, waited.Round(time.Millisecond), strings.Join(names, ", ")))
}

// collect appends every participant's round-r words to dst.
func (m *Member) collect(dst, local []uint32, r uint64) ([]uint32, error) {
	g := m.g
	n := uint64(len(local))
	start := len(dst)
	dst = slices.Grow(dst, int(g.lay.Participants*n))
	for i := uint64(0); i < g.lay.Participants; i++ {
		if i == m.rank {
			dst = append(dst, local...)
			continue
		}
		off := g.lay.BufferOff(i, r)
		ln := uint64(g.area.U32(off + layout.AGBufLen).Load())
		tag := g.area.U32(off + layout.AGBufRound).Load()
		switch {
		case tag != uint32(r) || ln > g.lay.Words:
			return dst[:start], m.fail(layout.AGAbortCorrupt, i, r, fmt.Errorf("%w: %s: participant %d's buffer for round %d holds round %d, %d words",
				ErrCorrupt, g.Path(), i, r, tag, ln))
		case ln != n:
			return dst[:start], m.fail(layout.AGAbortLength, i, r, fmt.Errorf("%w: %s: round %d: participant %d sent %d words, participant %d %d",
				ErrLength, g.Path(), r, i, ln, m.rank, n))
		}
		words := g.area[off+layout.AGBufWords : off+layout.AGBufWords+4*n]
		for j := uint64(0); j < n; j++ {
			dst = append(dst, binary.LittleEndian.Uint32(words[4*j:]))
		}
		// A participant can be at most one round ahead, writing the other
		// buffer; anything further means the words just read may be torn.
		if pr := g.round(i).Load(); pr > r+1 {
			return dst[:start], m.fail(layout.AGAbortCorrupt, i, r, fmt.Errorf("%w: %s: participant %d moved to round %d while round %d was read",
				ErrCorrupt, g.Path(), i, pr, r))
		}
	}
	return dst, nil
}
