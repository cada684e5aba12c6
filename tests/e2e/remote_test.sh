#!/bin/bash
# remote_test.sh: agent and symbolizer as separate processes over TCP on
# loopback.  Every sample the agent takes reaches the symbolizer, also
# across a symbolizer restart while the agent buffers.
TEST=remote
. tests/e2e/lib.sh
need_root

port=$(free_port)
addr=tcp://127.0.0.1:$port
start_symbolizer() {
	"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" >> "$TMP/symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
}

"$WORKLOAD" 60 & wl=$!
PIDS+=($wl)
start_symbolizer
sleep 0.5
# --timeout 1: a request waits less than the symbolizer is away (3 s),
# else nng's reconnection may carry it through the restart unnoticed
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 --timeout 1 -p "$wl" --label rack=r1 > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 4
kill -TERM "$symb"; wait "$symb"
sleep 3 # the agent buffers about three intervals
start_symbolizer
sleep 4
kill -INT "$agent"; wait "$agent"
check agent-exits-0 test $? -eq 0
kill -TERM "$symb"; wait "$symb"

sampled=$(sed -n 's/.*sampled \([0-9]*\) samples.*/\1/p' "$TMP/agent.log")
acked=$(sed -n 's/.*acknowledged \([0-9]*\);.*/\1/p' "$TMP/agent.log")
received=$(folded_total "$TMP"/out/*/*.folded)
echo "sampled $sampled, acknowledged $acked, in profiles $received" >&2
check samples-taken test "${sampled:-0}" -gt 500
check counts-add-up test "${sampled:-0}" -eq "${received:-x}"
check all-acknowledged test "${sampled:-0}" -eq "${acked:-x}"
check buffered-during-restart grep -q 'intervals buffered' "$TMP/agent.log"
check resumed-after-restart grep -q 'lost our session\|connected to' "$TMP/agent.log"
check profiles-per-interval test "$(ls "$TMP"/out/*/*.pb.gz | wc -l)" -ge 8
check kallsyms-uploaded grep -q 'stored kallsyms of vmlinux' "$TMP/symb.log"
check kernel-resolved-remotely grep -qh 'ksys_write_\[k\]' "$TMP"/out/*/*.folded
# The symbolizer sends the kernel's function starts once it has its
# kallsyms; kernel frames then go at them and keep their names.
kfuncs=$(sed -n 's/.*kernel function starts: \([0-9]*\) (.*/\1/p' "$TMP/agent.log" | tail -n 1)
kfolded=$(sed -n 's/.*, \([0-9]*\) kernel frames folded to them.*/\1/p' "$TMP/agent.log")
echo "kernel function starts $kfuncs, frames folded $kfolded" >&2
check kernel-starts-received test "${kfuncs:-0}" -gt 10000
check kernel-frames-folded test "${kfolded:-0}" -gt 0
# the last intervals come after the list (its first reply, a second in)
last=$(ls "$TMP"/out/*/*.folded | sort | tail -n 4 | tr "\n" " ")
check kernel-named-after-fold grep -q 'ksys_write_\[k\]' $last
check no-unnamed-kernel-frames bash -c "! grep -qE '(0x[0-9a-f]+|unknown\])_\[k\]' $last"
check user-resolved-remotely grep -qh 'compute_loop;fp::Cruncher::crunch(int)' "$TMP"/out/*/*.folded
check no-rejections bash -c "! grep -q 'rejected a message' '$TMP/symb.log'"
cat "$TMP/agent.log" "$TMP/symb.log" | tail -n 20 >&2
