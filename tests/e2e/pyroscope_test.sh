#!/bin/bash
# pyroscope_test.sh: `fleetprof record`'s outputs pushed to a real Grafana
# Pyroscope server, both ways a profiler pushes -- OTLP/HTTP
# (POST /v1development/profiles, DIR/profile.otlp.pb) and the ingest API
# (POST /ingest?format=pprof, DIR/profile.pb.gz) -- and read back: the flame
# graph from /pyroscope/render must hold fleetprof's own stacks, with the
# same counts, and the labels must be queryable.
#
# The server is Pyroscope v1.21 imported as a library by
# tests/pyroscope/server, built from the Go module proxy by
# tests/pyroscope/build.sh: about ten minutes on two cores the first time,
# then cached in $BUILD/pyroscope. tests/pyroscope/serve.sh runs it on
# loopback with its state in a temporary directory.
TEST=pyroscope
. tests/e2e/lib.sh
need_root

GO=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$GO" ]; then
	fail go "go not installed"
	exit 0
fi
export PATH="$(dirname "$GO"):$PATH"

# ---- build (cached) and start ----
if PYRO=$(BUILD=$BUILD GO=$GO tests/pyroscope/build.sh 2> "$TMP/build.log"); then
	pass builds
else
	fail builds "$(tail -n 1 "$TMP/build.log")"
	cat "$TMP/build.log" >&2
	exit 0
fi

PORT=$(free_port)
URL=http://127.0.0.1:$PORT
PYROSCOPE=$PYRO tests/pyroscope/serve.sh "$TMP/pyroscope" "$PORT" > "$TMP/pyroscope.log" 2>&1 &
srv=$!
PIDS+=($srv)
ready=
for _ in $(seq 1 300); do
	if [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ready")" = 200 ]; then
		ready=1
		break
	fi
	kill -0 "$srv" 2> /dev/null || break
	sleep 0.2
done
if [ -n "$ready" ]; then
	pass ready
else
	fail ready "no 200 from /ready within 60 s"
	tail -n 30 "$TMP/pyroscope.log" >&2
	exit 0
fi

# ---- record ----
"$WORKLOAD" 30 & wl=$!
PIDS+=($wl)
sleep 0.5
start=$(date +%s)
"$FP" record -d 3 -p "$wl" -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check record-exit-status test $? -eq 0
end=$(($(date +%s) + 1))
kill "$wl" 2> /dev/null
check record-writes-both test -s "$TMP/out/profile.otlp.pb" -a -s "$TMP/out/profile.pb.gz"
FOLDED=$TMP/out/profile.folded

# post NAME URL FILE CONTENT-TYPE: POST the file; PASS on HTTP 200.
post() {
	local code
	code=$(curl -s -o "$TMP/$1.resp" -w '%{http_code}' -X POST -H "Content-Type: $4" \
		--data-binary "@$3" "$2")
	if [ "$code" = 200 ]; then pass "$1"; else fail "$1" "HTTP $code: $(head -c 300 "$TMP/$1.resp")"; fi
}

# render NAME QUERY: the flame graph of the last hour as folded stacks in
# $TMP/NAME.folded; waits up to 10 s for it to be non-empty.
render() {
	for _ in $(seq 1 20); do
		curl -s -G "$URL/pyroscope/render" --data-urlencode "query=$2" \
			--data-urlencode from=now-1h --data-urlencode until=now \
			--data-urlencode format=json -o "$TMP/$1.json"
		python3 tests/pyroscope/flamebearer.py "$TMP/$1.json" > "$TMP/$1.folded" 2> "$TMP/$1.err"
		[ -s "$TMP/$1.folded" ] && return 0
		sleep 0.5
	done
	head -c 500 "$TMP/$1.json" "$TMP/$1.err" >&2
	return 1
}

# label_values NAME SELECTOR: the label's values over the last hour, one a line.
label_values() {
	local now
	now=$(date +%s)
	curl -s -X POST -H 'Content-Type: application/json' \
		-d "{\"name\":\"$1\",\"matchers\":[$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")],\"start\":$(((now - 3600) * 1000)),\"end\":$(((now + 60) * 1000))}" \
		"$URL/querier.v1.QuerierService/LabelValues" |
		python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin).get("names", [])))'
}

HOST=$(uname -n)
CPU=process_cpu:cpu:nanoseconds:cpu:nanoseconds
SAMPLES=process_cpu:samples:count:cpu:nanoseconds

