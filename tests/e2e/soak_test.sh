#!/bin/bash
# soak_test.sh: 1,000 simulated devices (fleetprof loadgen) and one real
# agent profiling a real process talk to one symbolizer for SOAK_SECONDS
# (default 180, so that the whole test stays under 5 minutes in CI; `make
# soak` runs it for 30 minutes).  A quarter of the way in the symbolizer is
# killed with SIGKILL and started again on the same cache and output.
#   - Every sample the agent took is in its profiles, once, across the kill.
#   - The simulated devices reconnect, say hello again and are served.
#   - The restarted symbolizer's memory is flat after warm-up: its
#     anonymous RSS (heap: sessions, tables, buffers; file pages of the
#     LMDB cache are left out, the kernel reclaims them) in the last half
#     of the run stays within 10% + 4 MiB of what it was when that half
#     began.  The state the server keeps is bounded (sessions, one trie
#     per session, symbol tables by build-ID), so after warm-up only
#     malloc's fragmentation moves it, by a few MiB; a leak of one byte per
#     sample or of 500 bytes per batch (the devices send about 130,000
#     batches and 26 M samples in 30 minutes, 13,000 and 2.6 M in the
#     default half) goes past the bound.  Profiles queued for the sinks
#     are memory too (about 50 kB each): on a loaded machine the queue
#     grows to thousands between the devices' waves and drains, and the
#     pipeline gives the memory back when it does.  So RSS is compared
#     where the queue was (nearly) empty, read from /metrics with it.
TEST=soak
. tests/e2e/lib.sh
need_root

# The symbolizer holds a connection per device and does not raise its own
# limit of open files (1,024 by default on many systems).
ulimit -n "$(ulimit -Hn)"
SOAK=${SOAK_SECONDS:-180}
DEVICES=${SOAK_DEVICES:-1000}
port=$(free_port)
addr=tcp://127.0.0.1:$port
hport=$(free_port)
start_symbolizer() {
	"$SYMB" --local-files --listen "$addr" --http "127.0.0.1:$hport" --cache "$TMP/cache" --out "$TMP/out" >> "$TMP/symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	echo "$symb" > "$TMP/symb.pid"
}

"$WORKLOAD" $((SOAK + 60)) & wl=$!
PIDS+=($wl)
start_symbolizer
sleep 0.5
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$wl" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
"$FP" loadgen --server "$addr" --devices "$DEVICES" --seconds "$SOAK" --interval 10 \
	--timeout 5 > "$TMP/loadgen.out" 2>&1 &
lg=$!
PIDS+=($lg)

# Anonymous RSS (kB) of whichever symbolizer runs and the profiles queued
# for its sinks, every 2 s, with the time since the start.
(
	t0=$SECONDS
	while sleep 2; do
		p=$(cat "$TMP/symb.pid")
		a=$(awk '/^RssAnon:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		q=$(curl -s -m 1 "http://127.0.0.1:$hport/metrics" |
			awk '/^fleetprof_pipeline_queue / { print $2 }')
		[ -n "$a" ] && [ -n "$q" ] && echo "$((SECONDS - t0)) $p $a $q"
	done
) > "$TMP/rss" &
PIDS+=($!)

sleep $((SOAK / 4))
kill -KILL "$symb"; wait "$symb" 2>/dev/null
sleep 2
start_symbolizer
second=$symb
wait "$lg"
check loadgen-exits-0 test $? -eq 0
kill -INT "$agent"; wait "$agent"
check agent-exits-0 test $? -eq 0
kill -TERM "$symb"; wait "$symb"

summary=$(grep '^loadgen: ' "$TMP/loadgen.out")
echo "$summary" >&2
field() { echo "$summary" | sed -n "s/.* $1=\([0-9.a-z]*\).*/\1/p"; }
sampled=$(sed -n 's/.*sampled \([0-9]*\) samples.*/\1/p' "$TMP/agent.log")
acked=$(sed -n 's/.*acknowledged \([0-9]*\);.*/\1/p' "$TMP/agent.log")
received=$(folded_total "$TMP/out/$(hostname)"/*.folded)
echo "agent: sampled $sampled, acknowledged $acked, in profiles $received" >&2
check agent-samples-taken test "${sampled:-0}" -gt 1000
check agent-counts-add-up test "${sampled:-0}" -eq "${received:-x}"
check agent-all-acknowledged test "${sampled:-0}" -eq "${acked:-x}"
check agent-resumed grep -q 'lost our session\|connected to' "$TMP/agent.log"

check devices-reconnected test "$(field reconnects)" -ge $((DEVICES * 9 / 10))
check devices-said-hello-again test "$(field hellos)" -ge $((DEVICES * 19 / 10))
check devices-served-to-the-end bash -c \
	"tail -n 10 '$TMP/loadgen.out' | grep '^t=' | awk '{ if (\$3 == 0) bad = 1 } END { exit bad }'"
check no-rejections test "$(field rejected)" = 0

# Flat after warm-up: the second process, last half of the run, where at
# most 16 profiles were queued for the sinks.
half=$((SOAK / 2))
read -r start_kb end_kb max_kb n < <(awk -v p="$second" -v h="$half" \
	'$2 == p && $1 >= h && $4 <= 16 { if (!s) s = $3; e = $3; if ($3 > m) m = $3; n++ }
	 END { print s + 0, e + 0, m + 0, n + 0 }' "$TMP/rss")
# A leak shows at the end; the peak, a moment of many devices' requests
# at once (up to 17% over the start in CI), is bounded more loosely.
limit=$((start_kb + start_kb / 10 + 4096))
peak_limit=$((start_kb + start_kb / 4 + 4096))
echo "symbolizer RssAnon after warm-up, queue nearly empty: $start_kb kB, at the end $end_kb kB," \
	"peak $max_kb kB ($n samples; limits $limit kB at the end, $peak_limit kB at the peak)" >&2
echo "symbolizer RssAnon kB/profiles queued, every 10 s: $(awk -v p="$second" \
	'$2 == p && $1 % 10 < 2 { printf "%d:%d/%d ", $1, $3, $4 }' "$TMP/rss")" >&2
check rss-measured test "$n" -ge 10
check rss-flat-after-warm-up test "$end_kb" -le "$limit"
check rss-peak-bounded test "$max_kb" -le "$peak_limit"
tail -n 3 "$TMP/symb.log" >&2
