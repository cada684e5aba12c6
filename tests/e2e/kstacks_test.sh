#!/bin/bash
# kstacks_test.sh: samples taken in the kernel keep both halves of their
# stack, on the fleet path (fleetprof-agent -> fleetprof-symbolizer, no
# --local-files: the symbolizer gets the program's symbols and CFI from
# the device).  The workload, tests/workload/syswork.c, spends most of its
# time in system calls: 16 KiB round trips through a pipe and through a
# loopback TCP connection, whose receive side the kernel runs in a softirq
# on the CPU's IRQ stack.  It has no C library and no frame pointers (gcc
# -O2), so its user stack is whole only when the BPF program finds the
# registers the task had in user mode (saved at the top of its kernel
# stack, reached through the IRQ stack in a softirq) and walks them by its
# table.  From the interval after the first with a whole stack (the
# program's table has arrived) on:
#   kernel-share     >= 50% of its samples have kernel frames
#   kernel-whole     >= 95% of those have the whole user stack,
#                    _start;start_c;main;pump;[through_pipe|through_tcp;
#                    [transfer;]]sys (pump reads the clock), then kernel
#                    frames only
#   syscall-frames   the system call's kernel frames are named:
#                    ksys_write_[k], then a pipe's or a socket's writer
#                    (anon_pipe_write/pipe_write, tcp_sendmsg) below it
#   softirq-whole    >= 20 samples with net_rx_action_[k] (taken on the
#                    IRQ stack), >= 95% of them with the whole user stack
#   regs-found       the agent's count of walks that found no user
#                    registers (leaf only) is <= 1% of its walks
# A second agent with --user-stacks-only samples the same process at the
# same time, to a second symbolizer:
#   user-only:no-kernel-frames  none of its samples has a kernel frame
#   user-only:rooted  >= 95% of its samples reach main from _start
#   user-only:syscalls  >= 50% of its samples are whole chains to sys
#                    (taken in the kernel, their user stack recovered)
TEST=kstacks
. tests/e2e/lib.sh
need_root

if ! gcc -O2 -static -nostdlib -fno-pie -no-pie -fno-stack-protector \
	-o "$TMP/syswork" tests/workload/syswork.c 2> "$TMP/build.log"; then
	fail build "$(tail -n 3 "$TMP/build.log" | tr '\n' ' ')"
	exit 0
fi
"$TMP/syswork" 30 & wl=$!
PIDS+=($wl)
# agent NAME [OPTION...]: a symbolizer and an agent on syswork, NAME their
# files' prefix; the agent's pid in $agent.
agent() {
	local name=$1 addr=tcp://127.0.0.1:$(free_port)
	shift
	"$SYMB" --listen "$addr" --cache "$TMP/$name-cache" --out "$TMP/$name-out" -v \
		> "$TMP/$name-symb.log" 2>&1 &
	PIDS+=($!)
	sleep 0.3
	"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -F 199 -p "$wl" -v "$@" > "$TMP/$name-agent.log" 2>&1 &
	agent=$!
	PIDS+=($agent)
}
agent both
both=$agent
agent user --user-stacks-only
user=$agent
sleep 12
kill -INT "$both" "$user"
wait "$both"
check agent-exits-0 test $? -eq 0
wait "$user"
check user-only:agent-exits-0 test $? -eq 0

# shares NAME: "samples, with kernel frames, those whole, softirq ones,
# those whole, whole ones with a named write, whole ones, ones from
# _start through main" of syswork in NAME's
# intervals after the first that has a whole stack (a user-mode sample is
# enough, they are few), but the last (cut short).  A sample is whole
# when its user frames (those before the first "_[k]" one) are the chain.
shares() {
	local files first i
	mapfile -t files < <(ls "$TMP/$1"-out/*/*.folded 2> /dev/null | sort)
	first=${#files[@]}
	for i in "${!files[@]}"; do
		grep -q '^syswork;_start;' "${files[$i]}" && first=$i && break
	done
	echo "$1: first interval with a whole stack: $((first + 1)) of ${#files[@]}" >&2
	cat "${files[@]:first+1:${#files[@]}-first-2}" /dev/null | awk '
	index($0, "syswork;") == 1 {
		n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
		m = split(stack, f, ";"); user = f[1]; kernel = 0
		for (i = 2; i <= m; i++) {
			if (f[i] ~ /_\[k\]$/) { kernel = 1; break }
			user = user ";" f[i]
		}
		whole = user ~ /^syswork;_start;start_c;main;pump;(through_(pipe|tcp);(transfer;)?)?sys$/
		all += n
		if (whole) allwhole += n
		if (user ~ /^syswork;_start;start_c;main(;|$)/) rooted += n
		if (!kernel) next
		kern += n
		if (whole) kwhole += n
		else if (bad++ < 3) print "not whole: " $0 > "/dev/stderr"
		if (index(stack, ";net_rx_action_[k]")) { soft += n; if (whole) swhole += n }
		if (whole && stack ~ /;ksys_write_\[k\];(.*;)?((anon_)?pipe_write|tcp_sendmsg)_\[k\]/) named += n
	}
	END { print all + 0, kern + 0, kwhole + 0, soft + 0, swhole + 0, named + 0, allwhole + 0, rooted + 0 }'
}

read -r all kern kwhole soft swhole named _ _ < <(shares both)
echo "samples $all, in the kernel $kern (whole $kwhole), softirq $soft (whole $swhole), named writes $named" >&2
check samples test "$all" -ge 200
check kernel-share test $((kern * 100)) -ge $((all * 50))
check kernel-whole test $((kwhole * 100)) -ge $((kern * 95))
check syscall-frames test "$named" -ge 20
check softirq-whole test "$soft" -ge 20 -a $((swhole * 100)) -ge $((soft * 95))
read -r walks lost < <(sed -n 's/.*stack walks: \([0-9]*\), [0-9]* to the root; \([0-9]*\) with no user registers.*/\1 \2/p' "$TMP/both-agent.log")
echo "BPF walks $walks, no user registers found $lost" >&2
check regs-found test "${walks:-0}" -ge 200 -a $((${lost:-1} * 100)) -le "${walks:-0}"

read -r all kern _ _ _ _ whole rooted < <(shares user)
echo "--user-stacks-only: samples $all, with kernel frames $kern, whole to sys $whole, from _start $rooted" >&2
check user-only:samples test "$all" -ge 200
check user-only:no-kernel-frames test "$kern" -eq 0
check user-only:rooted test $((rooted * 100)) -ge $((all * 95))
check user-only:syscalls test $((whole * 100)) -ge $((all * 50))
