#!/bin/bash
# unwind_test.sh: fleetprof's user stacks of programs built without frame
# pointers (and of a frame-pointer program calling into libc, which has
# none), each side by side with perf record --call-graph dwarf on the same
# process over the same window.  Per workload, tests/e2e/compare_stacks.py
# checks (see its header for the definitions):
#   unwind:W:samples          enough user stacks on both sides
#   unwind:W:perf-root-reach  the oracle unwound >= 90% of its stacks
#   unwind:W:root-reach       >= 97% of fleetprof's stacks reach a root
#   unwind:W:shares           functions on >= 5% of perf's stacks: inclusive
#                             shares within 5 points of perf's
#   unwind:W:no-extra-frames  the same for functions on >= 5% of fleetprof's
# Workloads: redis (redis-server under redis-benchmark, io-threads), throw
# (C++ exceptions, g++ -O2), sigwork (a signal handler on the stack, gcc
# -O2), python3 and xz (distro binaries), go (a stripped Go binary), qsort
# (clang, frame pointers, callback under libc's qsort).
#
# The Go workload's oracle is perf --call-graph fp, not dwarf: perf's DWARF
# unwinder needs CFI, and a Go binary has no .eh_frame, and -ldflags=-w
# drops .debug_frame, so perf dwarf gets the leaf frame only (0% root
# reach).  Go keeps frame pointers on amd64, which perf's (the kernel's)
# frame-pointer walk follows.  Go frame names on both sides come from the
# binary's .gopclntab (compare_stacks.py --pclntab).
#
# UNWIND_KEEP=DIR keeps each workload's files there.
# UNWIND_SECONDS (default 8) and UNWIND_HZ (default 399) set the window and
# the frequency; UNWIND_ONLY="throw go" runs some workloads only.
TEST=unwind
. tests/e2e/lib.sh

# The comparison itself, on made-up stacks with known verdicts.
if python3 tests/e2e/compare_stacks.py --self-test > "$TMP/self-test.log" 2>&1; then
	pass compare-self-test
else
	fail compare-self-test
	cat "$TMP/self-test.log"
fi

need_root

DUR=${UNWIND_SECONDS:-8}
HZ=${UNWIND_HZ:-399} # ~3000 samples a busy thread: sampling noise ~1 point
RUN=$((DUR + 4)) # workloads outlive the window
BIN=$BUILD/tests/unwind
mkdir -p "$BIN"

want() { [ -z "$UNWIND_ONLY" ] || [[ " $UNWIND_ONLY " == *" $1 "* ]]; }

# stop PID: end a workload this test started.
stop() {
	kill "$1" 2> /dev/null
	wait "$1" 2> /dev/null
}

# measure NAME PID CALLGRAPH [compare_stacks.py options]: perf and fleetprof
# on PID at once for DUR seconds, then the comparison.
measure() {
	local name=$1 pid=$2 cg=$3 d=$TMP/$1 rc
	shift 3
	mkdir -p "$d"
	if ! kill -0 "$pid" 2> /dev/null; then
		fail "$name:workload-runs" "exited before profiling"
		return
	fi
	# perf samples every CPU (-a) and keeps the process's samples (perf
	# script --pid): the way fleetprof samples (a cpu-clock event per CPU,
	# filtered by process), so both see the same sampling and differ only
	# in their stacks.  perf -p (a per-task clock) weighs short runs between
	# syscalls differently: redis's write() share was 14% there, 6% here.
	perf record -q -a -F "$HZ" --call-graph "$cg" -m 8192 -o "$d/perf.data" \
		-- sleep "$DUR" > "$d/perf.log" 2>&1 &
	local perfpid=$!
	"$FP" record -d "$DUR" -F "$HZ" -p "$pid" -o "$d/out" --cache "$TMP/cache" $RECORD_OPTS \
		> "$d/record.log" 2>&1
	rc=$?
	wait $perfpid
	check "$name:record-exit" test $rc -eq 0
	perf script --no-inline --pid "$pid" -i "$d/perf.data" -F comm,tid,ip,sym,dso \
		> "$d/perf.script" 2> "$d/perf-script.log"
	python3 tests/e2e/compare_stacks.py --workload "$name" --folded "$d/out/profile.folded" \
		--perf "$d/perf.script" --perf-callgraph "${cg%%,*}" "$@"
	# perf.data of every CPU at 64 KiB a sample runs to hundreds of MiB
	[ -n "$UNWIND_KEEP" ] && mkdir -p "$UNWIND_KEEP" && cp -r "$d" "$UNWIND_KEEP/"
	rm -f "$d/perf.data"
}

