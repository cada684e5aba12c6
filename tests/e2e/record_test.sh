#!/bin/bash
# record_test.sh: `fleetprof record` on the known workload, with the real
# BPF program, side by side with perf record -g.
TEST=record
. tests/e2e/lib.sh
need_root

"$WORKLOAD" 60 & wl=$!
PIDS+=($wl)
sleep 0.5

# perf and fleetprof sample the same process over the same 10 s.
perf record -q -g -F 99 -p "$wl" -o "$TMP/perf.data" -- sleep 10 > "$TMP/perf.log" 2>&1 &
perfpid=$!
"$FP" record -d 10 -p "$wl" --by-thread -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check exit-status test $? -eq 0
wait $perfpid
F=$TMP/out/profile.folded

check writes-all-files test -s "$F" -a -s "$TMP/out/profile.pb.gz" -a -s "$TMP/out/flame.svg"
check cxx-method-chain grep -qE '^workload;fp-compute;(.*;)?compute_loop;fp::Cruncher::crunch\(int\)(;[^; ]*_\[i\])* [0-9]+$' "$F"
check shared-lib-chain grep -qE '^workload;fp-compute;(.*;)?compute_loop;fpwork_mix [0-9]+$' "$F"
check kernel-frames grep -qE '^workload;fp-writer;(.*;)?writer_loop;(.*;)?ksys_write_\[k\];' "$F"
check thread-names test "$(cut -d';' -f2 "$F" | sort -u | grep -c '^fp-')" -ge 2
check inline-frames grep -qE 'fp::Cruncher::crunch\(int\);fp::step\(double\)_\[i\] [0-9]+$' "$F"
check no-unresolved-workload-frames bash -c "! grep -qE '(workload|libfpwork\.so)\+0x' '$F'"

perf script -i "$TMP/perf.data" -F comm,tid,ip,sym,dso > "$TMP/perf.script" 2>/dev/null
if python3 tests/e2e/leaf_shares.py "$F" "$TMP/perf.script" > "$TMP/shares.txt"; then
	pass shares-agree-with-perf
else
	fail shares-agree-with-perf
fi
cat "$TMP/shares.txt" >&2

# An independent pprof reader: go tool pprof.
if command -v go > /dev/null; then
	PPROF_BINARY_PATH=/nonexistent go tool pprof -raw "$TMP/out/profile.pb.gz" > "$TMP/pprof.raw" 2>&1
	check pprof-readable grep -q 'fp::Cruncher::crunch' "$TMP/pprof.raw"
	check pprof-labels grep -q 'thread_name:\[fp-writer\]' "$TMP/pprof.raw"
	check pprof-lines-and-inlines grep -A1 'fp::step(double) .*workload.cc:[0-9]' "$TMP/pprof.raw" \
		| grep -q 'fp::Cruncher::crunch(int) .*workload.cc:[0-9]'

	PPROF_BINARY_PATH=/nonexistent go tool pprof -top -sample_index=samples "$TMP/out/profile.pb.gz" > "$TMP/pprof.top" 2>&1
	check pprof-top grep -q 'fpwork_mix' "$TMP/pprof.top"
else
	fail pprof-readable "go not installed"
fi

check svg-well-formed python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/out/flame.svg"
check svg-has-frames grep -q 'fpwork_mix' "$TMP/out/flame.svg"

# Without --by-thread the second element is a frame, not a thread name.
"$FP" record -d 2 -p "$wl" -o "$TMP/out2" --cache "$TMP/cache" > /dev/null 2>&1
check process-only-root bash -c "! grep -q '^workload;fp-' '$TMP/out2/profile.folded' && grep -q '^workload;' '$TMP/out2/profile.folded'"

# record -- CMD: from the command's first instruction to its exit, its
# children too, its exit status passed on, signals forwarded.
cat > "$TMP/early_late.py" <<'PY'
import time
def early():
    t = time.process_time() + 0.6
    while time.process_time() < t:
        pass
def late():
    t = time.process_time() + 1.0
    while time.process_time() < t:
        pass
early(); late()
PY
"$FP" record -v -o "$TMP/cmd" --cache "$TMP/cache" -- python3 "$TMP/early_late.py" > "$TMP/cmd.log" 2>&1
check cmd-exit-0 test $? -eq 0
# early() runs the command's first 0.6 s of CPU: its samples are there,
# about 60 at 99 Hz, against about 99 for late()'s second.
# On failure the counts, the samples without Python frames and the
# walks' counts say why.
if why=$(python3 - "$TMP/cmd/profile.folded" <<'PY'
import sys
n = {"early": 0, "late": 0, "no Python frame": 0}
for line in open(sys.argv[1]):
    stack, count = line.rsplit(" ", 1)
    frames = stack.split(";")
    for k in ("early", "late"):
        if k + "_[py]" in frames:
            n[k] += int(count)
    if not any(f.endswith("_[py]") for f in frames):
        n["no Python frame"] += int(count)
print(n)
sys.exit(0 if 40 <= n["early"] <= 80 and 75 <= n["late"] <= 125 else 1)
PY
); then
	pass cmd-first-second
