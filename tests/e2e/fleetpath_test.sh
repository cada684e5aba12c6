#!/bin/bash
# fleetpath_test.sh: whole stacks on the fleet path, as deployed: agent ->
# symbolizer WITHOUT --local-files, libc's symbols from its detached debug
# file (libc6-dbg), whose .eh_frame is NOBITS, so libc's CFI must come
# from somewhere else.  Three processes under one agent (-i 2): Debian's
# redis-server under redis-benchmark, tests/workload/threadwork.c
# (gcc -O2 -fomit-frame-pointer, threads doing qsort/memcpy/strtod) and
# tests/workload/streamwork.cc (g++, its time in libstdc++, whose table
# the agent installs only once a walk needs it).
# Three places for libc's symbols:
#   debugdir    the debug directory (/usr/lib/debug, the default): CFI from
#               the device (asked in the first reply: the debug file is
#               known at once to have none)
#   debuginfo   only a debuginfod server (Debian's debuginfod) that has
#               libc's debuginfo and no executable: CFI from the device,
#               asked once debuginfod said it has no executable (one reply
#               later)
#   executable  the same server with libc's executable too: CFI from its
#               /executable, and the device is never asked for libc
#   store       the symbolizer's store (--store) with libc's debug file
#               and its executable, as uploads leave them: CFI from the
#               store's executable, the device never asked for libc
# and, for /metrics and the log, a symbolizer whose cache has libc's
# symbols and no table, as a release without this change left it:
#   upgrade     libc has symbols and waits for a device's CFI (counted,
#               logged once), then has a table
# Each checks the share of each process's samples (sample-weighted, from
# the folded files) whose stacks reach _start (main thread) or clone3
# (threads): >= 95% from the third interval on (debugdir, upgrade), from
# the fourth where the debuginfod server must be asked first.  The first
# intervals are the agent's early ones (a few hundred ms each, while
# tables are to come): the fourth ends within about 1 s of the agent's
# start (the files' time stamps say so); and the
# names of libc's internal functions (from its debug file), redis's and
# the workload's (both from the device).
# FLEETPATH_KEEP=DIR keeps each scenario's files there.
TEST=fleetpath
. tests/e2e/lib.sh
need_root

# need WHAT: a prerequisite is missing: skip, but fail under CI.
need() {
	if [ -n "$CI" ]; then
		fail "prerequisites" "$1"
	else
		echo "SKIP: $TEST ($1)"
	fi
	exit 0
}

LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
LIBC_BID=$(readelf -n "$LIBC" 2>/dev/null | awk '/Build ID/ { print $3; exit }')
LIBC_DEBUG=/usr/lib/debug/.build-id/${LIBC_BID:0:2}/${LIBC_BID:2}.debug
[ -n "$LIBC_BID" ] && [ -f "$LIBC_DEBUG" ] || need "libc's debug file (libc6-dbg)"
for cmd in redis-server redis-benchmark redis-cli debuginfod gcc curl; do
	command -v "$cmd" > /dev/null || need "$cmd"
done
gcc -O2 -fomit-frame-pointer -pthread tests/workload/threadwork.c -o "$TMP/threadwork" ||
	need "threadwork does not build"
g++ -O2 -fomit-frame-pointer tests/workload/streamwork.cc -o "$TMP/streamwork" ||
	need "streamwork does not build"
SECONDS_EACH=${FLEETPATH_SECONDS:-16}

# The kernel's kallsyms are with the symbolizer already, as in a fleet:
# uploaded once, by an agent that profiles only a kernel thread (no user
# files, so no table and no fetch), into a cache each scenario copies.
warm=tcp://127.0.0.1:$(free_port)
"$SYMB" --listen "$warm" --cache "$TMP/warm" --out "$TMP/warm-out" > "$TMP/warm.log" 2>&1 &
wsymb=$!
PIDS+=($wsymb)
"$AGENT" --table-cache "$TMP/warm-tables" --server "$warm" -i 1 -p 2 > "$TMP/warm-agent.log" 2>&1 &
wagent=$!
PIDS+=($wagent)
wait_for 30 grep -q "stored kallsyms of vmlinux" "$TMP/warm.log"
kill -INT "$wagent"; wait "$wagent"
kill -TERM "$wsymb"; wait "$wsymb"
check kallsyms-warm grep -q "stored kallsyms of vmlinux" "$TMP/warm.log"

# metric FILE NAME: the value of one sample of /metrics text (0 if none).
metric() {
	awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }' "$1"
}

