#!/usr/bin/env bash
# Crash-loop soaks (issue 15): the participant-table tests that run a fleet
# of processes that each attach (register), take something and die by
# SIGKILL, one after another, two at a time, beside one live participant,
# on a table of 4 entries: leased ring consumers (a ring with room, and a
# full ring whose leases must be parked), deque thieves, hash map writers
# killed mid-write, heartbeat members with and without recorded leases.
# Every attach must succeed and nothing may be lost. Then the bridged
# soak (below). SHMKIT_SOAK_LOOPS
# children per loop (default 3000; the normal suite runs 250, 100 under
# -race). Without -race a child costs 7-11 ms here (2 cores; about 90 s
# in all). Each test logs its measured time per child.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SHMKIT_SOAK_LOOPS="${SHMKIT_SOAK_LOOPS:-3000}"
started=$SECONDS
printf '\n=== soak: %s children per crash loop\n' "$SHMKIT_SOAK_LOOPS"
go test -count=1 -timeout 30m -v \
	-run '^(TestCrashLooping|TestRegisterRecoversDeadSlots)' \
	./transport ./transport/hashmap ./sched/heartbeat 2>&1 | grep -v '^=== RUN'

# The bridged soak (issue 19): 100 000 numbered, checksummed messages ring
# A -> shmbridge out -> JetStream -> shmbridge in -> ring B while both
# bridges are SIGKILLed over and over at random crash points and restarted
# (the NATS server runs in the test process). B must get every message,
# the stream store each once. About 25 s here (2 cores).
export SHMBRIDGE_SOAK_MESSAGES="${SHMBRIDGE_SOAK_MESSAGES:-100000}"
printf '\n=== soak: %s messages bridged both ways with bridge kills\n' "$SHMBRIDGE_SOAK_MESSAGES"
go test -count=1 -timeout 15m -v -run '^TestBridgedSoakWithKillsLosesNothing$' ./cmd/shmbridge 2>&1 | grep -v '^=== RUN'
echo
echo "soak.sh: passed in $((SECONDS - started))s"
