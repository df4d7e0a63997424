package layout

// Deque format (kind 3): a work-stealing deque. One owner pushes and pops
// at the bottom; thieves steal from the top. Its area follows the common
// header:
//
//	area offset
//	   0 +--------------------------------------------------------------+
//	     | bottom | pushed | full_hits | owner_popped | next_id          |
//	     |                                             (owner's line)     |
//	  64 | top | stolen | empty_hits                  (thieves' line)    |
//	 128 | not_empty_seq | not_empty_waiters          (futex line)       |
//	 192 | not_full_seq  | not_full_waiters           (futex line)       |
//	 256 | correlation                                                  |
//	 320 | claimed | acked | returned | poisoned | abandoned | repairs |
//	     | adopted | rolled_back                                        |
//	 384 | repair_lock | owner | pending | burned                     |
//	 448 +--------------------------------------------------------------+
//	     | participant[0..P): ctl | start | boot | attached (32 B each) |
//	     +--------------------------------------------------------------+ (64-aligned)
//	     | slot[0..capacity): word (8 B) | payload (slot_size-8 B)      |
//	     +--------------------------------------------------------------+
//
// Positions grow without bound: [top, bottom) holds the deque's messages,
// position p lives in slot p mod capacity at lap p / capacity. Slot words,
// the participant table and the geometry (Capacity, SlotSize, Param0 the
// participant table's size, Param1 the delivery limit) are the ring's, so
// the participant table and slots sit at the same offsets; the deque adds
// the returned slot state. The owner word holds the owner's participant
// index+1 (bits 0-15) and that entry's generation (16-39), 0 when the deque
// has no owner; pending counts returned slots (an upper bound: too high
// by one for each process killed between counting and marking, or taking
// and uncounting; never too low). next_id is the last message id the
// owner's pushes took (message ids, option RingOptMessageIDs: a deque
// reuses a position once the owner pops back below it, so the position
// cannot name a message as a ring's does); the owner takes a number
// before it writes the message, so a push killed in between leaves a gap
// and ids stay unique. These constants are part of the format.
const (
	DequeOffBottom      = 0
	DequeOffPushed      = 8
	DequeOffFullHits    = 16
	DequeOffOwnerPopped = 24
	DequeOffNextID      = 32
	DequeOffTop         = 64
	DequeOffStolen      = 72
	DequeOffEmptyHits   = 80
	DequeOffNotEmptySeq = 128
	DequeOffNotEmptyW   = 132
	DequeOffNotFullSeq  = 192
	DequeOffNotFullW    = 196
	DequeOffCorrelation = 256
	DequeOffClaimed     = 320
	DequeOffAcked       = 328
	DequeOffReturned    = 336
	DequeOffPoisoned    = 344
	DequeOffAbandoned   = 352
	DequeOffRepairs     = 360
	DequeOffAdopted     = 368
	DequeOffRolledBack  = 376
	DequeOffRepairLock  = 384
	DequeOffOwner       = 392
	DequeOffPending     = 400
	DequeOffBurned      = 408
	DequeOffPeers       = RingOffParticipants
)

// DequeLayout is a validated deque geometry with its derived offsets: the
// ring's slot geometry, in whose slots the returned state is valid.
type DequeLayout struct {
	SlotGeometry
}

// NewDequeLayout validates a deque geometry (the ring's rules) and derives
// its layout.
func NewDequeLayout(g Geometry) (DequeLayout, error) {
	sg, err := newSlotGeometry(g)
	sg.AllowReturned = true
	return DequeLayout{SlotGeometry: sg}, err
}

func init() {
	register(&Spec{
		Kind:         KindDeque,
		ParamNames:   [3]string{"participants", "delivery_limit", "options"},
		UsesSlotSize: true,
		Body: func(g Geometry) (uint64, Map, error) {
			l, err := NewDequeLayout(g)
			if err != nil {
				return 0, Map{}, err
			}
			return l.BodySize, l.fieldMap(), nil
		},
	})
}

func (l *DequeLayout) fieldMap() Map {
	u64 := func(name string, off uint64, meaning string) Field { return Field{name, off, 8, meaning} }
	u32 := func(name string, off uint64, meaning string) Field { return Field{name, off, 4, meaning} }
	m := Map{Fields: []Field{
		u64("deque.bottom", DequeOffBottom, "next position the owner pushes (owner only)"),
		u64("deque.pushed", DequeOffPushed, "messages the owner published"),
		u64("deque.full_hits", DequeOffFullHits, "pushes that found the deque full"),
		u64("deque.owner_popped", DequeOffOwnerPopped, "messages the owner popped at the bottom"),
		u64("deque.next_id", DequeOffNextID, "last message id a push took (message ids only; 0 otherwise)"),
		u64("deque.top", DequeOffTop, "next position thieves steal"),
		u64("deque.stolen", DequeOffStolen, "messages taken at the top by plain steals"),
		u64("deque.empty_hits", DequeOffEmptyHits, "pops, steals and claims that found the deque empty"),
		u32("deque.not_empty_seq", DequeOffNotEmptySeq, "futex word thieves sleep on"),
		u32("deque.not_empty_waiters", DequeOffNotEmptyW, "non-zero while a thief may sleep"),
		u32("deque.not_full_seq", DequeOffNotFullSeq, "futex word the owner sleeps on"),
		u32("deque.not_full_waiters", DequeOffNotFullW, "non-zero while the owner may sleep"),
		u64("deque.correlation", DequeOffCorrelation, "deque-wide id counter (fetch-add)"),
		u64("deque.claimed", DequeOffClaimed, "messages leased by Claim"),
		u64("deque.acked", DequeOffAcked, "leases released by Ack"),
		u64("deque.returned", DequeOffReturned, "messages handed back (Release, dead consumers) to be taken again"),
		u64("deque.poisoned", DequeOffPoisoned, "messages set aside after too many deliveries"),
		u64("deque.abandoned", DequeOffAbandoned, "half-written slots of a dead owner released"),
		u64("deque.repairs", DequeOffRepairs, "repair passes that changed something"),
		u64("deque.adopted", DequeOffAdopted, "times a new owner took the deque over"),
		u64("deque.rolled_back", DequeOffRolledBack, "pops of a dead owner rolled back in place"),
		u64("deque.repair_lock", DequeOffRepairLock, "repairer, a role word: participant index+1 (bits 0-15), generation (16-39); 0 when free"),
		u64("deque.owner", DequeOffOwner, "owner, a role word: participant index+1 (bits 0-15), generation (16-39); 0 when none"),
		u64("deque.pending", DequeOffPending, "returned slots waiting to be taken (hint)"),
		u64("deque.burned", DequeOffBurned, "positions the owner skipped because their slot still held a lease or poison"),
	}}
	m.Areas = []Area{
		PeerArea(DequeOffPeers, l.Entries),
		l.slotArea(),
	}
	return m
}
