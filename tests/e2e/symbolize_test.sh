#!/bin/bash
# symbolize_test.sh: `fleetprof symbolize -e FILE --cache DIR` on the real
# libc and its debug file (libc6-dbg).  The first run builds the table from
# the debug file and stores it by build-ID; the next ones take it from the
# cache without opening the debug file (strace), and answer the same with
# the debug file gone.  Answers agree with llvm-symbolizer's, function
# names without ELF symbol versions.  A cached table of an older format is
# built again and replaced.  No root needed.
TEST=symbolize
. tests/e2e/lib.sh

LIBC=/lib/x86_64-linux-gnu/libc.so.6
bid=$(readelf -n "$LIBC" 2>/dev/null | awk '/Build ID/ { print $3 }')
SRC_DEBUG=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
if [ -z "$bid" ] || [ ! -r "$SRC_DEBUG" ]; then
	if [ -n "$CI" ]; then
		fail "libc-debug" "no $SRC_DEBUG: install libc6-dbg"
	else
		echo "SKIP: $TEST (no libc debug file: install libc6-dbg)"
	fi
	exit 0
fi
# A debug directory of our own, so that the file can be taken away.
DEBUG=$TMP/debug
DBG=$DEBUG/.build-id/${bid:0:2}/${bid:2}.debug
mkdir -p "$(dirname "$DBG")"
cp "$SRC_DEBUG" "$DBG"

# 2,000 addresses inside random functions of the debug file, and the start
# of getgrnam_r, whose symbol there is "getgrnam_r@@GLIBC_2.2.5".
readelf -sW "$DBG" 2>/dev/null | awk '$4 == "FUNC" && $3 + 0 > 0 { print $2, $3 }' |
	shuf -n 2000 --random-source=<(yes) |
	while read -r addr size; do printf '0x%x\n' $((16#$addr + size / 2)); done > "$TMP/addrs"
readelf -sW "$DBG" 2>/dev/null |
	awk '$8 == "getgrnam_r@@GLIBC_2.2.5" { print "0x" $2 }' >> "$TMP/addrs"
check addresses test "$(wc -l < "$TMP/addrs")" -eq 2001

run() { # run OUT [ARGS...]: symbolize the addresses of libc
	local out=$1
	shift
	"$FP" symbolize -e "$LIBC" --debug-dir "$DEBUG" "$@" < "$TMP/addrs" > "$out" 2> "$out.err"
}
# opens TRACE: how many times a traced run opened or looked at a file in
# the debug directory (its command line names only the directory).
opens() { grep -c "$DEBUG/\.build-id" "$1"; }

t0=$(date +%s%N)
run "$TMP/cold" --cache "$TMP/cache"
check cold-exits-0 test $? -eq 0
t1=$(date +%s%N)
check cache-written test -s "$TMP/cache/data.mdb"
check unversioned-names bash -c "grep -qx getgrnam_r '$TMP/cold' && ! grep -q '@' '$TMP/cold'"
check lines-from-debug-file grep -q 'getXXbyYY_r.c:' "$TMP/cold"

# llvm-symbolizer prints "getgrnam_r@@GLIBC_2.2.5": the same once its
# versions are dropped (what fp_elf_unversioned_len drops).
llvm-symbolizer --obj="$DBG" < "$TMP/addrs" |
	sed -E 's/^([^@]+)@@?[^@]+$/\1/' > "$TMP/llvm"
check same-as-llvm-symbolizer cmp "$TMP/cold" "$TMP/llvm"
check llvm-shows-versions bash -c "llvm-symbolizer --obj='$DBG' < '$TMP/addrs' | grep -qx 'getgrnam_r@@GLIBC_2.2.5'"

# Warm: the debug file is not even looked at.
strace -f -e trace=%file -o "$TMP/warm.trace" \
	"$FP" symbolize -e "$LIBC" --debug-dir "$DEBUG" --cache "$TMP/cache" \
	< "$TMP/addrs" > "$TMP/warm" 2> "$TMP/warm.err"
check warm-exits-0 test $? -eq 0
check warm-same cmp "$TMP/cold" "$TMP/warm"
check warm-opens-no-debug-file test "$(opens "$TMP/warm.trace")" -eq 0
check cold-opened-debug-file bash -c "strace -f -e trace=%file -o '$TMP/cold2.trace' \
	'$FP' symbolize -e '$LIBC' --debug-dir '$DEBUG' < /dev/null && grep -q '$DBG' '$TMP/cold2.trace'"

# Gone: the cache still answers; without it only .dynsym names are left.
rm "$DBG"
t3=$(date +%s%N)
run "$TMP/gone" --cache "$TMP/cache"
t4=$(date +%s%N)
check gone-same cmp "$TMP/cold" "$TMP/gone"
run "$TMP/nocache"
check nocache-differs bash -c "! grep -q 'getXXbyYY_r.c:' '$TMP/nocache' && grep -qx getgrnam_r '$TMP/nocache'"
cold_ms=$(((t1 - t0) / 1000000))
warm_ms=$(((t4 - t3) / 1000000))
echo "  cold ${cold_ms} ms, warm ${warm_ms} ms (2001 addresses, start-up included)"
check warm-5x-faster-than-cold test $((warm_ms * 5)) -le "$cold_ms"

# The table is kept by the file's build-ID: --build-id finds it.
"$FP" symbolize --build-id "$bid" --cache "$TMP/cache" < "$TMP/addrs" > "$TMP/byid" 2>&1
check build-id-same cmp "$TMP/cold" "$TMP/byid"

# A table of an older format (2) is stale: built again from the debug
# file and replaced, then reused.
cp "$SRC_DEBUG" "$DBG"
python3 - "$TMP/cache/data.mdb" <<'EOF'
import sys
p = sys.argv[1]
data = open(p, "rb").read()
new = data.replace(b"FPST\x03\x00\x00\x00", b"FPST\x02\x00\x00\x00")
assert new != data
open(p, "wb").write(new)
EOF
strace -f -e trace=%file -o "$TMP/stale.trace" \
	"$FP" symbolize -e "$LIBC" --debug-dir "$DEBUG" --cache "$TMP/cache" \
	< "$TMP/addrs" > "$TMP/stale" 2> "$TMP/stale.err"
check stale-rebuilt bash -c "[ $(opens "$TMP/stale.trace") -gt 0 ] && cmp '$TMP/cold' '$TMP/stale'"
rm "$DBG"
run "$TMP/replaced" --cache "$TMP/cache"
check stale-replaced cmp "$TMP/cold" "$TMP/replaced"

# A table built without the debug file (.dynsym names, no lines) gives
# way to the debug file's once it is there, which is then kept.
run "$TMP/poor" --cache "$TMP/cache2"
check poor-has-no-lines cmp "$TMP/nocache" "$TMP/poor"
cp "$SRC_DEBUG" "$DBG"
run "$TMP/richer" --cache "$TMP/cache2"
check richer-replaces-poor cmp "$TMP/cold" "$TMP/richer"
rm "$DBG"
run "$TMP/richer2" --cache "$TMP/cache2"
check richer-kept cmp "$TMP/cold" "$TMP/richer2"

# A cache that cannot be opened is an error, not a silent fallback.
touch "$TMP/afile"
run "$TMP/bad" --cache "$TMP/afile"
check bad-cache-exits-1 test $? -eq 1
check bad-cache-says-why grep -q "cannot open the symbol cache" "$TMP/bad.err"
