#!/bin/bash
# gobin_test.sh: a Go binary as SONiC ships its Go daemons -- stripped
# (-ldflags='-s -w': no .symtab, no DWARF) and without a GNU build-ID note
# (-B none), only Go's build ID note -- profiled by the real BPF program.
# The agent names it by its synthetic id (common/fileid.h), the
# symbolizer computes the same id from the file and reads Go's function
# names and lines from .gopclntab.  Go keeps frame pointers on amd64, so
# the stacks are whole from the kernel's frame-pointer walk.
TEST=gobin
. tests/e2e/lib.sh
need_root

GO=/usr/local/go/bin/go
[ -x "$GO" ] || GO=$(command -v go)
if [ -z "$GO" ]; then
	if [ -n "$CI" ]; then
		fail go "no Go toolchain (/usr/local/go or golang-go)"
	else
		echo "SKIP: $TEST (no Go toolchain)"
	fi
	exit 0
fi

# Build tests/workload/gowork: stdlib only, no network.
mkdir -p "$TMP/bin" "$TMP/gocache" "$TMP/gopath"
# -B none: Go 1.24+ writes a GNU build-ID unless told not to; older
# linkers write none and refuse "none".
gobuild() {
	(cd tests/workload/gowork && GOCACHE=$TMP/gocache GOPATH=$TMP/gopath GOFLAGS=-mod=mod \
		GOTOOLCHAIN=local CGO_ENABLED=0 "$GO" build -ldflags="$1" -o "$TMP/bin/gowork" .)
}
if ! { gobuild '-s -w -B none' || gobuild '-s -w'; } > "$TMP/build.log" 2>&1; then
	fail build "$(tail -n 3 "$TMP/build.log" | tr '\n' ' ')"
	exit 0
fi
chmod -R u+w "$TMP/gopath" 2>/dev/null # Go's module cache is read-only
check no-symtab bash -c "! readelf -S '$TMP/bin/gowork' | grep -q '\.symtab'"
check no-gnu-build-id bash -c "! readelf -n '$TMP/bin/gowork' | grep -q 'NT_GNU_BUILD_ID'"
check go-build-id bash -c "readelf -n '$TMP/bin/gowork' | grep -q 'GO BUILDID'"

# 1. fleetprof record: agent and symbolizer halves in one process.
"$TMP/bin/gowork" 600 > /dev/null &
wl=$!
PIDS+=($wl)
sleep 0.5
"$FP" record -d 4 -p "$wl" -o "$TMP/rec" --cache "$TMP/rcache" > "$TMP/record.log" 2>&1
check record-ok test $? -eq 0
folded=$TMP/rec/profile.folded
check record-hash-chain grep -qE '^gowork;runtime\.goexit;main\.main\.func1;main\.hashLoop;crypto/sha256\.Sum256' "$folded"
check record-sort-chain grep -qE '^gowork;runtime\.goexit;main\.main\.func2;main\.sortLoop;sort\.Ints' "$folded"
# Inlined calls from Go's inline trees (sort.Ints inlines slices.Sort).
check record-inline-frames grep -qE ';main\.sortLoop;sort\.Ints;[^ ]*_\[i\]' "$folded"
# Frames without a name (gowork+0x...) in at most 2% of the samples.
total=$(folded_total "$folded")
unnamed=$(grep 'gowork+0x' "$folded" | awk '{ n += $NF } END { print n + 0 }')
check record-all-named test "$total" -gt 100 -a $((unnamed * 50)) -le "$total"
check record-main-samples test "$(grep -E ';main\.(hashLoop|sortLoop)' "$folded" |
	awk '{ n += $NF } END { print n + 0 }')" -ge $((total * 9 / 10))
# pprof carries Go's file:line for the stripped binary.
if PPROF_BINARY_PATH=/nonexistent GOCACHE=$TMP/gocache "$GO" tool pprof -raw \
	"$TMP/rec/profile.pb.gz" > "$TMP/raw" 2>&1; then
	check record-lines grep -qE 'main\.hashLoop .*gowork/main\.go:[0-9]+' "$TMP/raw"
