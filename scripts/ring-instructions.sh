#!/usr/bin/env bash
# Instructions per call of the ring's per-message calls (TryPush, TryPop,
# TryClaim, Ack) and of the bare reference ring's (internal/bareref), counted
# by valgrind's callgrind on the single-goroutine loops of BenchmarkBareLoop
# (transport/bare_loop_bench_test.go). Instruction counts do not depend on
# the machine's load, unlike times: docs/bench.md, "The per-message path".
#
#   scripts/ring-instructions.sh [test binary]   # default: builds ./transport's
#
# N (default 100000) iterations per benchmark. Prints one line per call:
# the function, how many times it was called, its inclusive instruction
# count per call (what it and everything it calls executed); then one
# line per loop (push and pop, or push, claim and ack, in one goroutine):
# instructions per iteration, the loop's own included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

N="${N:-100000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bin="${1:-}"
if [[ -z "$bin" ]]; then
	bin="$work/transport.test"
	go test -c -o "$bin" ./transport
fi
# Async preemption signals upset callgrind (an assertion in its signal
# handling) and split functions into recursion artefacts: turn them off.
GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$bin" \
	-test.run '^$' -test.bench 'BareLoop/loop=(pushpop|claimack)' \
	-test.benchtime="${N}x" -test.cpu 1 >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$work/cg.out" >"$work/tree" 2>/dev/null
python3 - "$work/tree" <<'EOF'
import re, sys
# callgrind_annotate --tree=caller prints, for each function, its callers
# ("<" lines, with call counts) and then the function itself ("*" line,
# inclusive cost). Recursion artefacts (name'2) are folded into the
# function.
# Each call is counted under the first of its names that was called: a
# TryPush or TryPop inlined into its caller leaves the function it calls
# (pushAs, popAs) as the call callgrind sees.
want = [
    (["transport.(*Ring).TryPush", "transport.(*Ring).pushAs"], "shmkit TryPush"),
    (["transport.(*Ring).TryPop", "transport.(*Ring).popAs"], "shmkit TryPop"),
    (["transport.(*Ring).TryClaim"], "shmkit TryClaim"),
    (["transport.(*Ring).Ack"], "shmkit Ack"),
    (["bareref.(*Ring).TryPush"], "bare TryPush"),
    (["bareref.(*Ring).TryPop"], "bare TryPop"),
]
num = lambda s: int(s.replace(",", ""))
cost, calls, pending = {}, {}, []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+([<*])\s+\S*?:(\S+?)('\d+)?( \(([\d,]+)x\))?( \[.*)?$", line)
    if not m:
        pending = []
        continue
    c, kind, fn = num(m.group(1)), m.group(2), m.group(3)
    if kind == "<":
        pending.append(num(m.group(6) or "0"))
    else:
        # Calls come in through every entry of a function; its cost is
        # the entry named with its object file ("[...]"): the entries
        # without one are its inlined code attributed to other source
        # files, already included in it.
        short = fn.split("shmkit/")[-1].split("/")[-1]
        calls[short] = calls.get(short, 0) + sum(pending)
        if m.group(7):
            cost[short] = cost.get(short, 0) + c
        pending = []
for names, label in want:
    fn = next((f for f in names if calls.get(f)), names[0])
    n = calls.get(fn, 0)
    print(f"{label:16} {n:>9} calls  {cost.get(fn, 0) / n if n else float('nan'):7.1f} instructions/call  ({fn})")

EOF

# Whole loop iterations, whatever was inlined into them: each loop run for
# N and for 2N iterations, the difference of the program's totals over N.
total() {
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" \
		-test.run '^$' -test.bench "BareLoop/$1\$" -test.benchtime="$2x" -test.cpu 1 2>&1 |
		sed -n 's/.*Collected : //p'
}
for loop in loop=pushpop/ring=shmkit loop=pushpop/ring=bare 'loop=pushpop/ring=bare\+rmw' loop=claimack/ring=shmkit; do
	a="$(total "$loop" "$N")"
	b="$(total "$loop" "$((2 * N))")"
	printf '%-28s %7.1f instructions/iteration\n' "${loop//\\/}" "$(echo "($b - $a) / $N" | bc -l)"
done
