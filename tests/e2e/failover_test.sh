#!/bin/bash
# failover_test.sh: the reference deployment in small, on loopback.  One
# symbolizer is the symbol service (the workload's files are uploaded to
# it); two others, A and B, have no symbols of their own and share the
# service's through --debuginfod.  The agent profiles the workload with
# --server A --server B.  A dies (SIGKILL): the agent fails over to B in a
# new session and sends it the intervals it buffered; B resolves names
# with symbols from the symbol service.  While A is down the agent stays
# on B; when A is back, the agent goes back to it at its next --failback
# try.  Then A dies again and the agent is stopped at once: its last
# intervals go to B.  Every sample the agent took is in an interval written
# by A, B, A again or B again, in that order: the sequence numbers run
# from the first to the last with no gap, the only repeats are intervals
# in flight when A died, and counted once, the counts add up.
TEST=failover
. tests/e2e/lib.sh
need_root

mkdir -p "$TMP/nodebug"
sport=$(free_port)
hport=$(free_port)
porta=$(free_port)
portb=$(free_port)
addra=tcp://127.0.0.1:$porta
addrb=tcp://127.0.0.1:$portb
service=http://127.0.0.1:$hport

"$SYMB" --local-files --listen "tcp://127.0.0.1:$sport" --http "127.0.0.1:$hport" --store "$TMP/store" \
	--cache "$TMP/cache-service" --out "$TMP/out-service" > "$TMP/service.log" 2>&1 &
service_pid=$!
PIDS+=($service_pid)
check uploaded-to-symbol-service wait_for 10 "$FP" upload --server "$service" "$WORKLOAD" \
	"$BUILD/tests/libfpwork.so" >> "$TMP/upload.log" 2>&1

# symbolizer NAME PORT CACHE: a symbolizer whose only sources are the
# symbol service and the device; its profiles go to out-NAME, its log to
# NAME.log.
symbolizer() {
	"$SYMB" --listen "tcp://127.0.0.1:$2" --cache "$TMP/cache-$3" --out "$TMP/out-$1" \
		--debug-dir "$TMP/nodebug" --no-local-files --debuginfod "$service" \
		> "$TMP/$1.log" 2>&1 &
	last=$!
	PIDS+=($last)
}
# profiles NAME: how many intervals symbolizer NAME wrote.
profiles() {
	ls "$TMP"/out-"$1"/*/*.folded 2> /dev/null | wc -l
}
# has_profiles NAME N: symbolizer NAME wrote at least N intervals.
has_profiles() {
	test "$(profiles "$1")" -ge "$2"
}
# since T0: seconds since date +%s.%N said T0.
since() {
	awk -v t="$(date +%s.%N)" -v t0="$1" 'BEGIN { printf "%.1f", t - t0 }'
}
# seqs NAME...: the sequence numbers of the intervals they wrote, sorted.
seqs() {
	local n
	for n in "$@"; do
		ls "$TMP"/out-"$n"/*/*.folded 2> /dev/null
	done | sed 's/.*-\([0-9]*\)\.folded$/\1/' | sort -n
}

symbolizer a1 "$porta" a
syma=$last
symbolizer b "$portb" b
symb=$last
"$WORKLOAD" 90 & wl=$!
PIDS+=($wl)
sleep 0.5
"$AGENT" --server "$addra" --server "$addrb" --interval 1 --timeout 1 --failover-after 2 \
	--failback 6 -p "$wl" --table-cache "$TMP/tables" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)

check first-on-a wait_for 30 has_profiles a1 3
kill -KILL "$syma"; wait "$syma" 2> /dev/null
t0=$(date +%s.%N)
check failed-over-to-b wait_for 30 grep -q "failing over to $addrb" "$TMP/agent.log"
echo "failed over $(since "$t0") s after A died" >&2
check b-writes wait_for 15 has_profiles b 3
# The first try to go back comes while A is still down.
check stays-on-b-while-a-is-down wait_for 20 grep -q "staying on $addrb" "$TMP/agent.log"
symbolizer a2 "$porta" a
t0=$(date +%s.%N)
check back-on-a wait_for 20 grep -q "back on $addra" "$TMP/agent.log"
echo "back on A $(since "$t0") s after it started (--failback 6)" >&2
check a-writes-again wait_for 15 has_profiles a2 3
# A dies again and the agent is stopped at once: what it holds goes to B.
kill -KILL "$last"; wait "$last" 2> /dev/null
kill -INT "$agent"; wait "$agent"
check agent-exits-0 test $? -eq 0
check exit-tries-b grep -q "trying $addrb" "$TMP/agent.log"
kill -TERM "$symb" "$service_pid"; wait "$symb" "$service_pid"

