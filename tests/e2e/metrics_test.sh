#!/bin/bash
# metrics_test.sh: GET /metrics after a known run.  A hello, 5 batches of 10
# samples, two hostile messages and a refused upload; pushes to a dead OTLP
# endpoint stay spooled.  promtool (Debian's prometheus) checks the format,
# the Prometheus Python client's parser reads the values.
TEST=metrics
. tests/e2e/lib.sh
SEND=$BUILD/tests/nngsend

port=$(free_port)
hport=$(free_port)
dead=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" --debug-dir "$TMP/debug" \
	--http "127.0.0.1:$hport" --store "$TMP/store" --otlp-endpoint "http://127.0.0.1:$dead" \
	--debuginfod "http://127.0.0.1:$dead" \
	> "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$hport/metrics" || fail start "$(cat "$TMP/symb.log")"

"$SEND" --hello "$TMP/hello"
sent=$("$SEND" "$addr" "$TMP/hello")
for i in 1 2 3 4 5; do
	"$SEND" --batch "$i" "$TMP/batch"
	sent="$sent $("$SEND" "$addr" "$TMP/batch")"
done
check batches-accepted test "$sent" = "status 0 status 0 status 0 status 0 status 0 status 0"
printf '\xc1\xc1' > "$TMP/garbage"
"$SEND" "$addr" "$TMP/garbage" > /dev/null
printf '\x93\x63\x01\x80' > "$TMP/version"
"$SEND" "$addr" "$TMP/version" > /dev/null
echo "not an ELF file" > "$TMP/notelf"
curl -s -o /dev/null --data-binary "@$TMP/notelf" "http://127.0.0.1:$hport/v1/upload"

# The sinks run in workers of their own, at a lower priority: the five
# profiles are through them within the wait on a loaded machine.
wait_for 30 sh -c "curl -sf 'http://127.0.0.1:$hport/metrics' | grep -q '^fleetprof_profiles_total 5\$'"
curl -sf -D "$TMP/headers" -o "$TMP/metrics" "http://127.0.0.1:$hport/metrics"
check content-type grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/headers"
if out=$(promtool check metrics < "$TMP/metrics" 2>&1); then
	pass promtool
else
	fail promtool "$out"
fi
# The batch's user mapping is in no source.  Each batch is looked up twice:
# when its reply is built (a miss there queues the symbol job) and in the
# pipeline after the wait for symbols.  The first look-up asks the cache,
# and the symbol worker the debug directory, the local path and the store
# (fetch); the nine later ones stop at the cache, where the failure is
# remembered.  The five profiles are through their sinks (counted with
# their bytes taken off the queue's, under one lock): nothing is queued.
# Debian's python3-prometheus-client, hence Debian's python3.
/usr/bin/python3 tests/e2e/metrics_test.py "$TEST" "$TMP/metrics" \
	'fleetprof_sessions=1' \
	'fleetprof_messages_total=8' \
	'fleetprof_hellos_total=1' \
	'fleetprof_batches_total=5' \
	'fleetprof_samples_total=50' \
	'fleetprof_profiles_total=5' \
	'fleetprof_pipeline_queue=0' \
	'fleetprof_pipeline_queued_bytes=0' \
	'fleetprof_rejected_total{reason="malformed"}=1' \
	'fleetprof_rejected_total{reason="version"}=1' \
	'fleetprof_rejected_total{reason="type"}=0' \
	'fleetprof_rejected_total{reason="content"}=0' \
	'fleetprof_requests_slow_total=0' \
	'fleetprof_request_slowest_seconds>=0.000001' \
	'fleetprof_symbol_misses_total{source="cache"}=10' \
	'fleetprof_symbol_hits_total{source="cache"}=0' \
	'fleetprof_symbol_misses_total{source="debug_dir"}=1' \
	'fleetprof_symbol_misses_total{source="local"}=1' \
	'fleetprof_symbol_misses_total{source="fetch"}=1' \
	'fleetprof_debuginfod_fetches_total{result="failed"}>=1' \
	'fleetprof_debuginfod_fetches_total{result="fetched"}=0' \
	'fleetprof_debuginfod_fetches_total{result="missing"}=0' \
	'fleetprof_symbol_known_missing_total=9' \
	'fleetprof_symbol_ingest_seconds_count=1' \
	'fleetprof_symbol_ingest_seconds_sum>=0' \
	'fleetprof_http_rejected_total{reason="bad"}=1' \
	'fleetprof_http_queue_length=0' \
	'fleetprof_push_queued_total{destination="otlp"}=5' \
	'fleetprof_push_sent_total{destination="otlp"}=0' \
	'fleetprof_push_spool_files{destination="otlp"}=5' \
	'fleetprof_push_gave_up_total{destination="otlp"}=0' \
	'fleetprof_push_responses_too_large_total{destination="otlp"}=0' \
	'fleetprof_push_spool_bytes{destination="otlp"}>=500'
check parser-ran test $? -eq 0

# Only GET.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$hport/metrics")
check post-refused test "$code" = 405
kill -TERM "$symb"
wait "$symb"
check clean-exit test $? -eq 0
