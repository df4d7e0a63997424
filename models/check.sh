#!/usr/bin/env bash
# Checks the Promela models with Spin: each configuration in one run of
# the LTL claim <> finished with no fairness assumed, which reports any
# assertion violated, any deadlock (a run that stops unfinished: Spin's
# stutter extension) and any livelock (a cycle that never finishes); then
# each known-bad variant, which the same run must reject with a
# counterexample. Any
# error, an incomplete search, or a bad variant that passes fails the
# script. Two checks run at a time (JOBS; CI has 2 cores). Installs Spin
# when it is missing (a failed install fails, it never skips). Needs gcc.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v spin >/dev/null; then
	echo "spin not found: installing it (apt-get install spin)"
	sudo=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "spin is missing and this is not root and there is no sudo: cannot install it"; exit 1; }
		sudo="sudo"
	fi
	$sudo apt-get update -qq || { echo "apt-get update failed"; exit 1; }
	$sudo apt-get install -y -qq spin || { echo "apt-get install spin failed"; exit 1; }
	command -v spin >/dev/null || { echo "spin still not found after the install"; exit 1; }
fi
command -v gcc >/dev/null || { echo "gcc not found (the race detector needs it too)"; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
jobs_max=${JOBS:-2}

# Compiled checkers are kept in MODELS_CACHE (default
# ~/.cache/shmkit/models; "off" keeps none), each named by the hash of
# what made it: every file spin -a wrote (its output is the same for the
# same model and defines), the gcc command and gcc's version. gcc -O0 on
# pan.c is most of a small check's time (11 to 14 s of ring-loan-pop's
# 20 here); the search itself always runs. A changed model, define or
# compiler is a new name; entries unused for 30 days are deleted.
cache="${MODELS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shmkit/models}"
if [[ $cache != off ]]; then
	mkdir -p "$cache"
	find "$cache" -type f -mtime +30 -delete
fi
gcc_version="$(gcc --version | head -1)"

# build DIR MODEL CFLAGS DEFINES...: spin -a and gcc in DIR
build() {
	local dir=$1 model=$2 cflags=$3
	shift 3
	mkdir -p "$dir"
	cp ./*.pml "$dir/"
	(cd "$dir" && spin -a "$@" "$model" >spin.out 2>&1) ||
		{ echo "FAIL: spin -a for $model $*"; tail -5 "$dir"/spin.out; return 1; }
	local key=""
	if [[ $cache != off ]]; then
		key="$(cd "$dir" && { echo "$gcc_version"; echo "gcc -O0 $cflags -o pan pan.c"; find . -type f ! -name spin.out | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-40)"
		if [[ -f "$cache/$key" ]]; then
			cp "$cache/$key" "$dir/pan" && chmod +x "$dir/pan" && touch "$cache/$key" && return 0
		fi
	fi
	(cd "$dir" && gcc -O0 $cflags -o pan pan.c 2>gcc.out) ||
		{ echo "FAIL: gcc for $model $*"; tail -5 "$dir"/gcc.out; return 1; }
	if [[ -n $key ]]; then
		# a whole file or none under the name: two checks may build at once
		cp "$dir/pan" "$cache/$key.$BASHPID" && mv "$cache/$key.$BASHPID" "$cache/$key" || rm -f "$cache/$key.$BASHPID"
	fi
}

# One run per check: pan with the never claim of <> finished, searching
# for acceptance cycles with no fairness assumed. It checks all three
# kinds of property at once: every assertion (in the claim's scope, which
# lasts until finished is set, the drainer's last step), every deadlock
# (Spin extends a run that stops by stuttering its last state: a stop
# before finished is an accepting cycle, an invalid end state included),
# and every livelock (a cycle that never finishes). docs/design.md,
# "Models (Spin)", says why this is the safety run and the liveness run
# in one; a separate -DSAFETY build would add a compile per check.
cflags="-DCOLLAPSE -DNOFAIR"

# expect_pass NAME MODEL DEFINES...: no error, search complete
expect_pass_now() {
	local name=$1 model=$2
	shift 2
	local d="$work/$name"
	build "$d" "$model" "$cflags" "$@" || { failed=1; return; }
	(cd "$d" && ./pan -a -m4000000 >pan.out 2>&1) || true
	if ! grep -q 'errors: 0' "$d/pan.out" || grep -q 'Search not completed' "$d/pan.out"; then
		echo "FAIL: $name"; grep -E 'pan:|error|Search' "$d/pan.out" | head -5; failed=1; return
	fi
	echo "ok   $name: $(grep -E 'states, stored' "$d/pan.out" | awk '{print $1}') states, no assertion, deadlock or cycle without <> finished"
}

# expect_safe NAME MODEL DEFINES...: a safety build only (assertions and
# invalid end states, no livelock check), for a configuration whose LTL
# run does not fit the suite's time (docs/design.md says which, and what
# its LTL run by hand gave)
expect_safe_now() {
	local name=$1 model=$2
	shift 2
	local d="$work/$name"
	build "$d" "$model" "-DSAFETY -DNOCLAIM -DCOLLAPSE" "$@" || { failed=1; return; }
	(cd "$d" && ./pan -m4000000 >pan.out 2>&1) || true
	if ! grep -q 'errors: 0' "$d/pan.out" || grep -q 'Search not completed' "$d/pan.out"; then
		echo "FAIL: $name"; grep -E 'pan:|error|Search' "$d/pan.out" | head -5; failed=1; return
	fi
	echo "ok   $name: $(grep -E 'states, stored' "$d/pan.out" | awk '{print $1}') states, no assertion or invalid end state (safety run only)"
}

# expect_fail NAME MODEL DEFINES...: the same run must find a counterexample,
# an assertion violated or an acceptance cycle (not, say, an index out of
# range: that would be a broken model, not a rejected variant)
expect_fail_now() {
	local name=$1 model=$2
	shift 2
	local d="$work/$name"
	build "$d" "$model" "$cflags" "$@" || { failed=1; return; }
	(cd "$d" && ./pan -a -m4000000 >pan.out 2>&1) || true
	if grep -q 'errors: 0' "$d/pan.out" || ! ls "$d"/*.trail >/dev/null 2>&1 || ! grep -qE '^pan:1: (assertion violated|acceptance cycle)' "$d/pan.out"; then
		echo "FAIL: known-bad variant $name passed: the check cannot tell it from the code"; failed=1; return
	fi
	echo "ok   $name rejected: $(grep -m1 -E 'pan:1:' "$d/pan.out")"
}

# Checks run as background jobs, jobs_max at a time, each into its own
# log (and a .failed mark), printed in order once all are done.
order=()
spawn() {
	local f=$1 name=$2
	while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
	order+=("$name")
	(
		failed=0
		SECONDS=0
		"$f" "${@:2}"
		echo "     $name: ${SECONDS} s"
		if ((failed)); then touch "$work/$name.failed"; fi
	) >"$work/$name.log" 2>&1 &
}
expect_pass() { spawn expect_pass_now "$@"; }
expect_fail() { spawn expect_fail_now "$@"; }
expect_safe() { spawn expect_safe_now "$@"; }

# Each configuration is small enough for an exhaustive search.
SECONDS=0
source ./configs.sh
wait
for name in "${order[@]}"; do
	cat "$work/$name.log"
	if [[ -e "$work/$name.failed" ]]; then failed=1; fi
done
echo "models: ${#order[@]} checks in ${SECONDS} s wall, $jobs_max at a time"

if ((failed)); then
	echo "models: FAILED"
	exit 1
fi
echo "models: all checks passed"