# build NAME COMMAND...: a workload build step; FAIL (not skip) when it fails.
build() {
	local name=$1
	shift
	if ! "$@" > "$TMP/build-$name.log" 2>&1; then
		fail "$name:build" "$(tail -n 3 "$TMP/build-$name.log" | tr '\n' ' ')"
		return 1
	fi
}

# a. redis-server (distro build) under redis-benchmark, with I/O threads.
if want redis; then
	if ! command -v redis-server > /dev/null || ! command -v redis-benchmark > /dev/null; then
		fail "redis:installed" "redis-server/redis-benchmark missing (tools/install-deps.sh)"
	else
		port=$(free_port)
		mkdir -p "$TMP/redis"
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--io-threads 2 --io-threads-do-reads yes --dir "$TMP/redis" \
			--logfile "$TMP/redis/redis.log" > /dev/null 2>&1 &
		rs=$!
		PIDS+=($rs)
		if wait_for 10 redis-cli -p "$port" ping > /dev/null 2>&1; then
			redis-benchmark -h 127.0.0.1 -p "$port" -q -l -c 50 -P 8 -d 64 --threads 2 \
				-t set,get,incr,lpush,lpop,hset > /dev/null 2>&1 &
			rb=$!
			PIDS+=($rb)
			sleep 1
			measure redis "$rs" dwarf,65528
			stop $rb
		else
			fail "redis:starts" "no PONG on port $port"
		fi
		stop $rs
	fi
fi

# b. C++ exceptions: libstdc++ and libgcc_s unwinding, g++ -O2.
if want throw && build throw g++ -O2 -o "$BIN/throw" tests/workload/throw.cc; then
	"$BIN/throw" $RUN > /dev/null & wl=$!
	PIDS+=($wl)
	sleep 0.5
	measure throw $wl dwarf,65528
	stop $wl
fi

# c. a signal handler on the stack (through __restore_rt), gcc -O2.
if want sigwork && build sigwork gcc -O2 -o "$BIN/sigwork" tests/workload/sigwork.c; then
	"$BIN/sigwork" $RUN > /dev/null & wl=$!
	PIDS+=($wl)
	sleep 0.5
	measure sigwork $wl dwarf,65528
	stop $wl
fi

# d. distro binaries: python3 in a CPU loop, xz compressing on two threads.
if want python3; then
	/usr/bin/python3 -c '
import sys, time
def inner(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
def outer(end):
    t = 0
    while time.monotonic() < end:
        t += inner(20000)
    return t
outer(time.monotonic() + float(sys.argv[1]))' $RUN & wl=$!
	PIDS+=($wl)
	sleep 0.5
	# the interpreter's native frames, as perf sees them (python_test.sh
	# checks its Python frames)
	RECORD_OPTS=--no-python measure python3 $wl dwarf,65528
	stop $wl
fi
if want xz; then
	if ! command -v xz > /dev/null; then
		fail "xz:installed" "xz missing (xz-utils)"
	else
		head -c 1G /dev/urandom | base64 -w 0 | xz -6 -T2 -c > /dev/null & wl=$!
		PIDS+=($wl)
		sleep 2 # the first blocks are read before any thread compresses
		measure xz $wl dwarf,65528
		stop $wl
	fi
fi

# e. a stripped Go binary (frame pointers, no .eh_frame, no symbols).
if want go; then
	GO=/usr/local/go/bin/go
	[ -x "$GO" ] || GO=$(command -v go)
	if [ -z "$GO" ]; then # Debian's golang-go, as a fallback (root: need_root)
		apt-get install -y -qq --no-install-recommends golang-go > /dev/null 2>&1
		GO=$(command -v go)
	fi
	if [ -z "$GO" ]; then
		fail "go:build" "no Go toolchain (/usr/local/go or golang-go)"
	elif build go env -C tests/workload/gowork GOTOOLCHAIN=local GOFLAGS=-mod=mod \
		"$GO" build -ldflags='-s -w' -o "$(realpath -m "$BIN/gowork")" .; then
		"$BIN/gowork" $RUN > /dev/null & wl=$!
		PIDS+=($wl)
		sleep 0.5
		measure go $wl fp --pclntab "gowork=$BIN/gowork"
		stop $wl
	fi
fi

# f. frame pointers (clang) around libc's qsort, which has none: main ->
# sort_round -> qsort internals -> compare_slow -> burn.
if want qsort && build qsort clang -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
	-o "$BIN/qsortwork" tests/workload/qsortwork.c; then
	"$BIN/qsortwork" $RUN > /dev/null & wl=$!
	PIDS+=($wl)
	sleep 0.5
	measure qsort $wl dwarf,65528
	stop $wl
fi
# Verdicts are the PASS and FAIL lines; stopping the last workload is not one.
exit 0
