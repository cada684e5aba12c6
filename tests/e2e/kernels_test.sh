#!/bin/bash
# kernels_test.sh: the kernel matrix.  Boots Debian's kernels 5.10
# (bullseye), 6.1 (bookworm) and 6.12 (trixie) in qemu (software
# emulation) with a minimal busybox initramfs (tests/kernels/), and inside
# runs `fleetprof record -p` on tests/kernels/nofp.c, a gcc -O2 program
# without frame pointers.  Each kernel boots twice: once with
# /sys/kernel/btf visible ("btf"), once with an empty tmpfs over it
# ("nobtf").  Checks, per kernel and case (kernels:VERSION:CASE:NAME):
#
#   boots        the VM reached the end of its script within the timeout
#   btf-visible  /sys/kernel/btf/vmlinux was there (btf case) /
#   btf-hidden   was not (nobtf case)
#   loads        the BPF program loaded (else: libbpf's output, with the
#                verifier log, is printed)
#   samples      the profile has samples
#   unwinds      >= 90% of nofp's samples whose leaf is chain_c have
#                main;chain_a;chain_b;chain_c (the unwinder from tables)
#   fp-unwinds   the same for nofpfp, nofp.c built with frame pointers:
#                the control, for the frame-pointer walk, symbols in the
#                VM and this script
#   kernel-stacks  tests/workload/syswork.c (pipe and loopback TCP round
#                trips, no C library, gcc -O2): >= 50% of its samples have
#                kernel frames, and >= 90% of those have its whole user
#                stack from _start (the user registers found at the top of
#                the kernel stack, where kernels with FRED keep them 16
#                bytes lower, or through the IRQ stack in a softirq)
#   offcpu       `fleetprof record --off-cpu` on tests/workload/waitwork.c
#                (gcc -O2, no frame pointers): the off-CPU programs load,
#                and >= 10% of its time off-CPU is its thread piper
#                waiting in pipe_read under wait_on_pipe
#   agent-loads  fleetprof-agent, with its default unwind table memory,
#                loads the program and samples nofp (no symbolizer: it
#                only buffers)
#   python-frames  `fleetprof record -p` on tests/kernels/pywork.py run by
#                the host's python3.11 (Debian's: static libpython, no
#                frame pointers) with -S -I, from when it is in its loop:
#                >= 90% of its samples have <module>_[py];outer_[py];
#                inner_[py] (the BPF program's CPython walk)
#
# The initramfs holds the interpreter at its own path with only the
# standard library files its start-up reads (encodings; 3.11 freezes the
# rest), see tests/kernels/mkinitramfs.sh.  FPK_PYTHON names another
# 3.11 interpreter.
#
# Kernels are cached in $FPK_CACHE (default /var/cache/fleetprof-kernels),
# serial logs are kept in $BUILD/kernel-logs.  FPK_KERNELS="5.10 6.1"
# narrows the matrix, FPK_CASES="btf" the cases.
TEST=kernels
. tests/e2e/lib.sh
need_root

t_start=$SECONDS
FPK_CACHE=${FPK_CACHE:-/var/cache/fleetprof-kernels}
FPK_KERNELS=${FPK_KERNELS:-5.10 6.1 6.12}
FPK_CASES=${FPK_CASES:-btf nobtf}
BOOT_TIMEOUT=${FPK_BOOT_TIMEOUT:-120} # seconds per VM, boot to power-off
DURATION=${FPK_DURATION:-5}           # seconds of `fleetprof record` per case
PY_DURATION=${FPK_PY_DURATION:-3}     # the same for the Python workload,
PY_FREQ=${FPK_PY_FREQ:-49}            # sampled at this frequency (Hz)
PYTHON=${FPK_PYTHON:-/usr/bin/python3.11}
LOGS=$BUILD/kernel-logs
mkdir -p "$LOGS"

suite_of() {
	case $1 in
	5.10) echo bullseye ;;
	6.1) echo bookworm ;;
	6.12) echo trixie ;;
	*) return 1 ;;
	esac
}

