# The configurations and known-bad variants models/check.sh checks
# (sourced by it). A death may land at any step of any process but the
# drainer; MAXD bounds the deaths of a run (1 unless set). docs/design.md,
# "Models (Spin)", says what each covers. Ordered largest first, so the
# two job slots finish together.

# deque: adoption of a dead owner's deque (the owner pushes 2 and pops 2,
# a thief steals, an adopter adopts, pushes, pops; BAD_STALE_JUDGE was
# found here); capacity 2. Safety only: its LTL run (5.7 M states, about
# 60 s of CPU, no error) is by hand, for the suite's time.
expect_safe dq-adopt deque.pml -DWITH_ADOPTER
# ring: a producer and a loan published or aborted, and a popper; capacity 2
expect_pass ring-loan-pop ring.pml -DWITH_P1 -DLOAN -DWITH_POPPER
# ring: a lease (claim, then Ack or Release) beside a push, and a
# concurrent repairer through the repairer entry; capacity 2
expect_pass ring-claim-repairer ring.pml -DWITH_CLAIMER -DWITH_REPAIRER
# ring: the claimer and repairer of ring-claim-repairer with delivery
# limit 1: a message redelivered (released, or its holder dead) is set
# aside as poison, a repair's requeue burns past it, a dead lease beside
# a poison in the full ring is deferred, TakePoisoned makes room; capacity 2
expect_pass ring-claim-poison ring.pml -DWITH_CLAIMER -DWITH_REPAIRER -DLIMIT=1
# ring: two producers contending for positions, one popper; capacity 2
expect_pass ring-2prod-pop ring.pml -DWITH_P1 -DWITH_POPPER
# ring: a TryPushBatch of 2 against a TryPopBatch of 2, two deaths; capacity 2
expect_pass ring-batch-2deaths ring.pml -DBATCH -DM0=2 -DWITH_POPPER -DPOPBATCH -DMAXD=2
# ring: a TryClaimBatch of 2 then AckBatch against two pushes, two deaths; capacity 2
expect_pass ring-claim-batch-2deaths ring.pml -DWITH_CLAIMER -DCLAIMBATCH -DM0=2 -DMAXD=2

# deque: the owner pushes 2 and pops 2 (the second races the thief's
# steal for the last message), two deaths; capacity 2
expect_pass dq-steal-2deaths deque.pml -DMAXD=2
# deque: the owner's TryPushBatch of 2 and TryPopBatch of 2 against a
# thief's TryStealBatch of 2, two deaths (owner and repairer: the bug
# BAD_RELEASE_FORWARD was); capacity 2
expect_pass dq-batch-2deaths deque.pml -DDQBATCH -DMAXD=2
# deque: a thief's claim then Ack or Release (returned, republished) with
# burns, two deaths; capacity 1
expect_pass dq-claim-2deaths deque.pml -DCLAIM -DC=1 -DMAXD=2

# known-bad variants: each must be rejected with a counterexample. The
# first four are wrong without any death (MAXD=0: found sooner); the last
# two are the code's bugs the models found, which need deaths.
expect_fail ring-bad-noproof ring.pml -DWITH_CLAIMER -DWITH_REPAIRER -DBAD_NOPROOF -DMAXD=0
expect_fail ring-bad-burn-any ring.pml -DWITH_P1 -DWITH_POPPER -DC=1 -DBAD_BURN_ANY -DMAXD=0
expect_fail dq-bad-adopt-noproof deque.pml -DWITH_ADOPTER -DBAD_ADOPT_NOPROOF -DMAXD=0
expect_fail dq-bad-steal-nocas deque.pml -DBAD_STEAL_NOCAS -DMAXD=0
expect_fail dq-bad-release-forward deque.pml -DDQBATCH -DMAXD=2 -DBAD_RELEASE_FORWARD
expect_fail dq-bad-stale-judge deque.pml -DWITH_ADOPTER -DNPUSH=1 -DNPOP=1 -DBAD_STALE_JUDGE
