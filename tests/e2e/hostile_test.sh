#!/bin/bash
# hostile_test.sh: the symbolizer accepts only what it asked for (issue
# 10).  A hostile agent (tests/e2e/hostile.c) runs each attack against one
# symbolizer while a well-behaved device says hello every 20 ms; for each
# attack: nothing stored, a reply with a clear status, bounded memory and
# descriptors, the right counter in /metrics, and the device's hellos
# answered within 100 ms throughout.
TEST=hostile
. tests/e2e/lib.sh
HOSTILE=$BUILD/tests/hostile

port=$(free_port)
hport=$(free_port)
addr=tcp://127.0.0.1:$port
# Small bounds, so that the test reaches them quickly.
"$SYMB" --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" --debug-dir "$TMP/debug" \
	--no-local-files --http "127.0.0.1:$hport" --max-sessions 100 --new-sessions 20 \
	--max-connections 6 --idle-timeout 2 -v > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$hport/metrics" || fail start "$(cat "$TMP/symb.log")"

# attack NAME [N]: run it; its KEY=VALUE lines go to $TMP/NAME.
attack() {
	"$HOSTILE" "$addr" "$symb" "$@" > "$TMP/$1" 2> "$TMP/$1.err" || fail "$1-ran" "$(cat "$TMP/$1.err")"
}
# val NAME KEY: a value the attack printed.
val() { sed -n "s/^$2=//p" "$TMP/$1"; }
# metric NAME: a value of /metrics (labels included in NAME).
metric() {
	curl -sf "http://127.0.0.1:$hport/metrics" | awk -v m="fleetprof_$1" '$1 == m { print $2 }'
}
# no_stall NAME: the well-behaved device's hellos during attack NAME.
no_stall() {
	local ms
	ms=$(val "$1" max_hello_ms)
	check "$1-hellos-answered" test "$(val "$1" hellos_unanswered)" = 0
	if awk -v m="$ms" 'BEGIN { exit !(m != "" && m < 100) }'; then
		pass "$1-no-stall"
	else
		fail "$1-no-stall" "longest hello reply ${ms:-none} ms, not under 100 ms"
	fi
}

# The real device, whose session and profile the attacks go after.
attack device
check device-accepted test "$(val device device_batch)" = 0
real="$TMP/out/real-device"
wait_for 10 compgen -G "$real/*-1.folded" > /dev/null || fail device-profile-written
before=$(md5sum "$real"/*-1.folded)

# Someone else's session id: refused; the real session goes on.
attack hijack
check hijack-refused test "$(val hijack hijack_status)" = 2
check hijack-session-survives test "$(val hijack real_status)" = 0
no_stall hijack

# The real device's profile, under its host name and start time: not
# written over; from the future: refused.
attack overwrite
sleep 1
check overwrite-profile-kept test "$(md5sum "$real"/*-1.folded)" = "$before"
check overwrite-counted test "$(metric write_errors_total)" -ge 1
check overwrite-logged grep -q 'exists: not replacing it' "$TMP/symb.log"
check future-refused test "$(val overwrite future_status)" = 2
check future-counted test "$(metric 'rejected_total{reason="future_interval"}')" = 1
no_stall overwrite

# Kallsyms nobody asked for: refused, not stored.
attack ksyms
check ksyms-refused test "$(val ksyms ksyms_status)" = 2
check ksyms-counted test "$(metric 'rejected_total{reason="kallsyms_unasked"}')" = 1
check ksyms-not-stored test "$(metric kallsyms_stored_total)" = 0
names=$(echo 100 | "$FP" symbolize --build-id bad0000000000000000000000000000000000000 \
	--cache "$TMP/cache" 2>&1)
check ksyms-not-printed bash -c "! grep -q attacker_was_here <<< '$names'"
no_stall ksyms

# 10 sessions naming 200 unknown build-IDs each, twice, never answering:
# every batch answered (65 of them once got no reply at all), at most 8
# fetches a session and 64 in all (the real device's one may be among
# them), no file opened for a fetch with no answer.
attack fetch 10
check fetch-replies test "$(val fetch fetch_replies_ok)" = 20
check fetch-per-reply test "$(val fetch max_ranges)" = 8
check fetch-in-all test "$(val fetch ranges)" -ge 56 -a "$(val fetch ranges)" -le 64
check fetch-gauge test "$(metric device_fetches)" = 64
check fetch-deferred-counted test "$(metric device_fetches_deferred_total)" -gt 1000
check fetch-no-files test "$(val fetch fds_after)" -le $(($(val fetch fds_before) + 2))
no_stall fetch

# Per-session bounds: 70,000 mappings, 270,000 threads (the ninth batch
# of 30,000) start the session over (NEED_HELLO), counted.
attack limits
check limits-mappings test "$(val limits mappings_status)" = 1
check limits-threads test "$(val limits threads_batches)/$(val limits threads_status)" = 8/1
check limits-counted test "$(metric session_limit_restarts_total)" = 2
no_stall limits

# Batches of 150,000 definitions: taken without the server's lock (their
# session alone is busy), so other devices' hellos are not held; another
# message for that session meanwhile gets no reply, and is counted.
attack bigbatch
check bigbatch-accepted test "$(val bigbatch bigbatch_status)" = 0
check bigbatch-busy-counted test "$(metric session_busy_total)" -ge 1
no_stall bigbatch

# 32,768 node ids chosen to collide under a guessed hash key.
attack collide
check collide-accepted test "$(val collide collide_status)" = 0
if awk -v m="$(val collide collide_ms)" 'BEGIN { exit !(m < 300) }'; then
	pass collide-fast
else
	fail collide-fast "$(val collide collide_ms) ms"
fi
no_stall collide

# 20 connections each sending all but 1 KiB of an 8 MiB message: at most
# 5 taken (--max-connections 6, the device holds one), closed after
# --idle-timeout; the server's memory grows by 5 buffers at most.
attack partial 20
check partial-bounded test "$(val partial partial_sent)" -le 5
check partial-closed test "$(val partial partial_closed)" = 20
grow=$(( $(val partial rss_max_kb) - $(val partial rss_before_kb) ))
check partial-memory-bounded test "$grow" -lt $((5 * 8192 + 16384))
check partial-refused-counted test "$(metric 'connections_refused_total{reason="too_many"}')" -ge 15
check partial-idle-counted test "$(metric connections_idle_closed_total)" -ge 1
no_stall partial
echo "partial: $(val partial partial_sent) taken, server grew by $grow kB" >&2

# 10,000 fake hosts: at most --max-sessions held and 20 new a second;
# the real device's session is not evicted.
attack fakehosts 10000
ok=$(val fakehosts hellos_ok)
check fakehosts-refused test "$(val fakehosts hellos_refused)" -ge 9000
check fakehosts-bounded test "$(ls "$TMP/out" | wc -l)" -le 100
check fakehosts-counted test "$(( $(metric 'rejected_total{reason="new_session_rate"}') + \
	$(metric 'rejected_total{reason="sessions_full"}') ))" = "$(val fakehosts hellos_refused)"
check fakehosts-sessions-bounded test "$(metric sessions)" -le 100
no_stall fakehosts
attack hijack
check fakehosts-real-session-survives test "$(val hijack real_status)" = 0
echo "fakehosts: $ok of 10000 admitted, $(ls "$TMP/out" | wc -l) host directories" >&2

kill -TERM "$symb"
wait "$symb"
check clean-exit test $? = 0
check exit-stats grep -q 'limits: refused hellos: new-session rate [1-9]' "$TMP/symb.log"
