package transport

// Crash points of this package (shm.CrashPoint): the names a crash test arms
// with SHMKIT_CRASHPOINT. Every shm.CrashPoint call names one of these, and a
// full test run kills a child at each
// (proctest.RunCoveringCrashPoints, TestCrashPointCallsNameDeclaredPoints).
const (
	crashDequeAckBeforeFree        = "deque.ack.before-free"
	crashDequeAdoptAfterFixBottom  = "deque.adopt.after-fix-bottom"
	crashDequePopAfterAnnounce     = "deque.pop.after-announce"
	crashDequePopAfterCopy         = "deque.pop.after-copy"
	crashDequePopAfterTake         = "deque.pop.after-take"
	crashDequePushAfterBurn        = "deque.push.after-burn"
	crashDequePushAfterClaim       = "deque.push.after-claim"
	crashDequePushAfterID          = "deque.push.after-id"
	crashDequePushAfterPublish     = "deque.push.after-publish"
	crashDequePushAfterRepublish   = "deque.push.after-republish"
	crashDequePushAfterWrite       = "deque.push.after-write"
	crashDequeRepairAfterFixBottom = "deque.repair.after-fix-bottom"
	crashDequeRepairMidRelease     = "deque.repair.mid-release"
	crashDequeReturnAfterMark      = "deque.return.after-mark"
	crashDequeStealAfterAdvance    = "deque.steal.after-advance"
	crashDequeStealAfterCopy       = "deque.steal.after-copy"
	crashDequeStealAfterTake       = "deque.steal.after-take"
	crashRingAckBeforeFree         = "ring.ack.before-free"
	crashRingClaimAfterAdvance     = "ring.claim.after-advance"
	crashRingClaimAfterTake        = "ring.claim.after-take"
	crashRingPopAfterAdvance       = "ring.pop.after-advance"
	crashRingPopAfterCopy          = "ring.pop.after-copy"
	crashRingPopAfterTake          = "ring.pop.after-take"
	crashRingPushAfterAdvance      = "ring.push.after-advance"
	crashRingPushAfterBurn         = "ring.push.after-burn"
	crashRingPushAfterClaim        = "ring.push.after-claim"
	crashRingPushAfterPublish      = "ring.push.after-publish"
	crashRingPushAfterWrite        = "ring.push.after-write"
	crashRingRepairAfterRequeue    = "ring.repair.after-requeue"
)

// The ring's zero-copy send (ring_loan.go: TryLoan, Loan, Publish, PublishN,
// Abort), in a block of its own. A loan's claim passes
// crashRingPushAfterBurn too (it is the push's claimTail); a death while
// the caller writes into a loan is the test-only point "test.loan.writing"
// of ring_dead_loaner_is_rolled_back_test.go.
const (
	crashRingLoanAfterClaim     = "ring.loan.after-claim"
	crashRingLoanAfterAdvance   = "ring.loan.after-advance"
	crashRingPublishBeforeReady = "ring.publish.before-ready"
	crashRingPublishAfterReady  = "ring.publish.after-ready"
	crashRingAbortAfterFree     = "ring.abort.after-free"
)

// The ring's batch calls (ring_batch.go; docs/design.md, "Batch calls"),
// in a block of their own.
const (
	crashRingAckBatchMidFree        = "ring.ack-batch.mid-free"
	crashRingClaimBatchAfterAdvance = "ring.claim-batch.after-advance"
	crashRingClaimBatchAfterTake    = "ring.claim-batch.after-take"
	crashRingPopBatchAfterAdvance   = "ring.pop-batch.after-advance"
	crashRingPopBatchAfterCopy      = "ring.pop-batch.after-copy"
	crashRingPopBatchAfterTake      = "ring.pop-batch.after-take"
	crashRingPopBatchMidFree        = "ring.pop-batch.mid-free"
	crashRingPushBatchAfterAdvance  = "ring.push-batch.after-advance"
	crashRingPushBatchAfterClaims   = "ring.push-batch.after-claims"
	crashRingPushBatchAfterPublish  = "ring.push-batch.after-publish"
	crashRingPushBatchMidPublish    = "ring.push-batch.mid-publish"
)

// The deque's batch calls (deque_batch.go; docs/design.md, "The deque",
// "Batch calls"), in a block of their own. A batch passes the single
// calls' points too where it runs their code: a push run's first claim is
// claimBottom (deque.push.after-burn, deque.push.after-republish), each
// message of a steal, pop-by-a-thief or claim batch is taken by steal
// (deque.steal.after-take, deque.steal.after-advance) and each lease of
// an ack batch freed by ack (deque.ack.before-free).
const (
	crashDequeAckBatchMidFree       = "deque.ack-batch.mid-free"
	crashDequeClaimBatchAfterTake   = "deque.claim-batch.after-take"
	crashDequePopBatchAfterAnnounce = "deque.pop-batch.after-announce"
	crashDequePopBatchAfterCopy     = "deque.pop-batch.after-copy"
	crashDequePopBatchAfterTake     = "deque.pop-batch.after-take"
	crashDequePopBatchMidFree       = "deque.pop-batch.mid-free"
	crashDequePopBatchMidTake       = "deque.pop-batch.mid-take"
	crashDequePushBatchAfterAdvance = "deque.push-batch.after-advance"
	crashDequePushBatchAfterClaims  = "deque.push-batch.after-claims"
	crashDequePushBatchAfterIDs     = "deque.push-batch.after-ids"
	crashDequePushBatchAfterPublish = "deque.push-batch.after-publish"
	crashDequePushBatchMidPublish   = "deque.push-batch.mid-publish"
	crashDequeStealBatchAfterCopy   = "deque.steal-batch.after-copy"
	crashDequeStealBatchAfterTake   = "deque.steal-batch.after-take"
	crashDequeStealBatchMidFree     = "deque.steal-batch.mid-free"
)