# Tools and binaries: missing ones fail the whole matrix, with the reason.
missing=""
for tool in qemu-system-x86_64 cpio gcc clang flock; do
	command -v "$tool" > /dev/null || missing="$missing $tool"
done
[ -x /bin/busybox ] || missing="$missing busybox-static"
for bin in "$FP" "$AGENT"; do
	[ -x "$bin" ] || missing="$missing $bin"
done
if [ -n "$missing" ]; then
	fail setup "missing:$missing (tools/install-deps.sh, make BUILD=$BUILD all)"
	exit 0
fi

# nofp: gcc's defaults, -O2, so no frame pointers; the name is its comm.
# nofpfp, the control: the same with frame pointers, leaf functions too
# (clang: gcc 12 ignores -mno-omit-leaf-frame-pointer).
mkdir -p "$TMP/nofp"
if ! gcc -O2 -o "$TMP/nofp/nofp" tests/kernels/nofp.c 2> "$TMP/nofp.log" ||
	! clang -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -Wno-unknown-attributes \
		-o "$TMP/nofp/nofpfp" tests/kernels/nofp.c 2>> "$TMP/nofp.log"; then
	fail setup "nofp does not build: $(head -c 300 "$TMP/nofp.log")"
	exit 0
fi
# syswork: a kernel-mode workload, its own _start, no C library.
if ! gcc -O2 -static -nostdlib -fno-pie -no-pie -fno-stack-protector -o "$TMP/nofp/syswork" \
	tests/workload/syswork.c 2>> "$TMP/nofp.log"; then
	fail setup "syswork does not build: $(head -c 300 "$TMP/nofp.log")"
	exit 0
fi
# waitwork: threads that wait (a pipe, nanosleep, poll), for --off-cpu.
if ! gcc -O2 -fomit-frame-pointer -pthread -o "$TMP/nofp/waitwork" tests/workload/waitwork.c \
	2>> "$TMP/nofp.log"; then
	fail setup "waitwork does not build: $(head -c 300 "$TMP/nofp.log")"
	exit 0
fi
# Without the interpreter the Python checks fail, the others still run.
py_args=()
py_missing=""
if [ -x "$PYTHON" ]; then
	py_args=(--python "$PYTHON" --file tests/kernels/pywork.py)
else
	py_missing="$PYTHON missing on the host (apt-get install python3.11-minimal)"
fi
if ! tests/kernels/mkinitramfs.sh "${py_args[@]}" "$TMP/initramfs.cpio" "$FP" "$AGENT" \
	"$TMP/nofp/nofp" "$TMP/nofp/nofpfp" "$TMP/nofp/syswork" "$TMP/nofp/waitwork" \
	> "$TMP/initramfs.log" 2>&1; then
	fail setup "initramfs: $(tail -n 3 "$TMP/initramfs.log" | tr '\n' ' ')"
	exit 0
fi
echo "initramfs: $(($(stat -c %s "$TMP/initramfs.cpio") / 1024)) KiB" >&2

# console FILE: the marker lines and the output between them, without the
# console's carriage returns and whatever the firmware wrote before a
# marker on the same line.
console() {
	tr -d '\r' < "$1" | sed 's/^.*\(FPK:[A-Z]\)/\1/'
}
# has_line FILE LINE: the console shows LINE.
has_line() {
	console "$1" | grep -qxF "$2"
}
# section FILE NAME CASE: the lines between FPK:NAME-BEGIN and FPK:NAME-END.
section() {
	console "$1" | awk -v b="FPK:$2-BEGIN $3" -v e="FPK:$2-END $3" \
		'$0 == e { on = 0 } on { print } $0 == b { on = 1 }'
}