sampled=$(sed -n 's/.*sampled \([0-9]*\) samples.*/\1/p' "$TMP/agent.log")
intervals=$(sed -n 's/.*sampled [0-9]* samples in \([0-9]*\) intervals.*/\1/p' "$TMP/agent.log")
acked=$(sed -n 's/.*acknowledged \([0-9]*\);.*/\1/p' "$TMP/agent.log")
received=$(folded_total "$TMP"/out-a1/*/*.folded "$TMP"/out-b/*/*.folded "$TMP"/out-a2/*/*.folded)
echo "sampled $sampled in $intervals intervals, acknowledged $acked, in profiles $received" \
	"(A $(profiles a1), B $(profiles b), A again $(profiles a2) intervals)" >&2
check samples-taken test "${sampled:-0}" -gt 300
# The interval in flight when A died may be in both A's and B's profiles
# (A wrote it and died before its reply went out): delivery across
# symbolizers is at least once.  Only such intervals may repeat, and
# counted once, the counts add up.
last_a1=$(seqs a1 | tail -n 1)
first_a2=$(seqs a2 | head -n 1)
last_a2=$(seqs a2 | tail -n 1)
dups=$(seqs a1 b a2 | uniq -d)
dup_samples=0
dups_in_flight=1
for d in $dups; do
	n=$(folded_total "$TMP"/out-b/*/*-"$d".folded)
	echo "interval $d was in flight when A died: written by A and B ($n samples)" >&2
	dup_samples=$((dup_samples + n))
	[ "$d" = "$last_a1" ] || [ "$d" = "$last_a2" ] || dups_in_flight=0
done
check only-in-flight-intervals-repeated test $dups_in_flight -eq 1
check counts-add-up test "$((${sampled:-0} + dup_samples))" -eq "${received:-x}"
check all-acknowledged test "${sampled:-0}" -eq "${acked:-x}"
check none-dropped grep -q 'dropped 0 in 0 intervals; failed over 1 times, back 1 times' \
	"$TMP/agent.log"
check every-interval-written test "$(seqs a1 b a2 | uniq | tr '\n' ' ')" = \
	"$(seq 1 "${intervals:-0}" | tr '\n' ' ')"
# In order: A, then B from where A stopped, A again from where B stopped,
# and B for what was left at exit, the last partial interval included.
in_order() {
	local s
	[ "$(seqs a1 | tr '\n' ' ')" = "$(seq 1 "$last_a1" | tr '\n' ' ')" ] || return 1
	[ "$(seqs a2 | tr '\n' ' ')" = "$(seq "$first_a2" "$last_a2" | tr '\n' ' ')" ] || return 1
	for s in $(seqs b); do
		if ! { [ "$s" -ge "$last_a1" ] && [ "$s" -lt "$first_a2" ]; } && [ "$s" -lt "$last_a2" ]; then
			return 1
		fi
	done
}
check in-order in_order
check b-took-a-only-after-a-died test "$(seqs b | head -n 1)" -ge "${last_a1:-x}"
check last-interval-to-b-at-exit test "$(seqs b | tail -n 1)" -eq "${intervals:-x}"
check b-had-buffered-intervals grep -qE "failing over to $addrb with [1-9][0-9]* intervals buffered" \
	"$TMP/agent.log"
# One device, one series: the same host wherever its intervals went.
check same-host-everywhere test "$(ls "$TMP/out-a1")" = "$(ls "$TMP/out-b")" -a \
	"$(ls "$TMP/out-b")" = "$(ls "$TMP/out-a2")"
check new-session-on-b grep -q 'session [0-9a-f]* from' "$TMP/b.log"

# B and A's second life resolve names with the symbol service's files,
# fetched over debuginfod, not from the device.
bid=$(readelf -n "$WORKLOAD" | awk '/Build ID/ { print $3; exit }')
check b-fetched-from-symbol-service grep -q "debuginfod: fetched $bid" "$TMP/b.log"
check b-fetched-once test "$(grep -c "debuginfod: fetched $bid" "$TMP/b.log")" -eq 1
check b-not-from-device bash -c "! grep -q 'symbols of $bid fetched from the device' '$TMP/b.log'"
# libc is in no store: B asks the device for it in its own session.
check b-fetched-libc-from-device grep -q 'fetched from the device' "$TMP/b.log"
check b-resolves-user grep -qh 'compute_loop;fp::Cruncher::crunch(int)' "$TMP"/out-b/*/*.folded
check b-resolves-library grep -qh 'compute_loop;fpwork_mix' "$TMP"/out-b/*/*.folded
check b-resolves-kernel grep -qh 'ksys_write_\[k\]' "$TMP"/out-b/*/*.folded
check a2-resolves-user grep -qh 'compute_loop;fp::Cruncher::crunch(int)' "$TMP"/out-a2/*/*.folded
check service-served grep -q 'debuginfod: served [1-9]' "$TMP/service.log"
# The agent's hello to B named the unwind tables it held (A's): B sent
# none of them again, and the agent kept its own.
check b-held-back-tables grep -qE 'not sent, the agent held them: [1-9]' "$TMP/b.log"
check tables-installed-once grep -qE 'unwind tables: ([0-9]+) installed now \([^)]*\), \1 installed in all' \
	"$TMP/agent.log"
check b-asked-kallsyms grep -q 'stored kallsyms of vmlinux' "$TMP/b.log"
check a-kept-kallsyms bash -c "! grep -q 'stored kallsyms' '$TMP/a2.log'"
check no-rejections bash -c "! grep -q 'rejected a message' '$TMP'/a1.log '$TMP'/b.log '$TMP'/a2.log"
tail -n 12 "$TMP/agent.log" >&2
