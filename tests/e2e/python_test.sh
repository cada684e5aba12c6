#!/bin/bash
# python_test.sh: Python frames of real CPython interpreters, against
# py-spy sampling the same process over the same seconds.
#
# Every interpreter tests/python/fetch.sh provides (Debian's 3.9, 3.11 and
# 3.13, and pyenv's builds when the machine has them: 3.12 comes only from
# there) runs tests/workload/pywork.py: classes, nested calls, a generator,
# json (a C extension) and two threads.  `fleetprof record -p` and
# `py-spy record` sample it at once; compare_python.py checks coverage,
# inclusive shares and the hottest lines.  py-spy runs in its default mode,
# which stops the process for each read: with --nonblocking it reads frames
# while they change, and its shares of short-lived frames (a generator's)
# drift by up to 10 points from run to run.  Then the cases that
# must never give wrong names: an interpreter version the agent does not
# know (counted and logged), code objects freed and their memory reused,
# and processes that exit while they are sampled.
TEST=python
. "$(dirname "$0")/lib.sh"
need_root

SPY=$(command -v py-spy || echo /usr/local/bin/py-spy)
GO=/usr/local/go/bin/go
[ -x "$GO" ] || GO=$(command -v go)
# 20 s at 499 Hz: about 4,500 samples a thread and tool, so that two
# samplers' shares of one function differ by chance by 1 point (one
# standard deviation), well inside the 5 points allowed.
SECONDS_EACH=${PY_SECONDS:-20}
if [ ! -x "$SPY" ] || [ -z "$GO" ]; then
	fail tools "py-spy and go are needed (tools/install-deps.sh)"
	exit 0
fi
if ! bash tests/python/fetch.sh > "$TMP/fetch.out" 2>&1; then
	fail fetch "$(tail -n 3 "$TMP/fetch.out")"
	exit 0
fi
LIST=${FPY_CACHE:-/var/cache/fleetprof-python}/pythons.txt

# start ROOT INTERPRETER SCRIPT ARGS...: run a Python script (copied into
# ROOT) in the background; $! is the interpreter.
start() {
	local root=$1 interp=$2 script=$3
	shift 3
	if [ "$root" = / ]; then
		"$interp" "$script" "$@" &
	else
		mkdir -p "$root/tmp/fp"
		cp "$script" "$root/tmp/fp/"
		chroot "$root" "$interp" "/tmp/fp/$(basename "$script")" "$@" &
	fi
}

# cpu_ns PID: "tid ns" per thread, the CPU time the kernel accounted it.
cpu_ns() {
	local t
	for t in /proc/"$1"/task/*; do
		[ -r "$t/schedstat" ] || continue
		echo "${t##*/} $(cut -d' ' -f1 "$t/schedstat" 2> /dev/null || echo 0)"
	done
}

versions=0
while read -r ver src root interp _; do
	name="$ver-$src"
	start "$root" "$interp" tests/workload/pywork.py $((SECONDS_EACH + 60))
	pid=$!
	PIDS+=("$pid")
	sleep 1
	# The threads' CPU time over the seconds record samples, from its
	# "sampling" line to its "sampling stopped" line: not from its
	# start-up to the end of its symbolization, which on a busy host
	# outlasted the workload (no CPU time at all: a gap of 100 points).
	"$FP" record -p "$pid" -d "$SECONDS_EACH" -F 499 -o "$TMP/$name" > "$TMP/$name.rec" 2>&1 &
	rec=$!
	wait_for 60 grep -q 'sampling one process' "$TMP/$name.rec"
	cpu_ns "$pid" | sort > "$TMP/$name.cpu0"
	"$SPY" record -p "$pid" -d "$SECONDS_EACH" -r 499 -f raw \
		-o "$TMP/$name.spy" > "$TMP/$name.spylog" 2>&1 &
	spy=$!
	wait_for $((SECONDS_EACH + 60)) grep -q 'sampling stopped' "$TMP/$name.rec"
	cpu_ns "$pid" | sort > "$TMP/$name.cpu1"
	wait "$spy"
	wait "$rec"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if [ ! -s "$TMP/$name/profile.pb.gz" ] || [ ! -s "$TMP/$name.spy" ]; then
		fail "$name" "no profile: $(tail -n 2 "$TMP/$name.rec" "$TMP/$name.spylog" | tr '\n' ' ')"
		continue
	fi
	PPROF_BINARY_PATH=/nonexistent "$GO" tool pprof -raw "$TMP/$name/profile.pb.gz" \
		> "$TMP/$name.raw" 2>&1
	# %.0f: mawk's %d stops at 2^31 - 1, 2.1 s of CPU time, so that every
	# thread past it had the same share (50/50 for two, whatever the
	# truth: the check then failed when a busy host moved the split).
	join "$TMP/$name.cpu0" "$TMP/$name.cpu1" | awk '{ printf "%d %.0f\n", $1, $3 - $2 }' > "$TMP/$name.cpu"
	python3 tests/e2e/compare_python.py --name "$name" --cpu "$TMP/$name.cpu" \
		"$TMP/$name.raw" "$TMP/$name.spy"
	# The folded output names them qualname_[py]: the method of a class
	# on 3.11 and later, the bare name before (3.9 has no co_qualname).
	case $ver in
	3.9) want='step_\[py\]' ;;
	*) want='Model\.step_\[py\]' ;;
	esac
	check "$name:folded" grep -q "$want" "$TMP/$name/profile.folded"
	versions=$((versions + 1))