# debuginfod_up DIR PORT: Debian's debuginfod serving what DIR holds;
# returns once it answers for libc's debuginfo.
debuginfod_up() {
	# Not federated: a DEBUGINFOD_URLS (Debian sets one for login shells)
	# would send each miss to a server this machine cannot reach.
	env -u DEBUGINFOD_URLS debuginfod -F -p "$2" -d "$1.sqlite" -t 0 -g 0 "$1" > "$1.log" 2>&1 &
	PIDS+=($!)
	DEBUGINFOD_PID=$!
	wait_for 60 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' \
		http://127.0.0.1:$2/buildid/$LIBC_BID/debuginfo)\" = 200 ]"
}

# run NAME SYMBOLIZER-ARGS...: a symbolizer (its own copy of the warm
# cache, /metrics on), redis-server under redis-benchmark and threadwork,
# one agent on both for SECONDS_EACH seconds; the files in $TMP/NAME.
run() {
	local name=$1 d=$TMP/$1 addr http rport symb redis bench work agent
	shift
	mkdir -p "$d"
	cp -a "${FLEETPATH_CACHE:-$TMP/warm}" "$d/cache"
	addr=tcp://127.0.0.1:$(free_port)
	http=127.0.0.1:$(free_port)
	rport=$(free_port)
	"$SYMB" --listen "$addr" --cache "$d/cache" --out "$d/out" --http "$http" \
		--store "$d/store" "$@" > "$d/symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
		> "$d/redis.log" 2>&1 &
	redis=$!
	PIDS+=($redis)
	wait_for 10 redis-cli -p "$rport" ping > /dev/null 2>&1
	redis-benchmark -p "$rport" -q -n 100000000 -c 20 > /dev/null 2>&1 &
	bench=$!
	PIDS+=($bench)
	"$TMP/threadwork" $((SECONDS_EACH + 30)) 2 > /dev/null &
	work=$!
	PIDS+=($work)
	"$TMP/streamwork" $((SECONDS_EACH + 30)) > /dev/null &
	stream=$!
	PIDS+=($stream)
	"$AGENT" --table-cache "$d/tables" --server "$addr" -i 2 -p "$redis" -p "$work" \
		-p "$stream" > "$d/agent.log" 2>&1 &
	agent=$!
	PIDS+=($agent)
	local end=$((SECONDS + SECONDS_EACH))
	while [ $SECONDS -lt $end ]; do
		curl -s "http://$http/metrics" > "$d/metrics.now" && cat "$d/metrics.now" >> "$d/metrics.all"
		sleep 0.5
	done
	kill -INT "$agent"; wait "$agent"
	curl -s "http://$http/metrics" > "$d/metrics.end"
	kill -TERM "$symb"; wait "$symb"
	kill "$bench" "$work" "$stream" "$redis" 2>/dev/null
	wait "$bench" "$work" "$stream" "$redis" 2>/dev/null
	if [ -n "$FLEETPATH_KEEP" ]; then
		mkdir -p "$FLEETPATH_KEEP" && cp -a "$d" "$FLEETPATH_KEEP/"
	fi
}