# ---- OTLP/HTTP ----
post otlp-accepted "$URL/v1development/profiles" "$TMP/out/profile.otlp.pb" application/x-protobuf
# Pyroscope turns "samples/count every cpu/nanoseconds" into CPU time, and
# resource and sample attributes into labels (dots become underscores).
# process_executable_name comes only from the OTLP sample attributes.
OTLPQ="$CPU{service_name=\"workload\",process_executable_name=\"workload\"}"
if render otlp "$OTLPQ"; then pass otlp-render; else fail otlp-render "$OTLPQ"; fi
F=$TMP/otlp.folded
check otlp-cxx-method-chain grep -qE '(^|;)compute_loop;fp::Cruncher::crunch\(int\) [0-9]+$' "$F"
check otlp-shared-lib-chain grep -qE '(^|;)compute_loop;fpwork_mix [0-9]+$' "$F"
check otlp-kernel-frames grep -qE '(^|;)writer_loop;(.*;)?ksys_write(;| )' "$F"
python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$F" > "$TMP/otlp.same" 2>&1
check otlp-same-stacks-as-folded test $? -eq 0
cat "$TMP/otlp.same" >&2
check otlp-label-service test "$(label_values service_name "{process_executable_name=\"workload\"}")" = workload
check otlp-label-host test "$(label_values host_name '{service_name="workload"}')" = "$HOST"
check otlp-label-threads test "$(label_values thread_name "{process_executable_name=\"workload\"}" | sort | tr '\n' ' ')" = "fp-compute fp-writer "
check otlp-label-pid test "$(label_values process_pid '{service_name="workload"}')" = "$wl"

# ---- /ingest, pprof ----
# The name's {ingest=pprof} becomes a label that tells these series apart.
post pprof-accepted "$URL/ingest?name=workload%7Bingest%3Dpprof%7D&from=$start&until=$end&format=pprof" \
	"$TMP/out/profile.pb.gz" application/octet-stream
PPROFQ="$SAMPLES{service_name=\"workload\",ingest=\"pprof\"}"
if render pprof "$PPROFQ"; then pass pprof-render; else fail pprof-render "$PPROFQ"; fi
F=$TMP/pprof.folded
check pprof-cxx-method-chain grep -qE '(^|;)compute_loop;fp::Cruncher::crunch\(int\) [0-9]+$' "$F"
check pprof-shared-lib-chain grep -qE '(^|;)compute_loop;fpwork_mix [0-9]+$' "$F"
check pprof-kernel-frames grep -qE '(^|;)writer_loop;(.*;)?ksys_write_\[k\];' "$F"
python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$F" > "$TMP/pprof.same" 2>&1
check pprof-same-stacks-as-folded test $? -eq 0
cat "$TMP/pprof.same" >&2
# The pprof profile's second sample type, CPU time, is a series of its own.
if render pprof-cpu "$CPU{service_name=\"workload\",ingest=\"pprof\"}"; then
	python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$TMP/pprof-cpu.folded" > "$TMP/pprof-cpu.same" 2>&1
	check pprof-cpu-same-stacks-as-folded test $? -eq 0
else
	fail pprof-cpu-same-stacks-as-folded "no $CPU series"
fi
check pprof-label-threads test "$(label_values thread_name '{ingest="pprof"}' | sort | tr '\n' ' ')" = "fp-compute fp-writer "
check pprof-label-service test "$(label_values service_name '{ingest="pprof"}')" = workload

# /pyroscope/label-values answers only for __name__ (the profile types) in
# this version: for any other label it asks the querier without a name.
curl -s -G "$URL/pyroscope/label-values" --data-urlencode label=__name__ > "$TMP/types.json"
check profile-types python3 -c '
import json, sys
t = set(json.load(open(sys.argv[1])))
sys.exit(0 if {sys.argv[2], sys.argv[3]} <= t else 1)' "$TMP/types.json" "$CPU" "$SAMPLES"

check server-logged-no-errors bash -c "! grep -E 'level=error' '$TMP/pyroscope.log' >&2"

# ---- stop ----
kill -TERM "$srv"
stopped=
for _ in $(seq 1 100); do
	kill -0 "$srv" 2> /dev/null || { stopped=1; break; }
	sleep 0.2
done
wait "$srv" 2> /dev/null
check stops-on-sigterm test -n "$stopped"
