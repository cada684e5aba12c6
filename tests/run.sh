#!/bin/bash
# run.sh: runs every test -- unit tests (plain and under ASan+UBSan), fuzz
# targets over their corpora, end-to-end tests -- and ends with the line
# "N passed, N failed".  Each test prints PASS:, FAIL: or SKIP: lines.
#   tests/run.sh                every test
#   tests/run.sh --unit NAME... the unit tests of those modules only
#                               (build/tests/NAME_test, plain and ASan)
BUILD=${BUILD:-build}
export BUILD
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
log=$(mktemp -d /tmp/fleetprof-tests.XXXXXX)
results=$log/results
: > "$results"

# run_one NAME COMMAND...: run a test program; a crash or a non-zero exit
# without any FAIL line counts as a failure of its own.
run_one() {
	local name=$1 out=$log/$(basename "$1").out rc
	shift
	# A test that hangs fails (exit 124) rather than stall the run.
	timeout -k 10 "${TEST_TIMEOUT:-1200}" "$@" > "$out" 2>&1
	rc=$?
	grep -E '^(PASS|FAIL|SKIP): ' "$out" | tee -a "$results"
	if [ $rc -ne 0 ] && ! grep -q '^FAIL: ' "$out"; then
		echo "FAIL: $name (exit $rc)" | tee -a "$results"
	fi
	if [ $rc -ne 0 ] || grep -q '^FAIL: ' "$out"; then
		echo "---- output of $name ----"; tail -n 40 "$out"; echo "----"
	fi
}

# The sources as .clang-format says (make format-check).
if [ "$1" != --unit ]; then
	if make -s format-check > "$log/format.out" 2>&1; then
		echo "PASS: format" | tee -a "$results"
	else
		echo "FAIL: format" | tee -a "$results"
		tail -n 20 "$log/format.out"
	fi
fi
units=("$BUILD"/tests/*_test)
if [ "$1" = --unit ]; then
	shift
	units=()
	for n in "$@"; do
		units+=("$BUILD/tests/${n}_test")
	done
fi
for t in "${units[@]}"; do
	[ -x "$t" ] && run_one "$t" "$t"
done
for t in "${units[@]}"; do
	t=$BUILD/asan/tests/$(basename "$t")
	[ -x "$t" ] || continue
	run_one "asan/$(basename "$t")" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		bash -c "'$t' | sed 's/^\(PASS\|FAIL\|SKIP\): /\1: asan:/'; exit \${PIPESTATUS[0]}"
done
[ -n "$1" ] && units_only=1
for f in "$BUILD"/fuzz/fuzz_*; do
	[ -n "$units_only" ] && break
	[ -x "$f" ] || continue
	name=$(basename "$f")
	corpus=$log/corpus-$name
	mkdir -p "$corpus"
	if "$f" -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 -artifact_prefix="$log/$name-" \
		"$corpus" "tests/fuzz/corpus/$name" \
		> "$log/$name.out" 2>&1; then
		echo "PASS: fuzz:$name ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$log/$name.out" | grep -o '[0-9]*$') runs)" | tee -a "$results"
	else
		echo "FAIL: fuzz:$name" | tee -a "$results"
		tail -n 40 "$log/$name.out"
	fi
done
# Each end-to-end test runs in a session of its own; what it left running
# (a workload that outlived its kill would take CPU from every test after
# it) is named and killed.
for t in tests/e2e/*_test.sh; do
	[ -n "$units_only" ] && break
	run_one "$t" setsid -w bash -c 'echo $$ > "$0"; exec bash "$1"' "$log/sid" "$t"
	sid=$(cat "$log/sid" 2>/dev/null)
	if [ -n "$sid" ] && pgrep -s "$sid" > /dev/null; then
		pgrep -a -s "$sid" | sed "s|^|left running by $t: |"
		pkill -9 -s "$sid"
	fi
done

passed=$(grep -c '^PASS: ' "$results")
failed=$(grep -c '^FAIL: ' "$results")
skipped=$(grep -c '^SKIP: ' "$results")
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
