#!/bin/bash
# devfetch_test.sh: the device as the last source of symbols.  A
# symbolizer with no debug files and no access to the device's files
# learns a binary's symbols by asking the agent for its symbol sections.
TEST=devfetch
. tests/e2e/lib.sh
need_root

port=$(free_port)
addr=tcp://127.0.0.1:$port
mkdir -p "$TMP/nodebug"
"$SYMB" --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" --debug-dir "$TMP/nodebug" \
	--no-local-files > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
"$WORKLOAD" 60 & wl=$!
PIDS+=($wl)
sleep 0.5
"$AGENT" --server "$addr" --interval 1 -p "$wl" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 7
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"

first=$(ls "$TMP"/out/*/*.folded | head -n 1)
ls "$TMP"/out/*/*.folded | tail -n +4 | xargs cat > "$TMP/later.folded"
last=$TMP/later.folded
check first-interval-unresolved grep -q 'workload+0x' "$first"
check fetched-from-device grep -q 'fetched from the device' "$TMP/symb.log"
check later-intervals-resolved grep -qE 'compute_loop;fp::Cruncher::crunch\(int\)(;[^; ]*_\[i\])* ' "$last"
check library-resolved grep -qE 'compute_loop;fpwork_mix ' "$last"
check agent-sent-file-bytes grep -qE '[1-9][0-9]* bytes of files' "$TMP/agent.log"
# The sparse copy carries the CFI sections: the unwind table stored for
# the fetched binary is the one the whole file compiles to.
bid=$(readelf -n "$WORKLOAD" | awk '/Build ID/ { print $3; exit }')
"$FP" symbolize --unwind-table -e "$WORKLOAD" -o "$TMP/full.unwind"
"$FP" symbolize --unwind-table --build-id "$bid" --cache "$TMP/cache" -o "$TMP/fetched.unwind"
check unwind-table-from-device cmp "$TMP/full.unwind" "$TMP/fetched.unwind"
tail -n 8 "$TMP/symb.log" "$TMP/agent.log" >&2
