#!/bin/bash
# build-collector.sh: the test OpenTelemetry Collector of the end-to-end tests
# (otlp_test.sh, push_test.sh), built with the official builder from
# tests/otlp/builder-config.yaml into $BUILD/otelcol/otelcol-fleetprof-test.
# The binary is kept and rebuilt only when builder-config.yaml changes; the
# first build downloads Go modules (about three minutes on two cores).
#
# Prints one line, "cached" or how long the build took ("182 s"); exits 1
# when it cannot build (go missing, builder failure), the builder's output on
# stderr.  Environment: BUILD (default build), GO (default: go in PATH, else
# /usr/local/go/bin/go).
BUILD=${BUILD:-build}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if [ ! -x "$GO" ]; then
	echo "go not installed" >&2
	exit 1
fi
# -mod=mod: go.sum may be completed; -buildvcs=false: the modules sit inside
# this repository's work tree, and nothing needs its VCS state stamped.
export GOFLAGS="-mod=mod -buildvcs=false"
export PATH="$(dirname "$GO"):$PATH"

config=$(dirname "$0")/builder-config.yaml
coldir=$(realpath -m "$BUILD")/otelcol
col=$coldir/otelcol-fleetprof-test
version=$(sed -n 's/^  version: *//p' "$config")
work=$(mktemp -d /tmp/fleetprof-otelcol.XXXXXX)
trap 'rm -rf "$work"' EXIT

mkdir -p "$coldir"
exec 9> "$coldir/.build-lock" # one build at a time
flock 9
sed "s|^dist:|dist:\n  output_path: $coldir|" "$config" > "$work/builder-config.yaml"
if [ -x "$col" ] && cmp -s "$work/builder-config.yaml" "$coldir/builder-config.yaml"; then
	echo cached
	exit 0
fi
rm -f "$col" "$coldir/builder-config.yaml"
start=$(date +%s)
if (cd "$work" && "$GO" run "go.opentelemetry.io/collector/cmd/builder@v$version" \
	--config=builder-config.yaml) >&2 && [ -x "$col" ]; then
	cp "$work/builder-config.yaml" "$coldir/builder-config.yaml"
	echo "$(($(date +%s) - start)) s"
else
	exit 1
fi
