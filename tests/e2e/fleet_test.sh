#!/bin/bash
# fleet_test.sh: replies never wait for symbol work.  51 simulated devices
# (fleetprof loadgen) talk to one symbolizer with an empty cache; device 0
# maps librbd.so.1, whose detached debug file (librbd1-dbg, 137 MB, full
# DWARF) the symbolizer then ingests.  Every hello and batch of the 50
# others must be answered, with p99 under 50 ms.  Then, with the real
# agent, a symbolizer made busy (--max-queued 1) loses none of its samples.
TEST=fleet
. tests/e2e/lib.sh

BIG=${FLEET_BIG:-/usr/lib/x86_64-linux-gnu/librbd.so.1}
SECONDS_RUN=${FLEET_SECONDS:-20}
id=$(readelf -n "$BIG" 2>/dev/null | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
if [ -z "$id" ] || [ ! -r "$debug" ]; then
	fail "big-debug-file" "$BIG or its debug file $debug is missing (tools/install-deps.sh installs librbd1-dbg)"
	exit 0
fi
check big-debug-file-over-100MB test "$(stat -c %s "$debug")" -ge 100000000

# Bad flags: a clear message and exit status 2; a bad --map-file: 1.
bad_flag() { # bad_flag NAME STATUS TEXT ARGS...
	local name=$1 status=$2 text=$3 out rc
	shift 3
	out=$("$FP" loadgen "$@" 2>&1)
	rc=$?
	if [ $rc -eq "$status" ] && grep -qF -- "$text" <<< "$out"; then
		pass "$name"
	else
		fail "$name" "exit $rc: $(head -n 1 <<< "$out")"
	fi
}
bad_flag flag-devices-zero 2 "invalid --devices '0'" --server tcp://127.0.0.1:1 --devices 0 --seconds 1
bad_flag flag-rate-text 2 "invalid --rate 'fast'" --server tcp://127.0.0.1:1 --devices 1 --seconds 1 --rate fast
bad_flag flag-missing-server 2 "are required" --devices 1 --seconds 1
bad_flag flag-unknown 2 "usage: fleetprof loadgen" --server tcp://127.0.0.1:1 --devices 1 --seconds 1 --frobnicate
bad_flag flag-bad-address 1 "device 0: nope://x" --server nope://x --devices 1 --seconds 1
bad_flag flag-map-file-missing 1 "map-file /nonexistent" --server tcp://127.0.0.1:1 --devices 1 --seconds 1 --map-file /nonexistent
check help-exits-0 bash -c "'$FP' loadgen --help | grep -q -- '--churn NEW_STACKS_PER_S'"
# The symbolizer's bound on the bytes queued for the sinks: 1 to 65536 MiB.
for v in 0 65537 many; do
	out=$("$SYMB" --max-queued-mb "$v" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && grep -qF -- "invalid --max-queued-mb '$v'" <<< "$out"; then
		pass "symbolizer-flag-max-queued-mb-$v"
	else
		fail "symbolizer-flag-max-queued-mb-$v" "exit $rc: $(head -n 1 <<< "$out")"
	fi
done

port=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
sleep 0.5

"$FP" loadgen --server "$addr" --devices 51 --seconds "$SECONDS_RUN" --interval 1 \
	--timeout 5 --map-file "$BIG" > "$TMP/loadgen.out" 2>&1
check loadgen-exits-0 test $? -eq 0
summary=$(grep '^loadgen: ' "$TMP/loadgen.out")
echo "$summary" >&2
field() { echo "$summary" | sed -n "s/.* $1=\([0-9.a-z]*\).*/\1/p"; }

# The big file was really ingested, from the debug file, in this run: its
# C++ names are in device 0's profiles (the cache started empty).
ingested() { grep -qh 'librbd::' "$TMP"/out/loadgen-00000/*.folded 2>/dev/null; }
wait_for 120 ingested
check big-binary-ingested ingested

check all-hellos-answered test "$(field hellos)" -ge 50
check batches-answered test "$(field batches)" -ge $((50 * (SECONDS_RUN - 2)))
check none-unanswered test "$(field unanswered)" = 0
grep 'unanswered after' "$TMP/loadgen.out" >&2
check no-timeouts test "$(field timeouts)" = 0
check no-rejections test "$(field rejected)" = 0
check no-errors test "$(field errors)" = 0
p99=$(field p99_ms)
check p99-under-50ms awk -v p="$p99" 'BEGIN { exit !(p != "" && p < 50) }'
echo "p99 $p99 ms, max $(field max_ms) ms; device 0's first batch answered in $(field map_file_ms) ms" >&2
kill -TERM "$symb"; wait "$symb"
tail -n 5 "$TMP/symb.log" >&2
# 51 connections made and closed by the devices: none was refused.
check no-connection-refused grep -q 'accepted 51; refused: TLS authentication 0, protocol 0, too many 0;' \
	"$TMP/symb.log"
# No reply took the server over a second to build, ingest or not.
check no-request-over-1s grep -q 'slowest request [0-9.]* ms, 0 over 1 s' "$TMP/symb.log"

# Busy (root: the real agent): a symbolizer whose sinks are behind takes no batch, and nothing is
# lost.  With --max-queued 1, device 0's first profile, held back while
# librbd's debug file is ingested (up to --symbol-wait), makes the
# symbolizer busy; the real agent's batches of that time are answered so,
# kept and sent again, and every sample it took is in its profiles once.
need_root
port=$(free_port)
addr=tcp://127.0.0.1:$port
hport=$(free_port)
"$SYMB" --local-files --listen "$addr" --cache "$TMP/bcache" --out "$TMP/bout" --max-queued 1 \
	--symbol-wait 8 --http "127.0.0.1:$hport" > "$TMP/bsymb.log" 2>&1 &
symb=$!
PIDS+=($symb)
"$WORKLOAD" 60 & wl=$!
PIDS+=($wl)
sleep 0.5
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$wl" > "$TMP/bagent.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 2
"$FP" loadgen --server "$addr" --devices 5 --seconds 10 --interval 1 --timeout 5 \
	--map-file "$BIG" > "$TMP/bloadgen.out" 2>&1
# The agent's batches are taken again once the queue is empty (a profile
# of loadgen's may wait --symbol-wait for librbd's symbols first); then
# two of its 1 s flushes send what was answered busy.
queue_empty() {
	curl -s "http://127.0.0.1:$hport/metrics" | grep -q '^fleetprof_pipeline_queue 0$'
}
check busy-queue-drains wait_for 60 queue_empty
sleep 2
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"
kill "$wl" 2>/dev/null; wait "$wl" 2>/dev/null
busy=$(sed -n 's/.*not taken by a busy symbolizer \([0-9]*\) times.*/\1/p' "$TMP/bagent.log")
sampled=$(sed -n 's/.*sampled \([0-9]*\) samples.*/\1/p' "$TMP/bagent.log")
acked=$(sed -n 's/.*acknowledged \([0-9]*\);.*/\1/p' "$TMP/bagent.log")
received=$(folded_total "$TMP/bout/$(hostname)"/*.folded)
echo "busy: agent's intervals not taken $busy times; sampled $sampled, acknowledged $acked," \
	"in profiles $received; $(grep -o 'busy=[0-9]*' "$TMP/bloadgen.out") at loadgen" >&2
check busy-agent-told test "${busy:-0}" -ge 1
check busy-counted grep -qE 'batches not taken \(busy\) [1-9]' "$TMP/bsymb.log"
check busy-agent-counts-add-up test "${sampled:-0}" -gt 0 -a "${sampled:-0}" = "${received:-x}"
check busy-agent-all-acknowledged test "${sampled:-0}" = "${acked:-x}"
