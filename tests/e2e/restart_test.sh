#!/bin/bash
# restart_test.sh: whole stacks from an agent's first seconds, on the
# fleet path (fleetprof-agent -> fleetprof-symbolizer WITHOUT
# --local-files), after an agent restart against a symbolizer that already
# has the tables (issue 17, items 2 and 6).  redis-server (Debian's, no
# frame pointers, with I/O threads) under redis-benchmark; the agent runs
# -p redis-server for RESTART_SECONDS (2) from its first sample and stops:
# every sample it sent was taken in its first 2 s.  A sample is whole when its stack reaches
# _start (the main thread) or clone3 / clone (a thread's start).
#
# The symbolizer's cache is filled by a first session WITH --local-files,
# only to have it quickly (fleetpath_test covers tables compiled from CFI
# the device sends); the later sessions run without --local-files, so
# every table they get comes from that cache, as from a symbolizer that
# has served the fleet before.
#
#   restart:warm                  the first session made tables
#   restart:nocache:*             --table-cache-mb 0: the tables come in the
#                                 replies to the agent's first (early) interval,
#                                 160 to 230 ms after its programs are loaded
#                                 (the load sets it); samples before are its
#                                 leaf alone: >= 85% whole (93 to 100%
#                                 measured), tables received as sent
#   restart:fill:*                an agent run that writes its table cache
#   restart:cached:*              the next agent: its tables from the cache,
#                                 named in its hello: >= 95% whole, 0 bytes of
#                                 tables received, the symbolizer held them back
TEST=restart
. tests/e2e/lib.sh
need_root

SECS=${RESTART_SECONDS:-2}
HZ=${RESTART_HZ:-299}

if ! command -v redis-server > /dev/null || ! command -v redis-benchmark > /dev/null; then
	fail installed "redis-server/redis-benchmark missing (tools/install-deps.sh)"
	exit 0
fi
rport=$(free_port)
mkdir -p "$TMP/redis"
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
	--io-threads 2 --io-threads-do-reads yes --dir "$TMP/redis" \
	--logfile "$TMP/redis/redis.log" > /dev/null 2>&1 &
rs=$!
PIDS+=($rs)
if ! wait_for 10 redis-cli -p "$rport" ping > /dev/null 2>&1; then
	fail redis-starts "no PONG on port $rport"
	exit 0
fi
redis-benchmark -h 127.0.0.1 -p "$rport" -q -l -c 20 -P 4 -d 64 --threads 2 \
	-t set,get,incr,lpush > /dev/null 2>&1 &
PIDS+=($!)

port=$(free_port)
addr=tcp://127.0.0.1:$port

# symbolizer NAME [OPTIONS...]: a symbolizer on $addr writing to
# $TMP/NAME/out, its cache shared by every phase; its pid in $symb.
symbolizer() {
	local name=$1
	shift
	mkdir -p "$TMP/$name"
	"$SYMB" "$@" --listen "$addr" --cache "$TMP/cache" --out "$TMP/$name/out" -v \
		> "$TMP/$name/symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	sleep 0.5
}

# agent NAME SECONDS [OPTIONS...]: the agent on redis-server for its first
# SECONDS of sampling (its start, loading BPF programs, is not counted),
# then stopped; the symbolizer stopped too (it writes what it has).
agent() {
	local name=$1 secs=$2 a
	shift 2
	"$AGENT" --server "$addr" -F "$HZ" --interval 1 -p "$rs" -v "$@" \
		> "$TMP/$name/agent.log" 2>&1 &
	a=$!
	PIDS+=($a)
	wait_for 60 grep -q 'sampling at' "$TMP/$name/agent.log"
	sleep "$secs"
	kill -INT "$a"
	wait "$a"
	check "$name:agent-exits-0" test $? -eq 0
	kill -TERM "$symb"
	wait "$symb"
}

# whole NAME: "WHOLE TOTAL" redis-server samples of the phase.
whole() {
	cat "$TMP/$1"/out/*/*.folded 2> /dev/null | awk '/^redis-server;/ { t += $NF
		if ($0 ~ /;(_start|[^;]*clone3?);/) w += $NF } END { print w + 0, t + 0 }'
}

# received NAME: unwind table bytes the agent received.
received() {
	sed -n 's/.* \([0-9]*\) bytes of unwind tables.*/\1/p' "$TMP/$1/agent.log"
}

# 0. Warm: the symbolizer reads redis's files once and keeps their tables.
symbolizer warm --local-files
agent warm 6 --table-cache-mb 0
warm=$(sed -n 's/.*unwind table bytes sent \([0-9]*\).*/\1/p' "$TMP/warm/symb.log" | tail -n 1)
check warm test "${warm:-0}" -gt 100000

# 1. No table cache: the agent's first interval closes as soon as it has
# read redis's mappings, and the reply carries their tables.
symbolizer nocache
agent nocache "$SECS" --table-cache-mb 0
read -r w t < <(whole nocache)
echo "no table cache: $w of $t samples whole in the first $SECS s" >&2
sent=$(sed -n 's/.*unwind table bytes sent \([0-9]*\).*/\1/p' "$TMP/nocache/symb.log" | tail -n 1)
got=$(received nocache)
echo "no table cache: tables sent $sent, received $got" >&2
grep 'first unwind tables' "$TMP/nocache/agent.log" >&2
check nocache:samples test "$t" -ge 100
check nocache:whole test $((w * 100)) -ge $((t * 85))
check nocache:tables-received test "${got:-0}" -gt 100000
check nocache:received-as-sent test "${got:-x}" = "${sent:-y}"
check nocache:closed-early grep -q '[1-9][0-9]* intervals closed early' "$TMP/nocache/agent.log"

# 2. The table cache: one agent run writes it, the next starts from it.
symbolizer fill
agent fill 3 --table-cache "$TMP/tables"
check fill:written grep -q 'table cache .*: 0 tables installed from it; [1-9][0-9]* files' \
	"$TMP/fill/agent.log"
symbolizer cached
agent cached "$SECS" --table-cache "$TMP/tables"
read -r w t < <(whole cached)
got=$(received cached)
echo "table cache: $w of $t samples whole in the first $SECS s, $got bytes of tables received" >&2
grep "table cache\|unwind tables\|first unwind tables" "$TMP/cached/agent.log" >&2
grep 'the agent held them' "$TMP/cached/symb.log" >&2
check cached:samples test "$t" -ge 100
check cached:whole test $((w * 100)) -ge $((t * 95))
check cached:nothing-received test "${got:-x}" = 0
check cached:installed-from-cache grep -q 'table cache .*: [1-9][0-9]* tables installed from it' \
	"$TMP/cached/agent.log"
check cached:held-back grep -q 'not sent, the agent held them: [1-9][0-9]* tables' \
	"$TMP/cached/symb.log"
check cached:no-bad-files grep -q ', 0 bad (removed)' "$TMP/cached/agent.log"
