#!/bin/bash
# stripped_test.sh: a stripped workload, profiled continuously, shows only
# module+offset frames until its debug files are uploaded with `fleetprof
# upload`; from the next interval on it shows names, file:line and inline
# frames -- with no restart of anything.
TEST=stripped
. tests/e2e/lib.sh
need_root

mkdir -p "$TMP/bin" "$TMP/nodebug"
cp "$WORKLOAD" "$BUILD/tests/libfpwork.so" "$TMP/bin/"
for f in workload libfpwork.so; do
	objcopy --only-keep-debug "$TMP/bin/$f" "$TMP/$f.debug"
	strip --strip-all "$TMP/bin/$f"
done
check binary-stripped bash -c "! readelf -S '$TMP/bin/workload' | grep -q '\.symtab'"

port=$(free_port)
http=$(free_port)
"$SYMB" --local-files --listen "tcp://127.0.0.1:$port" --http "127.0.0.1:$http" --store "$TMP/store" \
	--cache "$TMP/cache" --out "$TMP/out" --debug-dir "$TMP/nodebug" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
"$TMP/bin/workload" 60 > /dev/null &
wl=$!
PIDS+=($wl)
sleep 0.5
"$AGENT" --table-cache "$TMP/tables" --server "tcp://127.0.0.1:$port" --interval 1 -p "$wl" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
# Three intervals before the upload (the first may wait for kallsyms).
wait_for 30 bash -c "[ \$(ls '$TMP'/out/*/*.folded 2>/dev/null | wc -l) -ge 3 ]"
cat "$TMP"/out/*/*.folded > "$TMP/before.folded"
check unresolved-before grep -q 'workload+0x' "$TMP/before.folded"
check no-names-before bash -c "! grep -q 'Cruncher' '$TMP/before.folded'"

"$FP" upload --server "http://127.0.0.1:$http" "$TMP/workload.debug" "$TMP/libfpwork.so.debug" \
	> "$TMP/upload.log" 2>&1
check upload-ok test $? -eq 0
ls "$TMP"/out/*/*.folded > "$TMP/seen"
n=$(wc -l < "$TMP/seen")
wait_for 30 bash -c "[ \$(ls '$TMP'/out/*/*.folded | wc -l) -ge $((n + 4)) ]"
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"
ls "$TMP"/out/*/*.folded | grep -vxFf "$TMP/seen" | tail -n +2 | xargs cat > "$TMP/after.folded"
check names-after grep -qE 'compute_loop;fp::Cruncher::crunch\(int\)' "$TMP/after.folded"
check inline-after grep -qE 'fp::Cruncher::crunch\(int\);fp::step\(double\)_\[i\]' "$TMP/after.folded"
check library-after grep -qE 'compute_loop;fpwork_mix' "$TMP/after.folded"
pb=$(ls "$TMP"/out/*/*.pb.gz | tail -n 2 | head -n 1)
if command -v go > /dev/null; then
	PPROF_BINARY_PATH=/nonexistent go tool pprof -raw "$pb" > "$TMP/raw" 2>&1
	check lines-after grep -qE 'fp::step\(double\) .*workload\.cc:[0-9]+' "$TMP/raw"
fi
check no-restart bash -c "[ \$(grep -c 'listening on' '$TMP/symb.log') -eq 1 ]"
tail -n 4 "$TMP/upload.log" "$TMP/symb.log" "$TMP/agent.log" >&2

# A stripped binary whose .gnu_debuglink names a debug file beside it
# resolves directly (fleetprof record reads local files).
mkdir -p "$TMP/linked/.debug"
cp "$WORKLOAD" "$BUILD/tests/libfpwork.so" "$TMP/linked/"
objcopy --only-keep-debug "$TMP/linked/workload" "$TMP/linked/.debug/workload.debug"
strip --strip-all "$TMP/linked/workload"
objcopy --add-gnu-debuglink="$TMP/linked/.debug/workload.debug" "$TMP/linked/workload"
"$TMP/linked/workload" 30 > /dev/null &
wl2=$!
PIDS+=($wl2)
sleep 0.5
"$FP" record -d 3 -p "$wl2" -o "$TMP/linked-out" --cache "$TMP/linked-cache" > /dev/null 2>&1
check debuglink-resolved grep -qE 'fp::Cruncher::crunch\(int\);fp::step\(double\)_\[i\]' \
	"$TMP/linked-out/profile.folded"
