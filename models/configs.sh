# The configurations and known-bad variants models/check.sh checks
# (sourced by it). A death may land at any step of any process but the
# drainer; MAXD bounds the deaths of a run (1 unless set). docs/design.md,
# "Models (Spin)", says what each covers. Ordered largest first, so the
# two job slots finish together.

# ring: a producer and a loan published or aborted, and a popper; capacity 2
expect_pass ring-loan-pop ring.pml -DWITH_P1 -DLOAN -DWITH_POPPER
# ring: a lease (claim, then Ack or Release) beside a push, and a
# concurrent repairer through the repairer entry; capacity 2
expect_pass ring-claim-repairer ring.pml -DWITH_CLAIMER -DWITH_REPAIRER
# ring: two producers contending for positions, one popper; capacity 2
expect_pass ring-2prod-pop ring.pml -DWITH_P1 -DWITH_POPPER
# ring: a TryPushBatch of 2 against a TryPopBatch of 2, two deaths; capacity 2
expect_pass ring-batch-2deaths ring.pml -DBATCH -DM0=2 -DWITH_POPPER -DPOPBATCH -DMAXD=2

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

# known-bad variants: each must be rejected with a counterexample
expect_fail ring-bad-noproof ring.pml -DWITH_CLAIMER -DWITH_REPAIRER -DBAD_NOPROOF
expect_fail ring-bad-burn-any ring.pml -DWITH_P1 -DWITH_POPPER -DC=1 -DBAD_BURN_ANY
expect_fail dq-bad-adopt-noproof deque.pml -DWITH_ADOPTER -DBAD_ADOPT_NOPROOF
expect_fail dq-bad-steal-nocas deque.pml -DBAD_STEAL_NOCAS
expect_fail dq-bad-release-forward deque.pml -DDQBATCH -DMAXD=2 -DBAD_RELEASE_FORWARD