# whole NAME FIRST: >= 95% of each process's samples reach their root from
# the FIRST-th interval on.
whole() {
	local p share samples
	for p in redis-server threadwork; do
		read -r share samples < <(python3 tests/e2e/root_share.py "$TMP/$1/out" "$2" "$p")
		echo "$1: $p: $share% of $samples samples from interval $2 on reach _start/clone3"
		if python3 -c "import sys; sys.exit(not ($samples >= 20 and $share >= 95))"; then
			pass "$1:$p:whole-stacks"
		else
			fail "$1:$p:whole-stacks" "$share% of $samples; $(roots "$1" "$p")"
		fi
	done
	# streamwork's libstdc++ (CFI from the device; its table kept by the
	# agent until a walk needs it) is whole about 1.5 s in, the early
	# intervals still: its last 5 intervals.
	local n
	n=$(ls "$TMP/$1"/out/*/*.folded | wc -l)
	read -r share samples < <(python3 tests/e2e/root_share.py "$TMP/$1/out" $((n - 4))-$n streamwork)
	echo "$1: streamwork: $share% of $samples samples of the last 5 intervals reach _start" >&2
	if python3 -c "import sys; sys.exit(not ($samples >= 20 and $share >= 97))"; then
		pass "$1:streamwork:whole-stacks"
	else
		fail "$1:streamwork:whole-stacks" "$share% of $samples; $(roots "$1" streamwork)"
	fi
	# The first interval was not: no table was here yet (a cache or a
	# source that had them would make this test prove nothing).
	read -r share samples < <(python3 tests/e2e/root_share.py "$TMP/$1/out" 1-1 redis-server)
	check "$1:first-interval-cut" python3 -c "import sys; sys.exit(not $share < 50)"
}

# later NAME: the folded lines of interval 3 on (STAMP-SEQ.folded, in
# the order of SEQ).
later() {
	ls "$TMP/$1"/out/*/*.folded | awk -F- '{ print $NF "\t" $0 }' | sort -n | tail -n +3 \
		| cut -f2 | xargs cat
}

# roots NAME PROCESS: why stacks are not whole, for a failure's message:
# the three commonest outermost frames of PROCESS's lines from interval 3
# on, with their samples, and the symbolizer's count of symbol jobs.
roots() {
	later "$1" | awk -v p="$2" '{ c = $NF; sub(/ [0-9]+$/, ""); split($0, f, ";") }
		f[1] == p { n[f[2]] += c } END { for (r in n) print n[r], r }' \
		| sort -nr | head -3 | tr '\n' ','
	grep -o 'symbol workers: .*' "$TMP/$1/symb.log" | tail -1
}

# names NAME: frames named from libc's debug file (internal functions its
# .dynsym lacks), redis's and threadwork's (both from the device).
names() {
	local f=$TMP/$1/later.folded why
	later "$1" > "$f"
	why="$(grep -c . "$f") lines, $(grep -c __libc_start_call_main "$f") with a name from libc's debug file; threadwork: $(roots "$1" threadwork)"
	named "$1:names-redis" '^redis-server;_start;__libc_start_main;__libc_start_call_main;main;aeMain;'
	named "$1:names-thread" \
		'^threadwork;__GI___clone3;start_thread;worker;sort_round;qsort_r;(msort_with_tmp[^;]*;)+compare_numbers '
	named "$1:names-main-thread" '^threadwork;_start;__libc_start_main;__libc_start_call_main;main;worker;'
	named "$1:names-strtod" '^threadwork;[^ ]*;parse_round;[^ ]*strtod'
}

# named CHECK REGEX: a line of $f matches (names' $f and $why).
named() {
	if grep -qE "$2" "$f"; then pass "$1"; else fail "$1" "$why"; fi
}

# no_table_left NAME: at the end no build-ID with symbols waits for a
# table, and none lacks CFI or failed to compile.
no_table_left() {
	local r
	for r in searching device no_cfi compile_failed; do
		check "$1:missing-$r-0" [ "$(metric "$TMP/$1/metrics.end" \
			"fleetprof_unwind_tables_missing{reason=\"$r\"}")" = 0 ]
	done
}

# --- 1. libc6-dbg in the debug directory ------------------------------------
run debugdir
whole debugdir 3
names debugdir
no_table_left debugdir
check debugdir:libc-cfi-from-device grep -q "CFI of $LIBC_BID fetched from the device" \
	"$TMP/debugdir/symb.log"
check debugdir:libc-symbols-from-debug-dir [ "$(metric "$TMP/debugdir/metrics.end" \
	'fleetprof_symbol_hits_total{source="debug_dir"}')" -ge 1 ]
check debugdir:cfi-fetches [ "$(metric "$TMP/debugdir/metrics.end" \
	'fleetprof_device_fetches_started_total{what="cfi"}')" -ge 1 ]
# The agent's own count: walks that reached the root.
check debugdir:agent-walks-to-root grep -qE 'stack walks: [0-9]+, [1-9][0-9]* to the root' \
	"$TMP/debugdir/agent.log"
# libstdc++'s table (more rows than the agent installs at once) was kept
# for when a walk needed it, and streamwork's walks needed it: installed
# then (its whole stacks are checked above).
check debugdir:tables-deferred-then-installed grep -qE \
	'[1-9][0-9]* kept for when a walk needs them, [1-9][0-9]* installed so' "$TMP/debugdir/agent.log"

# --- 2. a cache with libc's symbols and no table ---------------------------
# (fleetprof symbolize -e stores libc's symbols, from its debug file, as
# the symbolizer does.)  Why libc has no table is counted and logged from
# the first reply on, while the device is asked; then it has one.
mkdir -p "$TMP/upgrade"
cp -a "$TMP/warm" "$TMP/upgrade-cache"
"$FP" symbolize -e "$LIBC" --cache "$TMP/upgrade-cache" < /dev/null > /dev/null
addr=0x$(nm "$LIBC_DEBUG" | awk '$3 == "__libc_start_call_main" { print $1; exit }')
check upgrade:cache-has-libc-symbols bash -c "echo $addr | '$FP' symbolize --build-id $LIBC_BID \
	--cache '$TMP/upgrade-cache' | grep -q __libc_start_call_main"
check upgrade:cache-has-no-libc-table bash -c "! '$FP' symbolize --unwind-table \
	--build-id $LIBC_BID --cache '$TMP/upgrade-cache' -o '$TMP/none' 2>/dev/null"
export FLEETPATH_CACHE=$TMP/upgrade-cache
run upgrade
unset FLEETPATH_CACHE
whole upgrade 3
no_table_left upgrade
s=$TMP/upgrade/symb.log
check upgrade:libc-waited-for-device grep -q \
	"unwind table of $LIBC_BID ($LIBC): no source of this host has CFI: asking a device" "$s"
check upgrade:logged-once [ "$(grep -c "unwind table of $LIBC_BID (" "$s")" = 1 ]
check upgrade:libc-cfi-from-device grep -q "CFI of $LIBC_BID fetched from the device" "$s"
check upgrade:missing-device-counted [ "$(metric "$TMP/upgrade/metrics.end" \
	'fleetprof_unwind_tables_missing_total{reason="device"}')" -ge 1 ]
check upgrade:tables-compiled [ "$(metric "$TMP/upgrade/metrics.end" \
	'fleetprof_unwind_tables_compiled_total')" -ge 1 ]

# --- 3. debuginfod with libc's debuginfo only ------------------------------
mkdir -p "$TMP/empty" "$TMP/dbgonly"
cp "$LIBC_DEBUG" "$TMP/dbgonly/libc.debug"
dport=$(free_port)
debuginfod_up "$TMP/dbgonly" "$dport"
check debuginfo:server-has-no-executable [ "$(curl -s -o /dev/null -w '%{http_code}' \
	"http://127.0.0.1:$dport/buildid/$LIBC_BID/executable")" = 404 ]
run debuginfo --debug-dir "$TMP/empty" --debuginfod "http://127.0.0.1:$dport"
kill "$DEBUGINFOD_PID"; wait "$DEBUGINFOD_PID" 2>/dev/null
whole debuginfo 4
names debuginfo
no_table_left debuginfo
s=$TMP/debuginfo/symb.log
check debuginfo:libc-symbols-from-debuginfod grep -q "debuginfod: fetched $LIBC_BID .*debuginfo" "$s"
check debuginfo:libc-cfi-from-device grep -q "CFI of $LIBC_BID fetched from the device" "$s"

# --- 4. debuginfod with libc's executable too -------------------------------
mkdir -p "$TMP/both"
cp "$LIBC_DEBUG" "$TMP/both/libc.debug"
cp "$LIBC" "$TMP/both/libc.so.6"
dport=$(free_port)
debuginfod_up "$TMP/both" "$dport"
wait_for 60 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' \
	http://127.0.0.1:$dport/buildid/$LIBC_BID/executable)\" = 200 ]"
run executable --debug-dir "$TMP/empty" --debuginfod "http://127.0.0.1:$dport"
kill "$DEBUGINFOD_PID"; wait "$DEBUGINFOD_PID" 2>/dev/null
whole executable 4
names executable
no_table_left executable
s=$TMP/executable/symb.log
check executable:libc-from-executable grep -q "debuginfod: fetched $LIBC_BID .*executable" "$s"
check executable:device-not-asked-for-libc bash -c "! grep -qE \
	'(CFI|symbols) of $LIBC_BID (fetched )?from the device|unwind table of $LIBC_BID .*asking a device' '$s'"
check executable:server-sent-executable grep -q "GET /buildid/$LIBC_BID/executable 200" \
	"$TMP/both.log"

# --- 5. the store, with the uploads of libc's debug file and executable ----
hex=$LIBC_BID
mkdir -p "$TMP/store/store/.build-id/${hex:0:2}"
cp "$LIBC_DEBUG" "$TMP/store/store/.build-id/${hex:0:2}/${hex:2}.debug"
cp "$LIBC" "$TMP/store/store/.build-id/${hex:0:2}/${hex:2}"
run store --debug-dir "$TMP/empty"
whole store 3
names store
no_table_left store
s=$TMP/store/symb.log
check store:libc-symbols-from-store [ "$(metric "$TMP/store/metrics.end" \
	'fleetprof_symbol_hits_total{source="fetch"}')" -ge 1 ]
check store:device-not-asked-for-libc bash -c "! grep -qE \
	'(CFI|symbols) of $LIBC_BID (fetched )?from the device|unwind table of $LIBC_BID .*asking a device' '$s'"
tail -n 6 "$TMP/debugdir/symb.log" "$TMP/debugdir/agent.log" >&2
