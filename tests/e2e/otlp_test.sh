#!/bin/bash
# otlp_test.sh: `fleetprof record`'s OTLP Profiles output (DIR/profile.otlp.pb)
# read by independent decoders: the official generated Go types
# (tests/otlp/checkotlp: unmarshal, dictionary rules, function names), and a
# real OpenTelemetry Collector built with the official builder
# (tests/otlp/builder-config.yaml), which must accept the request over
# OTLP/HTTP and print the workload's function names with its debug exporter.
#
# The first run downloads Go modules and builds the collector (about three
# minutes on two cores); the binary is kept in $BUILD/otelcol and rebuilt only
# when tests/otlp/builder-config.yaml changes (tests/otlp/build-collector.sh).
TEST=otlp
. tests/e2e/lib.sh
need_root

GO=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$GO" ]; then
	fail go "go not installed"
	exit 0
fi
# -mod=mod: go.sum may be completed; -buildvcs=false: the modules sit inside
# this repository's work tree, and nothing needs its VCS state stamped.
export GOFLAGS="-mod=mod -buildvcs=false"
export PATH="$(dirname "$GO"):$PATH"
ABS_BUILD=$(realpath -m "$BUILD")

"$WORKLOAD" 60 & wl=$!
PIDS+=($wl)
sleep 0.5

"$FP" record -d 5 -p "$wl" --by-thread -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check exit-status test $? -eq 0
OTLP=$TMP/out/profile.otlp.pb
check writes-otlp test -s "$OTLP"
kill "$wl" 2>/dev/null
ls -l "$TMP/out" >&2

# ---- the official Go types ----
mkdir -p "$ABS_BUILD/otlp"
if (cd tests/otlp/checkotlp && "$GO" build -o "$ABS_BUILD/otlp/checkotlp" .) > "$TMP/gobuild.log" 2>&1; then
	pass checker-builds
else
	fail checker-builds
	cat "$TMP/gobuild.log" >&2
fi
"$ABS_BUILD/otlp/checkotlp" "$OTLP" > "$TMP/check.out" 2> "$TMP/check.err"
check go-decoder-rules test $? -eq 0
grep -v '^function: ' "$TMP/check.out" >&2
cat "$TMP/check.err" >&2
check go-decoder-cxx-method grep -qxF 'function: fp::Cruncher::crunch(int)' "$TMP/check.out"
check go-decoder-shared-lib grep -qxF 'function: fpwork_mix' "$TMP/check.out"
check go-decoder-frame-types grep -qE '^frames: kernel=[1-9][0-9]* native=[1-9][0-9]* other=0$' "$TMP/check.out"
check go-decoder-service grep -qE '^resource: service.name=workload samples=[1-9][0-9]* .* period=10101010 cpu/nanoseconds$' "$TMP/check.out"

# ---- the OpenTelemetry Collector ----
COL=$ABS_BUILD/otelcol/otelcol-fleetprof-test
if how=$(BUILD=$BUILD GO=$GO tests/otlp/build-collector.sh 2> "$TMP/builder.log"); then
	pass "collector-builds ($how)"
else
	fail collector-builds
	tail -n 30 "$TMP/builder.log" >&2
	exit 0
fi

port=$(free_port)
FP_OTLP_PORT=$port "$COL" --config=tests/otlp/collector-config.yaml \
	--feature-gates=+service.profilesSupport > "$TMP/collector.log" 2>&1 &
col=$!
PIDS+=($col)
for _ in $(seq 100); do
	(exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
	kill -0 "$col" 2> /dev/null || break
	sleep 0.2
done

code=$(curl -sS -m 20 -o "$TMP/response" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' \
	--data-binary @"$OTLP" "http://127.0.0.1:$port/v1development/profiles" 2> "$TMP/curl.err")
check collector-accepts test "$code" = 200
[ "$code" = 200 ] || cat "$TMP/curl.err" "$TMP/response" "$TMP/collector.log" >&2
# A full success: no partial_success, or an empty one (0a 00).
resp=$(od -An -tx1 "$TMP/response" | tr -d ' \n')
check collector-no-rejects test -z "$resp" -o "$resp" = 0a00

# The debug exporter logs the dictionary (string table included) and every
# resource once it has the request.
for _ in $(seq 50); do
	grep -qF 'fpwork_mix' "$TMP/collector.log" && break
	sleep 0.2
done
check collector-cxx-method grep -qF 'fp::Cruncher::crunch(int)' "$TMP/collector.log"
check collector-shared-lib grep -qF 'fpwork_mix' "$TMP/collector.log"
check collector-service grep -qE 'service\.name: Str\(workload\)' "$TMP/collector.log"
# The collector decoded the same tables and samples as the Go types.
count() { grep -cE "(^|[[:space:]])$1 #[0-9]+\$" "$TMP/collector.log"; }
tables=$(grep '^tables: ' "$TMP/check.out")
check collector-same-tables test "locations=$(count Location) functions=$(count Function) samples=$(count Sample)" \
	= "$(echo "$tables" | grep -oE 'locations=[0-9]+ functions=[0-9]+') $(echo "$tables" | grep -oE 'samples=[0-9]+')"
kill "$col" 2> /dev/null
wait "$col" 2> /dev/null
if grep -qiE '"?level"?[:=]"?(error|fatal)|\berror\b.*(unmarshal|decode)' "$TMP/collector.log"; then
	fail collector-no-errors
	grep -iE 'error' "$TMP/collector.log" | head -n 20 >&2
else
	pass collector-no-errors
fi
