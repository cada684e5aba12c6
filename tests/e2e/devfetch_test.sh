#!/bin/bash
# devfetch_test.sh: the device as the last source of symbols.  A
# symbolizer with no debug files and no access to the device's files
# learns a binary's symbols by asking the agent for its symbol sections.
TEST=devfetch
. tests/e2e/lib.sh
need_root

mkdir -p "$TMP/nodebug"
# session CACHE OUT LOGS SECONDS COMMAND...: a symbolizer with no source of
# files but the device (logs LOGSsymb.log) and an agent profiling COMMAND
# (LOGSagent.log) for SECONDS.
session() {
	local cache=$1 out=$2 logs=$3 secs=$4 addr symb wl agent
	shift 4
	addr=tcp://127.0.0.1:$(free_port)
	"$SYMB" --listen "$addr" --cache "$cache" --out "$out" --debug-dir "$TMP/nodebug" \
		--no-local-files > "${logs}symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	"$@" & wl=$!
	PIDS+=($wl)
	sleep 0.5
	"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$wl" $AGENT_ARGS > "${logs}agent.log" 2>&1 &
	agent=$!
	PIDS+=($agent)
	sleep "$secs"
	kill -INT "$agent"; wait "$agent"
	kill -TERM "$symb"; wait "$symb"
	kill "$wl" 2>/dev/null; wait "$wl" 2>/dev/null
}
session "$TMP/cache" "$TMP/out" "$TMP/" 7 "$WORKLOAD" 60

# The first interval with samples (an agent's first interval may close
# early, as soon as it has read the workload's mappings, with none).
first=$(for f in $(ls "$TMP"/out/*/*.folded); do [ -s "$f" ] && echo "$f"; done | head -n 1)
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

# The agent's own budget: at 16 KB a second the workload's symbol
# sections take several intervals, and still arrive whole.
AGENT_ARGS="--fetch-budget 16" session "$TMP/bcache" "$TMP/bout" "$TMP/b" 9 "$WORKLOAD" 60
bid=$(readelf -n "$WORKLOAD" | awk '/Build ID/ { print $3; exit }')
deferred=$(sed -n 's/.*file bytes deferred to a later interval \([0-9]*\) times.*/\1/p' "$TMP/bagent.log")
check budget-spreads-fetch [ "${deferred:-0}" -gt 0 ]
check budget-fetch-completes grep -q "symbols of $bid fetched from the device" "$TMP/bsymb.log"
ls "$TMP"/bout/*/*.folded | tail -n 2 | xargs cat > "$TMP/blate.folded"
check budget-names-resolved grep -qE 'compute_loop;fp::Cruncher::crunch\(int\)' "$TMP/blate.folded"
# --no-fetch: the symbolizer is told no at once, and asks that host again
# only after a back-off (another host it would ask at once).
AGENT_ARGS="--no-fetch" session "$TMP/ncache" "$TMP/nout" "$TMP/n" 4 "$WORKLOAD" 60
check no-fetch-refused grep -q "symbols of $bid from the device: .*or this one in 60 s" "$TMP/nsymb.log"
check no-fetch-no-bytes grep -q ' 0 bytes of files' "$TMP/nagent.log"
check no-fetch-unresolved grep -q 'workload+0x' <(cat "$TMP"/nout/*/*.folded)

# A CPython interpreter: Debian's python3.11 (not PIE, libpython linked
# in, no .symtab; Py_Version in .dynsym, its value in .rodata, which the
# fetch does not bring whole).  The table from the fetched copy must be
# the whole file's, CPython trailer and version included.
PY=/usr/bin/python3.11
if [ ! -x "$PY" ]; then
	echo "SKIP: $TEST:python (no $PY)"
	exit 0
fi
session "$TMP/pycache" "$TMP/pyout" "$TMP/py" 5 "$PY" -c 'while True: pass'

pybid=$(readelf -n "$PY" | awk '/Build ID/ { print $3; exit }')
"$FP" symbolize --unwind-table -e "$PY" -o "$TMP/pyfull.unwind"
"$FP" symbolize --unwind-table --build-id "$pybid" --cache "$TMP/pycache" -o "$TMP/pyfetched.unwind"
# trailer_version FILE: the uc_version of a table with the CPython trailer.
trailer_version() {
	python3 - "$1" <<'PYEOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
magic, ver, arch, flags, nrows, fdes = struct.unpack_from("<4sHBBII", b)
end = 16 + 8 * nrows
assert magic == b"FPUW" and flags & 2 and len(b) == end + 32, "no CPython trailer"
print("0x%04x" % struct.unpack_from("<I", b, end)[0])
PYEOF
}
check python-fetched-from-device grep -q "symbols of $pybid fetched from the device" "$TMP/pysymb.log"
check python-full-trailer-version [ "$(trailer_version "$TMP/pyfull.unwind")" = 0x030b ]
check python-fetched-trailer-version [ "$(trailer_version "$TMP/pyfetched.unwind")" = 0x030b ]
check python-unwind-table-from-device cmp "$TMP/pyfull.unwind" "$TMP/pyfetched.unwind"
tail -n 8 "$TMP/pysymb.log" "$TMP/pyagent.log" >&2