# verdict LOG: "prog 'NAME': MESSAGE", the verifier's last word in the
# first program load log that libbpf printed (empty when none).
verdict() {
	awk '
	/-- BEGIN PROG LOAD LOG --/ { on = 1; prog = $0; sub(/^libbpf: /, "", prog); sub(/: -- BEGIN.*/, "", prog); next }
	on && /^-- END PROG LOAD LOG --/ { print prog ": " last; exit }
	on && !/^(processed [0-9]+ insns|verification time|stack depth|[[:space:]]*$)/ { last = $0 }' "$1"
}

# unwound FOLDED PROCESS: checks that >= 90% of PROCESS's chain_c samples
# reach main through chain_b and chain_a.  The leaf is the last user frame
# (kernel frames, "_[k]", above it are skipped).  Prints the shares.
unwound() {
	awk -v proc="$2" '
	index($0, proc ";") == 1 {
		n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
		k = split(stack, f, ";")
		while (k > 1 && f[k] ~ /_\[k\]$/) k--
		if (f[k] != "chain_c") next
		leaf += n
		if (k >= 5 && f[k-1] == "chain_b" && f[k-2] == "chain_a" && f[k-3] == "main") ok += n
		else if (bad++ < 3) print "not unwound: " $0 > "/dev/stderr"
	}
	END {
		printf "chain_c samples %d, through main %d (%.1f%%)\n", leaf, ok, leaf ? 100 * ok / leaf : 0
		exit !(leaf > 0 && ok * 10 >= leaf * 9)
	}' "$1"
}

# kernel_whole FOLDED: checks that >= 50% of syswork's samples have kernel
# frames and >= 90% of those have the whole user stack before them.
# Prints the shares, softirq samples (net_rx_action) apart.
kernel_whole() {
	awk '
	index($0, "syswork;") == 1 {
		n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
		m = split(stack, f, ";"); user = f[1]; kernel = 0
		for (i = 2; i <= m; i++) {
			if (f[i] ~ /_\[k\]$/) { kernel = 1; break }
			user = user ";" f[i]
		}
		all += n
		if (!kernel) next
		whole = user ~ /^syswork;_start;start_c;main;pump;through_(pipe|tcp);(transfer;)?sys$/
		kern += n; if (whole) ok += n
		else if (bad++ < 3) print "not whole: " $0 > "/dev/stderr"
		if (index(stack, ";net_rx_action_[k]")) { soft += n; if (whole) sok += n }
	}
	END {
		printf "samples %d, with kernel frames %d, whole %d (%.1f%%); in a softirq %d, whole %d\n", all, kern, ok, kern ? 100 * ok / kern : 0, soft, sok
		exit !(kern > 0 && kern * 2 >= all && ok * 10 >= kern * 9)
	}' "$1"
}

# offcpu_found FOLDED: checks that >= 10% of waitwork's off-CPU time is in
# pipe_read (anon_pipe_read on later kernels) under piper;wait_on_pipe.
offcpu_found() {
	awk '
	index($0, "waitwork;") == 1 {
		n = $NF; all += n
		if (index($0, ";piper;wait_on_pipe;") && index($0, "pipe_read_[k]")) ok += n
	}
	END {
		printf "off-CPU %.3f s, in pipe_read under piper;wait_on_pipe %.3f s (%.1f%%)\n", all / 1e9, ok / 1e9, all ? 100 * ok / all : 0
		exit !(all > 0 && ok * 10 >= all)
	}' "$1"
}

# python_walked FOLDED: checks that >= 90% of python3.11's samples have
# <module>_[py];outer_[py];inner_[py] (pywork.py's loop).  Prints the shares.
python_walked() {
	awk '
	index($0, "python3.11;") == 1 {
		n = $NF; all += n
		if (index($0, ";<module>_[py];outer_[py];inner_[py]")) ok += n
		else if (index($0, "_[py]")) other += n
	}
	END {
		printf "samples %d, outer_[py];inner_[py] %d (%.1f%%), other Python frames %d", all, ok, all ? 100 * ok / all : 0, other
		exit !(all > 0 && ok * 10 >= all * 9)
	}' "$1"
}