else
	fail cmd-first-second "$why; $(grep -E 'python:|stack walks:|samples \(' "$TMP/cmd.log" | tr '\n' ' ')"
fi
"$FP" record -o "$TMP/cmd3" --cache "$TMP/cache" -- sh -c 'exit 3' > /dev/null 2>&1
check cmd-exit-status test $? -eq 3
# a child of the command (sh runs python3 as its own child, then exits 5)
"$FP" record -o "$TMP/cmd5" --cache "$TMP/cache" -- sh -c "python3 '$TMP/early_late.py'; exit 5" > /dev/null 2>&1
check cmd-child-status test $? -eq 5
if grep -qE '^python3;.*late_\[py\] [0-9]+$' "$TMP/cmd5/profile.folded"; then
	pass cmd-child-sampled
else # which process the samples went to, and how many had Python frames
	fail cmd-child-sampled "$(awk '{ split($1, f, ";"); n[f[1] (/_\[py\]/ ? " python" : "")] += $NF }
		END { for (k in n) printf "%s %d, ", k, n[k] }' "$TMP/cmd5/profile.folded")"
fi
# A native walk cut short (here a function with no CFI and no frame
# pointer, called through ctypes) still has the thread's Python frames
# after its last frame: Python callers, then the native leaf.
cat > "$TMP/nocfi.S" <<'ASM'
	.text
	.globl spin_no_cfi
	.type spin_no_cfi, @function
spin_no_cfi: /* spin_no_cfi(n): n rounds with rbp zero, no .eh_frame */
	push %rbp
	xor %ebp, %ebp
1:	dec %rdi
	jnz 1b
	pop %rbp
	ret
	.size spin_no_cfi, .-spin_no_cfi
	.section .note.GNU-stack,"",@progbits
ASM
cat > "$TMP/nocfi.py" <<PY
import ctypes, time
lib = ctypes.CDLL("$TMP/libnocfi.so")
lib.spin_no_cfi.argtypes = [ctypes.c_uint64]
def calls_native():
    t = time.process_time() + 1.5
    while time.process_time() < t:
        lib.spin_no_cfi(50000000)
t = time.process_time() + 0.5  # while the interpreter's tables compile
while time.process_time() < t:
    pass
calls_native()
PY
gcc -shared -Wl,--build-id -o "$TMP/libnocfi.so" "$TMP/nocfi.S"
"$FP" record -o "$TMP/nocfi" --cache "$TMP/cache" -- python3 "$TMP/nocfi.py" > "$TMP/nocfi.log" 2>&1
# (CPU time: the workload above still runs)
cut=$(grep -E ';spin_no_cfi [0-9]+$' "$TMP/nocfi/profile.folded" | awk '{ n += $NF } END { print n + 0 }')
py=$(grep -E '^python3;[^ ]*<module>_\[py\];calls_native_\[py\];spin_no_cfi [0-9]+$' \
	"$TMP/nocfi/profile.folded" | awk '{ n += $NF } END { print n + 0 }')
# about 150 samples in spin_no_cfi; all but a few with their Python callers
echo "cut walks: $py of $cut with Python frames"
check cut-walk-python-frames python3 -c "import sys; sys.exit(not ($cut >= 100 and $py >= 0.9 * $cut))"
"$FP" record -o "$TMP/cmd127" --cache "$TMP/cache" -- /nonexistent/prog > "$TMP/cmd127.log" 2>&1
check cmd-not-found test $? -eq 127
check cmd-not-found-says grep -q 'cannot run /nonexistent/prog: No such file' "$TMP/cmd127.log"
"$FP" record -p "$wl" -o "$TMP/cmdp" -- true > /dev/null 2>&1
check cmd-and-pid-refused test $? -eq 2
# SIGTERM to fleetprof goes to the command; the profile is still written
"$FP" record -o "$TMP/cmdterm" --cache "$TMP/cache" -- sleep 60 > /dev/null 2>&1 &
rec=$!
sleep 3
kill -TERM $rec
wait $rec
check cmd-signal-forwarded test $? -eq 143
check cmd-signal-profile-written test -s "$TMP/cmdterm/profile.pb.gz"
