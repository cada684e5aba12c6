#!/bin/bash
# build.sh: builds the test-only Grafana Pyroscope server (tests/pyroscope/server,
# which requires Pyroscope from the Go module proxy as a library) and prints
# the binary's path on stdout. Everything else goes to stderr.
#
# The binary is cached as $BUILD/pyroscope/pyroscope-server-KEY, KEY being a
# hash of the server's go.mod, go.sum and main.go, the Go version and the build
# flags, so a second run prints the path at once. The first build downloads
# about 1 GB of modules and compiles for many minutes; its log is
# $BUILD/pyroscope/build.log.
#
# Environment: BUILD (default: the repository's build/), GO (default: go on
# PATH, else /usr/local/go/bin/go).
set -eu -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
src=$here/server
build=${BUILD:-$repo/build}
case $build in /*) ;; *) build=$repo/$build ;; esac
out=$build/pyroscope

go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if ! [ -x "$go" ] && ! command -v "$go" > /dev/null; then
	echo "build.sh: no Go toolchain (looked for go on PATH and /usr/local/go/bin/go)" >&2
	exit 1
fi
gover=$("$go" env GOVERSION)

ldflags="-s -w"
ver=$(sed -n 's|^[[:space:]]*github.com/grafana/pyroscope \(v[^ ]*\).*|\1|p' "$src/go.mod" | head -1)
ldflags+=" -X github.com/grafana/pyroscope/pkg/util/build.Version=${ver#v}"
key=$({
	cat "$src/go.mod" "$src/go.sum" "$src/main.go"
	echo "$gover -buildvcs=false -trimpath $ldflags"
} | sha256sum | cut -c1-16)
bin=$out/pyroscope-server-$key

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$out"
# One build at a time; a second caller waits, then finds the binary.
exec 9> "$out/.lock"
flock 9
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

log=$out/build.log
echo "build.sh: building Pyroscope $ver with $gover (log: $log); the first build takes many minutes" >&2
start=$(date +%s)
tmp=$(mktemp "$out/.pyroscope-server.XXXXXX")
trap 'rm -f "$tmp"' EXIT
# -mod=mod: go.sum is complete, but let Go settle go.mod if the toolchain
# formats it differently. -buildvcs=false: the server sits inside this
# repository's work tree, whose VCS state is none of its business.
if ! (cd "$src" && GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" \
	"$go" build -buildvcs=false -trimpath -ldflags "$ldflags" -o "$tmp" .) > "$log" 2>&1; then
	echo "build.sh: go build failed; the end of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
fi
mv -f "$tmp" "$bin"
trap - EXIT
# Older binaries of this cache are stale.
find "$out" -maxdepth 1 -name 'pyroscope-server-*' ! -name "pyroscope-server-$key" -delete
echo "build.sh: built $bin ($(du -h "$bin" | cut -f1)) in $(($(date +%s) - start)) s" >&2
echo "$bin"
