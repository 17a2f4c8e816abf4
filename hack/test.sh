#!/usr/bin/env bash
# Runs everything `make test` checks (run it through make, which sets
# TEST_ENV), in two lanes side by side, and ends with a table: seconds per
# step and the ten slowest test packages.
#
#   checks: gofmt, go vet of every module, codegen verification, the
#           dependency, layer and size checks, the MCM suite's build;
#   tests:  the control plane (built once, cached) and the test binaries
#           side by side, then the root module's tests, the nested
#           modules' tests, MCM v0.62.1's own suite.
#
# The lanes run together because integration tests mostly wait on their
# clusters: while they do, the checks (niced) compile on the idle core. A
# failed step does not stop the others; the script fails if any step failed.
#
# Environment: GO, TEST_TIMEOUT (per go test run, default 30m), TEST_P
# (test binaries run at once, default 2), TEST_PARALLEL (parallel tests
# per binary, default 4; more starve two cores: simulated kubelets miss
# their heartbeats and tests fail on what the load did), MCM_TEST_LOGS (where the steps' logs go; a temp
# dir by default, kept and printed at the end).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GO="${GO:-go}"
TEST_TIMEOUT="${TEST_TIMEOUT:-30m}"
TEST_P="${TEST_P:-2}"
TEST_PARALLEL="${TEST_PARALLEL:-4}"
LOGS="${MCM_TEST_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/mcm-test.XXXXXX")}"
mkdir -p "$LOGS"
: >"$LOGS/steps"

# Tests run with the race detector (and, from the Makefile's TEST_ENV,
# client-go's cache mutation detector), and require the control plane
# instead of skipping without it. Symbols and DWARF are left out of test
# binaries: race reports and panics still name files and lines, and links
# take less time and disk.
export MCM_REQUIRE_TESTENV=1
# go vet with every analyzer runs over every package, test files included,
# in the checks lane: go test's own subset would repeat part of it.
GOTEST=("$GO" test -race -count=1 -vet=off -ldflags=-s\ -w -timeout "$TEST_TIMEOUT" -p "$TEST_P" -parallel "$TEST_PARALLEL")

# The slowest packages start first, so that the run does not end waiting
# on one of them alone; go test starts test binaries in the order named.
SLOW_FIRST=(./reference ./e2e/inplace ./deployment ./reference/demo ./machine ./e2e/preservation
	./machineset ./drain ./driver/sim ./kubectl-mcm/internal/cli ./safety/budget)

# step NAME CMD...: runs CMD, its output prefixed with [NAME] and kept in
# $LOGS/NAME.log, and records NAME, its seconds and its exit status.
step() {
	local name=$1 start rc
	shift
	start=$(date +%s)
	echo "[$name] \$ $*"
	"$@" 2>&1 | tee "$LOGS/$name.log" | sed -u "s/^/[$name] /"
	rc=${PIPESTATUS[0]}
	echo "$name $(($(date +%s) - start)) $rc" >>"$LOGS/steps"
	echo "[$name] $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $(($(date +%s) - start))s"
	return "$rc"
}

in_dir() { (cd "$1" && shift && "$@"); }

lane_checks() {
	step fmt-check make -s fmt-check
	step vet make -s vet
	step verify-codegen make -s verify-codegen
	step check-deps make -s check-deps
	step check-layers make -s check-layers
	step check-size make -s check-size
	# Compiles MCM's suite now, on the core the tests leave idle; the e2e
	# step then finds it in the build cache.
	step build-mcm-suite in_dir e2e/mcmsuite "$GO" test -c -o /dev/null ./test/integration/controller
}

# build_tests compiles every package the tests need, test variants
# included (go list -export compiles without linking; go test relinks its
# binaries on every run anyway), and the binaries the tests build
# themselves (the reference manager, the demo): the runs that follow find
# them in the build cache. Left to the tests, the first reference test
# compiled the manager on a cold cache while every other test of its
# package waited.
build_tests() {
	"$GO" build ./reference ./reference/demo &&
		"$GO" list -race -export -test -deps ./... >/dev/null &&
		in_dir driver/mcmdriver "$GO" list -race -export -test -deps ./... >/dev/null &&
		in_dir examples/mcmprovider "$GO" list -race -export -test -deps ./... >/dev/null
}

lane_tests() {
	# The control plane and the test binaries build side by side: the tests
	# need both, and each leaves the CPU idle at times (downloads, links).
	step build-tests build_tests &
	local build=$!
	step testenv make -s testenv
	local rc=$?
	wait "$build" || return 1
	((rc == 0)) || return 1
	step test-root "${GOTEST[@]}" "${SLOW_FIRST[@]}" ./...
	step test-mcmdriver in_dir driver/mcmdriver "${GOTEST[@]}" ./...
	step test-mcmprovider in_dir examples/mcmprovider "${GOTEST[@]}" ./...
	step e2e make -s e2e
}

all_start=$(date +%s)
# The checks come second for the CPU: nothing waits on them, while the
# tests wait on the control plane and the test binaries; niced, they take
# what the tests leave idle.
lane_checks &
checks=$!
renice -n 15 -p "$checks" >/dev/null
lane_tests &
tests=$!
wait "$checks"
wait "$tests"
wall=$(($(date +%s) - all_start))

echo
echo "== make test: seconds per step (logs in $LOGS)"
printf '%-18s %8s  %s\n' step seconds result
failed=0
while read -r name secs rc; do
	result=ok
	if ((rc != 0)); then
		result="FAILED (exit $rc)"
		failed=1
	fi
	printf '%-18s %8d  %s\n' "$name" "$secs" "$result"
done <"$LOGS/steps"
printf '%-18s %8d\n' "wall" "$wall"
echo
echo "== the ten slowest test packages"
grep -hE '^(ok|FAIL)[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "$LOGS"/test-*.log |
	awk '{sub(/s$/, "", $3); printf "%9.1fs  %s %s\n", $3, $2, ($1 == "FAIL" ? "(FAILED)" : "")}' |
	sort -rn | head -10
# Steps that never ran (a lane stopped early) count as failures.
for name in fmt-check vet verify-codegen check-deps check-layers check-size build-mcm-suite \
	build-tests testenv test-root test-mcmdriver test-mcmprovider e2e; do
	if ! grep -q "^$name " "$LOGS/steps"; then
		echo "$name: did not run"
		failed=1
	fi
done
exit "$failed"