done < "$LIST"
check versions [ "$versions" -ge 3 ]

# Code objects freed and their memory reused: never another's name.
/usr/bin/python3.11 tests/workload/pyreuse.py 10 &
pid=$!
PIDS+=("$pid")
sleep 0.5
"$FP" record -p "$pid" -d 6 -F 499 -o "$TMP/reuse" > "$TMP/reuse.log" 2>&1
wait "$pid"
PPROF_BINARY_PATH=/nonexistent "$GO" tool pprof -raw "$TMP/reuse/profile.pb.gz" > "$TMP/reuse.raw" 2>&1
python3 tests/e2e/compare_python.py --generated --name reuse "$TMP/reuse.raw"
check reuse-logged grep -q 'code objects read [0-9]* ([0-9]* reused since sampled' "$TMP/reuse.log"

# Names that are not ASCII (str objects of 1, 2 and 4 bytes a character)
# come out as UTF-8.
cat > "$TMP/names.py" <<'EOF2'
import time
class Größe:
    def mäßig(self):
        return sum(i for i in range(20000))
def 函数():
    return Größe().mäßig()
def g𠀀():
    return 函数()
end = time.monotonic() + 6
while time.monotonic() < end:
    g𠀀()
EOF2
/usr/bin/python3.11 "$TMP/names.py" &
pid=$!
PIDS+=("$pid")
sleep 0.5
"$FP" record -p "$pid" -d 3 -F 199 -o "$TMP/names" > "$TMP/names.log" 2>&1
wait "$pid"
check utf8-names grep -q 'g𠀀_\[py\];函数_\[py\];Größe\.mäßig_\[py\]' "$TMP/names/profile.folded"

# An interpreter version without offsets: logged, counted, and its frames
# stay the interpreter's own (no Python names at all).
old=$(ls -d /root/.pyenv/versions/3.10.*/bin/python3.10 /root/.pyenv/versions/3.8.*/bin/python3.8 \
	2> /dev/null | head -n 1)
if [ -z "$old" ]; then
	fail unknown-version "no Python 3.10 or 3.8 on this machine (pyenv)"
else
	"$old" tests/workload/pydeep.py 8 &
	pid=$!
	PIDS+=("$pid")
	sleep 0.5
	"$FP" record -p "$pid" -d 3 -F 199 -o "$TMP/old" > "$TMP/old.log" 2>&1
	kill "$pid" 2> /dev/null
	check unknown-version:logged grep -q 'Python 3\.[0-9]* is not supported' "$TMP/old.log"
	check unknown-version:counted grep -q 'python: [0-9]* processes walked, 1 of unknown versions' \
		"$TMP/old.log"
	check unknown-version:no-names bash -c "! grep -q '_\[py\]' '$TMP/old/profile.folded'"
	check unknown-version:native grep -q '_PyEval_EvalFrameDefault' "$TMP/old/profile.folded"
fi

# Processes that exit while their samples are still being read (about a
# second each): each names its thread sl-N and runs work_N; a stack of
# thread sl-N may only name work_N, or [unknown] when the process was gone
# before its code object could be read.
cat > "$TMP/short.py" <<'EOF2'
import ctypes, sys
n = sys.argv[1]
ctypes.CDLL(None).prctl(15, ("sl-" + n).encode(), 0, 0, 0)
exec("def work_%s():\n    x = 0\n    for i in range(10000000):\n        x += i\n    return x\n"
     "work_%s()\n" % (n, n))
EOF2
"$FP" record -d 8 -F 499 --by-thread -o "$TMP/short" > "$TMP/short.log" 2>&1 &
rec=$!
sleep 1
end=$((SECONDS + 6))
n=0
while [ $SECONDS -lt $end ]; do
	n=$((n + 1))
	/usr/bin/python3.11 "$TMP/short.py" "$n"
done
wait "$rec"
check short-lived:record-exit test $? -eq 0
python3 - "$TMP/short/profile.folded" <<'EOF2'
import re, sys
good = bad = unknown = 0
for line in open(sys.argv[1]):
    stack, _, count = line.rstrip('\n').rpartition(' ')
    parts = stack.split(';')
    m = re.match(r'^sl-(\d+)$', parts[1]) if len(parts) > 1 else None
    if not m:
        continue
    for f in parts[2:]:
        w = re.match(r'^work_(\d+)_\[py\]$', f)
        if w:
            if w.group(1) == m.group(1):
                good += int(count)
            else:
                bad += int(count)
        elif f == '[unknown]_[py]':
            unknown += int(count)
ok = good >= 50 and bad == 0
print('%s: python:short-lived (%d samples named right, %d wrong, %d [unknown])'
      % ('PASS' if ok else 'FAIL', good, bad, unknown))
EOF2
exit 0