else
	fail record-lines "go tool pprof -raw failed"
fi
# The mapping's build-ID is the synthetic one (fb1d01..: from the Go build ID).
check record-synthetic-id grep -qE 'fb1d01' "$TMP/raw"

# 2. Agent and symbolizer apart, over TCP: each computes the id alone; the
# symbolizer reads the binary by its path and takes it only when its id
# matches the agent's.
port=$(free_port)
mkdir -p "$TMP/nodebug"
"$SYMB" --local-files --listen "tcp://127.0.0.1:$port" --cache "$TMP/cache" --out "$TMP/out" \
	--debug-dir "$TMP/nodebug" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
"$AGENT" --table-cache "$TMP/tables" --server "tcp://127.0.0.1:$port" --interval 1 -p "$wl" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
wait_for 30 bash -c "[ \$(ls '$TMP'/out/*/*.folded 2>/dev/null | wc -l) -ge 3 ]"
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"
cat "$TMP"/out/*/*.folded > "$TMP/remote.folded" 2>/dev/null
check remote-names grep -qE ';main\.main\.func1;main\.hashLoop' "$TMP/remote.folded"
check remote-sort grep -qE ';main\.main\.func2;main\.sortLoop' "$TMP/remote.folded"

# 3. No access to the binary: the symbolizer asks the agent for its
# sections (notes and .gopclntab) and checks the Go-derived id on them.
port=$(free_port)
"$SYMB" --listen "tcp://127.0.0.1:$port" --cache "$TMP/fcache" --out "$TMP/fout" \
	--debug-dir "$TMP/nodebug" --no-local-files > "$TMP/fsymb.log" 2>&1 &
symb=$!
PIDS+=($symb)
"$AGENT" --table-cache "$TMP/tables" --server "tcp://127.0.0.1:$port" --interval 1 -p "$wl" > "$TMP/fagent.log" 2>&1 &
agent=$!
PIDS+=($agent)
wait_for 30 bash -c "[ \$(ls '$TMP'/fout/*/*.folded 2>/dev/null | wc -l) -ge 5 ]"
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"
check devfetch-fetched grep -q 'fetched from the device' "$TMP/fsymb.log"
ls "$TMP"/fout/*/*.folded | tail -n 2 | xargs cat > "$TMP/fetched.folded"
check devfetch-names grep -qE ';main\.main\.func1;main\.hashLoop' "$TMP/fetched.folded"

# 4. A C program linked without any build-ID note (like some Python
# extension modules): its id comes from its contents.
cat > "$TMP/nobid.c" <<'EOF_C'
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) static double spin_inner(double x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 1.0000001 + 0.5;
	return x;
}
__attribute__((noinline)) static double spin_outer(double x)
{
	return spin_inner(x) + spin_inner(x / 2);
}
int main(int argc, char **argv)
{
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
	volatile double x = 1;
	while (time(NULL) < end)
		x = spin_outer(x);
	return x < 0;
}
EOF_C
if cc -O1 -g -fno-omit-frame-pointer -Wl,--build-id=none -o "$TMP/bin/nobid" "$TMP/nobid.c"; then
	check c-no-build-id bash -c "! readelf -n '$TMP/bin/nobid' | grep -q 'Build ID'"
	"$TMP/bin/nobid" 60 &
	c=$!
	PIDS+=($c)
	sleep 0.3
	"$FP" record -d 3 -p "$c" -o "$TMP/crec" --cache "$TMP/rcache" > "$TMP/crecord.log" 2>&1
	check c-names grep -qE '^nobid;.*main;spin_outer;spin_inner ' "$TMP/crec/profile.folded"
	kill "$c"
else
	fail c-build "cc -Wl,--build-id=none"
fi
tail -n 3 "$TMP/record.log" "$TMP/symb.log" "$TMP/agent.log" "$TMP/fsymb.log" >&2
