#!/bin/bash
# agent_unwind_test.sh: unwind tables over the wire.  The agent and the
# symbolizer run apart; a program built without frame pointers (gcc -O2)
# is profiled.  The symbolizer compiles its tables and sends them in its
# replies, once (libc's with the program's); from 2 s after the first
# interval on, its stacks are whole down to _start; batches
# stay as small as before.  The BPF program also builds for arm64.
TEST=agent-unwind
. tests/e2e/lib.sh

if clang -g -O2 -target bpf -D__TARGET_ARCH_arm64 -I/usr/include/$(gcc -print-multiarch) -Ibpf \
	-c bpf/stacks.bpf.c -o "$TMP/stacks-arm64.bpf.o" 2> "$TMP/arm64.log"; then
	pass bpf-builds-for-arm64
else
	fail bpf-builds-for-arm64 "$(tail -n 3 "$TMP/arm64.log" | tr '\n' ' ')"
fi
need_root

gcc -O2 -g tests/kernels/nofp.c -o "$TMP/nofp" || { fail build; exit 0; }
port=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" -v > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
sleep 0.5
"$TMP/nofp" 30 & wl=$!
PIDS+=($wl)
"$AGENT" --server "$addr" --interval 1 -p "$wl" --table-cache "$TMP/tables" -v \
	> "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 9
kill -INT "$agent"; wait "$agent"
check agent-exits-0 test $? -eq 0
kill -TERM "$symb"; wait "$symb"

# Per interval: samples of chain_c, and those whose stack reaches main;
# counted from the intervals that start 2 s after the first (the first
# ones may be early and short: the agent asks for tables at once).
mapfile -t files < <(ls "$TMP"/out/*/*.folded | sort -t- -k1,1 -k2,2n)
# start FILE: its interval's start (STAMP-SEQ, STAMP UTC), seconds of the day.
start() {
	local b=${1##*/}
	b=${b%%-*}
	echo $((10#${b:9:2} * 3600 + 10#${b:11:2} * 60 + 10#${b:13:2}))
}
first=$(start "${files[0]}")
whole_after_two=0 total_after_two=0 i=0
for f in "${files[@]}"; do
	i=$((i + 1))
	read -r w t < <(awk '/chain_c/ { t += $NF; if ($0 ~ /^nofp;_start;.*;main;chain_a;chain_b;chain_c/) w += $NF }
		END { print w + 0, t + 0 }' "$f")
	echo "interval $i (from $(($(start "$f") - first)) s): $w of $t chain_c samples whole" >&2
	if [ $(($(start "$f") - first)) -ge 2 ] && [ $i -lt ${#files[@]} ]; then
		whole_after_two=$((whole_after_two + w))
		total_after_two=$((total_after_two + t))
	fi
done
check intervals test ${#files[@]} -ge 6
check samples test "$total_after_two" -ge 300
check whole-after-two-seconds test $((whole_after_two * 100)) -ge $((total_after_two * 97))
sent=$(sed -n 's/.*unwind table bytes sent \([0-9]*\).*/\1/p' "$TMP/symb.log" | tail -n 1)
got=$(sed -n 's/.* \([0-9]*\) bytes of unwind tables.*/\1/p' "$TMP/agent.log")
echo "table bytes: sent $sent, received $got" >&2
check tables-sent test "${sent:-0}" -gt 0
check tables-received-as-sent test "${got:-x}" = "${sent:-y}"
check tables-installed grep -q 'unwind tables: [1-9][0-9]* installed now' "$TMP/agent.log"
# Tables travel in replies, not batches: once definitions are sent, a
# batch is the fixed 46 bytes plus a few bytes a stack (one thread at
# 99 Hz here, so about 70 samples a batch; make bench measures 0.7 bytes a
# sample at a typical rate).
steady=$(grep -o 'acknowledged: [0-9]* samples in [0-9]* bytes' "$TMP/agent.log" | tail -n 4 |
	awk '{ s += $2; b += $5 } END { if (s) printf "%.2f", b / s }')
echo "steady-state wire bytes per sample: $steady" >&2
check steady-bytes-per-sample awk -v b="${steady:-99}" 'BEGIN { exit !(b <= 3) }'
# The BPF program's own counters agree: nearly every walk reached the root.
read -r walks roots < <(sed -n 's/.*stack walks: \([0-9]*\), \([0-9]*\) to the root.*/\1 \2/p' "$TMP/agent.log")
echo "BPF walks $walks, to the root $roots" >&2
check bpf-walks test "${walks:-0}" -ge 300
check bpf-walks-reach-root test $((${roots:-0} * 100)) -ge $((${walks:-1} * 95))
