#!/bin/bash
# agent_pids_test.sh: -p repeated.  Three copies of a busy program run
# under three names; the agent, given -p for two of them, sends the
# stacks of those two and none of the third.  A 17th -p is refused.
TEST=agent-pids
. tests/e2e/lib.sh

pids=()
for i in $(seq 17); do pids+=(-p "$i"); done
"$AGENT" --table-cache "$TMP/tables" --server tcp://127.0.0.1:1 "${pids[@]}" > "$TMP/many.log" 2>&1
check seventeen-refused test $? -eq 2
check seventeen-says-why grep -q 'at most 16 -p' "$TMP/many.log"

need_root
gcc -O2 -g tests/kernels/nofp.c -o "$TMP/nofp" || { fail build; exit 0; }
for n in pida pidb pidc; do cp "$TMP/nofp" "$TMP/$n"; done
port=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
sleep 0.5
for n in pida pidb pidc; do
	"$TMP/$n" 30 &
	PIDS+=($!)
	eval "$n=$!"
done
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$pida" -p "$pidb" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 6
kill -INT "$agent"
wait "$agent"
check agent-exits-0 test $? -eq 0
kill -TERM "$symb"
wait "$symb"
cat "$TMP"/out/*/*.folded > "$TMP/all.folded" 2> /dev/null
check logs-the-processes grep -q 'sampling at 99 Hz (the processes of -p)' "$TMP/agent.log"
check first-sampled grep -q '^pida;' "$TMP/all.folded"
check second-sampled grep -q '^pidb;' "$TMP/all.folded"
check third-not-sampled bash -c "! grep -q '^pidc;' '$TMP/all.folded'"
check nothing-else bash -c "! grep -qv '^pid[ab];' '$TMP/all.folded'"