summary=()
for ver in $FPK_KERNELS; do
	if ! suite=$(suite_of "$ver"); then
		fail "$ver:fetch" "no Debian suite known for kernel $ver"
		continue
	fi
	kdir=$FPK_CACHE/kernels/$suite
	# One fetch at a time per cache (test runs of other build directories).
	mkdir -p "$FPK_CACHE"
	BUILD=$FPK_CACHE flock "$FPK_CACHE/.lock" bash tests/kernels/fetch.sh "$suite" \
		> "$TMP/fetch-$suite.log" 2>&1
	frc=$?
	if [ $frc -ne 0 ]; then
		why=$(grep '^fetch.sh: ' "$TMP/fetch-$suite.log" | tail -n 1)
		[ -n "$why" ] || why=$(grep -v '^ *$' "$TMP/fetch-$suite.log" | tail -n 2 | tr '\n' ' ')
		fail "$ver:fetch" "${why:-fetch.sh $suite exited $frc without a message}"
		cat "$TMP/fetch-$suite.log" >&2
		continue
	fi
	rel=$(cat "$kdir/release")
	case $rel in
	"$ver".*) pass "$ver:fetch" ;;
	*)
		fail "$ver:fetch" "$suite's kernel is $rel, not $ver"
		continue
		;;
	esac

	for c in $FPK_CASES; do
		T=$ver:$c
		serial=$LOGS/$ver-$c.serial
		: > "$serial" # before the poll below reads it
		t0=$(date +%s%N)
		qemu-system-x86_64 -accel tcg -m 1G -smp 2 -nographic -no-reboot -net none \
			-kernel "$kdir/vmlinuz" -initrd "$TMP/initramfs.cpio" \
			-append "console=ttyS0 quiet panic=-1 fpk.cases=$c fpk.duration=$DURATION fpk.py-duration=$PY_DURATION fpk.py-freq=$PY_FREQ" \
			< /dev/null > "$serial" 2>&1 &
		qpid=$!
		pids_before=("${PIDS[@]}")
		PIDS+=("$qpid")
		# Until it powers off: note when init starts, stop it at the timeout.
		tb="" timed_out=""
		while kill -0 "$qpid" 2> /dev/null; do
			now=$(date +%s%N)
			if [ -z "$tb" ] && grep -aq 'FPK:BOOTED' "$serial"; then
				tb=$now
			fi
			if [ $((now - t0)) -ge $((BOOT_TIMEOUT * 1000000000)) ]; then
				timed_out=1
				kill -9 "$qpid"
				break
			fi
			sleep 0.1
		done
		wait "$qpid" 2> /dev/null
		qrc=$?
		PIDS=("${pids_before[@]}") # reaped: its pid may be reused
		wall=$((($(date +%s%N) - t0) / 1000000))
		booted=$(console "$serial" | sed -n 's/^FPK:BOOTED \([0-9.]*\).*/\1/p' | head -n 1)
		to_init="?"
		[ -n "$tb" ] && to_init=$(awk -v ms=$(((tb - t0) / 1000000)) 'BEGIN { printf "%.1f", ms / 1000 }')
		summary+=("$rel $c: boot $to_init s from qemu's start to init (kernel ${booted:-?} s of it), VM $(awk -v ms=$wall 'BEGIN { printf "%.1f", ms / 1000 }') s in all")

		if ! has_line "$serial" FPK:DONE; then
			if [ -n "$timed_out" ]; then
				fail "$T:boots" "no end of script within ${BOOT_TIMEOUT} s, $serial"
			else
				fail "$T:boots" "qemu exited $qrc before the end of the script, $serial"
			fi
			echo "---- last console lines of $rel $c ----" >&2
			tr -d '\r' < "$serial" | grep -vE '^(nofp|nofpfp|python3\.11);' | tail -n 30 >&2
			continue
		fi
		pass "$T:boots"

		if [ "$c" = nobtf ]; then
			check "$T:btf-hidden" has_line "$serial" "FPK:BTF $c absent"
		else
			check "$T:btf-visible" has_line "$serial" "FPK:BTF $c present"
		fi

		section "$serial" LOG "$c" > "$TMP/$T.log"
		section "$serial" FOLDED "$c" > "$TMP/$T.folded"
		rc=$(console "$serial" | sed -n "s/^FPK:RC $c \([0-9]*\)$/\1/p")
		# libbpf reports a failed load (and the verifier's log) at warning
		# level, the sampler says which step failed; without either, the
		# summary line shows that the program ran.
		load_err='BEGIN PROG LOAD LOG|failed to load|cannot (open|load) the BPF|cannot install the stack walker'
		if grep -qE "$load_err" "$TMP/$T.log" || ! grep -qE '^[0-9]+ samples \(' "$TMP/$T.log"; then
			why=$(verdict "$TMP/$T.log")
			[ -n "$why" ] || why=$(grep -E "$load_err|fleetprof record:" "$TMP/$T.log" | tail -n 1)
			fail "$T:loads" "record exit ${rc:-?}: ${why:-no summary line}"
			echo "---- fleetprof record on $rel ($c), last 60 lines ----" >&2
			tail -n 60 "$TMP/$T.log" >&2
			echo "---- dmesg ----" >&2
			section "$serial" DMESG "$c" >&2
			echo "----" >&2
		else
			pass "$T:loads"
		fi

		n=$(folded_total "$TMP/$T.folded")
		nofp=$(grep '^nofp;' "$TMP/$T.folded" | folded_total)
		summary+=("$rel $c: $n samples, $nofp of nofp; $(grep -E '^[0-9]+ samples \(' "$TMP/$T.log" | sed 's/ -> .*//')")
		while read -r w; do
			summary+=("$rel $c: warning: $w")
		done < <(grep -E '^(fleetprof record|libbpf):' "$TMP/$T.log" | grep -v ': sampling ' | head -n 5)
		check "$T:samples" test "$n" -gt 0 -a "$nofp" -gt 0

		if shares=$(unwound "$TMP/$T.folded" nofp 2> "$TMP/$T.unwound"); then
			pass "$T:unwinds"
		else
			fail "$T:unwinds" "$shares"
			cat "$TMP/$T.unwound" >&2
		fi
		summary+=("$rel $c: nofp: $shares")

		# The control: with frame pointers the kernel's own walk gets there.
		section "$serial" FOLDED "$c-fp" > "$TMP/$T-fp.folded"
		if shares=$(unwound "$TMP/$T-fp.folded" nofpfp 2> "$TMP/$T-fp.unwound"); then
			pass "$T:fp-unwinds"
		else
			fail "$T:fp-unwinds" "$shares"
			cat "$TMP/$T-fp.unwound" >&2
			section "$serial" LOG "$c-fp" | tail -n 20 >&2
		fi
		summary+=("$rel $c: nofpfp (frame pointers): $shares")

		# Kernel-mode samples: the user registers found, the walk from them.
		section "$serial" FOLDED "$c-sys" > "$TMP/$T-sys.folded"
		if shares=$(kernel_whole "$TMP/$T-sys.folded" 2> "$TMP/$T-sys.bad"); then
			pass "$T:kernel-stacks"
		else
			fail "$T:kernel-stacks" "$shares"
			cat "$TMP/$T-sys.bad" >&2
			section "$serial" LOG "$c-sys" | tail -n 20 >&2
		fi
		summary+=("$rel $c: syswork (kernel mode): $shares")

		# Off-CPU: the tracepoint program loads, a known wait shows.
		section "$serial" OFFCPU "$c-off" > "$TMP/$T-off.folded"
		if shares=$(offcpu_found "$TMP/$T-off.folded"); then
			pass "$T:offcpu"
		else
			why=$(section "$serial" LOG "$c-off" | grep -E "$load_err|off-CPU hook" | tail -n 1)
			fail "$T:offcpu" "$shares${why:+; $why}"
			section "$serial" LOG "$c-off" | tail -n 30 >&2
		fi
		summary+=("$rel $c: waitwork off-CPU: $shares")

		# fleetprof-agent as deployed: its default unwind table memory
		# (a large mmapable array; charged to RLIMIT_MEMLOCK before 5.11).
		section "$serial" AGENT "$c" > "$TMP/$T.agent"
		arc=$(console "$serial" | sed -n "s/^FPK:AGENT-RC $c \([0-9]*\)$/\1/p")
		asamples=$(sed -n 's/^fleetprof-agent: sampled \([0-9]*\) samples.*/\1/p' "$TMP/$T.agent")
		if grep -qE "$load_err" "$TMP/$T.agent" || [ "${asamples:-0}" -eq 0 ]; then
			why=$(verdict "$TMP/$T.agent")
			[ -n "$why" ] || why=$(grep -E "$load_err|fleetprof-agent:" "$TMP/$T.agent" | tail -n 1)
			fail "$T:agent-loads" "agent exit ${arc:-?}: ${why:-no output}"
			echo "---- fleetprof-agent on $rel ($c), last 60 lines ----" >&2
			tail -n 60 "$TMP/$T.agent" >&2
			echo "----" >&2
		else
			pass "$T:agent-loads"
		fi
		summary+=("$rel $c: agent: $(grep -E '^fleetprof-agent: sampled ' "$TMP/$T.agent" | sed 's/^fleetprof-agent: //'); $(grep -oE 'maps [0-9]+ bytes' "$TMP/$T.agent")")

		# CPython: Python functions in place of the eval loop's frames.
		if [ -n "$py_missing" ]; then
			fail "$T:python-frames" "$py_missing"
			continue
		fi
		section "$serial" LOG "$c-py" > "$TMP/$T-py.log"
		section "$serial" FOLDED "$c-py" > "$TMP/$T-py.folded"
		if shares=$(python_walked "$TMP/$T-py.folded"); then
			pass "$T:python-frames"
		else
			why=$(verdict "$TMP/$T-py.log")
			[ -n "$why" ] || why=$(grep -E "$load_err" "$TMP/$T-py.log" | tail -n 1)
			[ -n "$why" ] || why=$(grep -E '^fleetprof record:' "$TMP/$T-py.log" | grep -vE ': (sampling|python:) ' | tail -n 1)
			fail "$T:python-frames" "$shares${why:+; $why}"
			echo "---- fleetprof record on python3.11 on $rel ($c): exit $(console "$serial" | sed -n "s/^FPK:RC $c-py \([0-9]*\)$/\1/p"), last 60 lines ----" >&2
			tail -n 60 "$TMP/$T-py.log" >&2
			echo "---- python3.11's own output ----" >&2
			console "$serial" | grep "^FPK:NOT-READY $c-py " >&2
			section "$serial" PROG "$c-py" >&2
			echo "---- its 8 most frequent stacks (of $(wc -l < "$TMP/$T-py.folded")), their ends ----" >&2
			awk '{ print $NF "\t" $0 }' "$TMP/$T-py.folded" | sort -nr | head -n 8 | cut -f2- |
				awk '{ if (length($0) > 500) $0 = "..." substr($0, length($0) - 499); print }' >&2
			echo "---- dmesg ----" >&2
			section "$serial" DMESG "$c-py" >&2
			echo "----" >&2
		fi
		summary+=("$rel $c: python3.11 ($(console "$serial" | sed -n "s/^FPK:TIME $c-py \([0-9.]*\)$/\1/p") s from its start to record's end): $shares; $(grep -E '^fleetprof record: python: ' "$TMP/$T-py.log" | sed 's/^fleetprof record: //' | cut -c1-200)")
	done
done

{
	echo "---- kernel matrix ----"
	printf '%s\n' "${summary[@]}"
	echo "total $((SECONDS - t_start)) s"
} | tee "$LOGS/summary.txt"
