# The configurations models/check.sh checks (sourced by it). Each runs one
# death at any step of any process but the drainer; see docs/design.md,
# "Models", for what each covers.

# two producers contending for positions, one popper; capacity 2
expect_pass ring-2prod-pop ring.pml -DWITH_P1 -DWITH_POPPER
# a lease (claim, then Ack or Release) beside a push, and a concurrent
# repairer through the repairer entry; capacity 2
expect_pass ring-claim-repairer ring.pml -DWITH_CLAIMER -DWITH_REPAIRER
# a loan published or aborted beside a push, one popper; capacity 2
expect_pass ring-loan-pop ring.pml -DWITH_P1 -DLOAN -DWITH_POPPER

# known-bad variants: each must be rejected with a counterexample
expect_fail ring-bad-noproof ring.pml -DWITH_CLAIMER -DWITH_REPAIRER -DBAD_NOPROOF
expect_fail ring-bad-burn-any ring.pml -DWITH_P1 -DWITH_POPPER -DC=1 -DBAD_BURN_ANY

# the deque (deque.pml): owner pushes 2 and pops 1 against a thief's
# steal (the last message), capacity 2; a thief's claim then Ack or
# Release (returned, republished) with burns, capacity 1
expect_pass dq-steal deque.pml
expect_pass dq-claim deque.pml -DCLAIM -DC=1
# known-bad: Adopt without proof of death (two live owners move bottom)
expect_fail dq-bad-adopt-noproof deque.pml -DWITH_ADOPTER -DBAD_ADOPT_NOPROOF
