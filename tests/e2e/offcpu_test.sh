#!/bin/bash
# offcpu_test.sh: off-CPU profiles.  tests/workload/waitwork.c (a thread
# waiting on a pipe 70% of its time, one sleeping 30%, one waiting in
# poll, one burning the CPU at nice 19) is profiled by `fleetprof record
# --off-cpu` and by offcputime (Debian's libbpf-tools) at the same time:
# per thread and per kernel function (the pipe, the sleep, the poll)
# within 5 points of the oracle's shares, the total within 10%, and the
# user stacks whole (offcputime walks by frame pointer: the workload has
# none); a Python daemon's waits in select() under its Python functions.
# Then the fleet path: the agent with --off-cpu against the
# symbolizer (no --local-files) writes HOST/offcpu/*.folded; and a process
# that sleeps 25 s under 10 s intervals shows its whole 25 s, in the
# interval in which it wakes.
TEST=offcpu
. tests/e2e/lib.sh

need_root
OFFCPUTIME=/usr/sbin/offcputime
[ -x "$OFFCPUTIME" ] || { fail oracle "offcputime (libbpf-tools) not installed"; exit 0; }
gcc -O2 -fomit-frame-pointer -pthread tests/workload/waitwork.c -o "$TMP/waitwork" ||
	{ fail build; exit 0; }

# 1. record --off-cpu against offcputime, 8 s on the same process.
"$TMP/waitwork" 11 &
work=$!
PIDS+=($work)
sleep 0.5
"$OFFCPUTIME" -p "$work" 8 > "$TMP/offcputime.txt" 2> "$TMP/offcputime.err" &
oracle=$!
"$FP" record --off-cpu --by-thread -d 8 -p "$work" -o "$TMP/rec" --cache "$TMP/cache" \
	> "$TMP/record.out" 2> "$TMP/record.log"
check record-exits-0 test $? -eq 0
wait "$oracle"
check oracle-ran test -s "$TMP/offcputime.txt"
cat "$TMP/record.out"
for f in offcpu.folded offcpu.pb.gz offcpu.otlp.pb offcpu.svg profile.folded; do
	check "writes-$f" test -s "$TMP/rec/$f"
done
check matches-offcputime python3 tests/e2e/offcpu_compare.py "$TMP/rec/offcpu.folded" \
	"$TMP/offcputime.txt" "pipe_read|anon_pipe_read" do_nanosleep do_sys_poll \
	"pipe_read|anon_pipe_read=wait_on_pipe" do_nanosleep=take_a_nap do_sys_poll=tick_wait
# Every wait counted: those whose stacks were taken and those left are
# the waits whose leaving was noted; nothing lost.
check counters-add-up python3 - "$TMP/record.out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"off-CPU: (\d+) waits off-CPU measured, ([\d.]+) s in all; stacks of (\d+) "
              r"taken, (\d+) left by design.*?; ([\d.]+) s as the stacks weigh it", t)
w, total, taken, left, weighed = int(m[1]), float(m[2]), int(m[3]), int(m[4]), float(m[5])
lost = int(re.search(r"\((\d+) lost", t)[1])
print(f"waits {w}, taken {taken} + left {left} = {taken + left}, {total} s measured, "
      f"{weighed} s weighed, lost {lost}", file=sys.stderr)
# a wait is counted when the thread is back, its stacks when it left, and
# the counters are read one after the other while the threads go on
sys.exit(0 if lost == 0 and abs(taken + left - w) <= max(8, w // 100) and taken > 0
         and abs(weighed - total) <= 0.1 * total else 1)
PY
check pprof-type python3 - "$TMP/rec/offcpu.pb.gz" <<'PY'
import gzip, sys
b = gzip.open(sys.argv[1]).read()
sys.exit(0 if b"off_cpu" in b and b"waits" in b and b"nanoseconds" in b else 1)
PY
check svg-says-ms grep -q 'ms off-CPU' "$TMP/rec/offcpu.svg"
wait "$work"

# Python: a daemon's wait in select() under its Python functions.
cat > "$TMP/pyselect.py" <<'PY'
import select, time
def wait_for_input():
    select.select([], [], [], 0.02)
def serve():
    end = time.time() + 6
    while time.time() < end:
        wait_for_input()
serve()
PY
/usr/bin/python3.11 "$TMP/pyselect.py" &
py=$!
PIDS+=($py)
sleep 0.5
"$FP" record --off-cpu -d 3 -p "$py" -o "$TMP/pyrec" --cache "$TMP/cache" > /dev/null 2>&1
check python-record-exits-0 test $? -eq 0
# at least 90% of the time in select under serve -> wait_for_input
check python-waits python3 - "$TMP/pyrec/offcpu.folded" <<'PY'
import sys
total = under = 0
for line in open(sys.argv[1]):
    stack, ns = line.rsplit(" ", 1)
    total += int(ns)
    if ";serve_[py];wait_for_input_[py];" in stack and "do_select_[k]" in stack:
        under += int(ns)
print(f"in select under wait_for_input: {under / 1e9:.3f} of {total / 1e9:.3f} s", file=sys.stderr)
sys.exit(0 if total and under >= 0.9 * total else 1)
PY
wait "$py"

# 2. The fleet path: agent --off-cpu, symbolizer without --local-files.
port=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --listen "$addr" --cache "$TMP/scache" --out "$TMP/out" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
# sleeper: one 25 s nanosleep that starts once the agent is attached, as
# its thread's first wait (always taken, docs/offcpu.md: a later wait in
# the same second may go without a stack on a busy CPU, its time counted
# with the thread's others): the shell stops itself before the agent
# starts and, continued, execs sleep without waiting on anything first.
sh -c 'kill -STOP $$; exec sleep 25' &
sleeper=$!
PIDS+=($sleeper)
wait_for 10 grep -q '^State:.*stopped' "/proc/$sleeper/status"
"$TMP/waitwork" 40 &
work=$!
PIDS+=($work)
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 10 --off-cpu \
	-p "$work" -p "$sleeper" > "$TMP/agent.log" 2>&1 &
agent=$!
PIDS+=($agent)
wait_for 10 grep -q 'sampling at' "$TMP/agent.log"
kill -CONT "$sleeper"
wait_for 40 bash -c "! kill -0 $sleeper 2> /dev/null"
sleep 11 # the interval in which it woke is sent
kill -INT "$agent"
wait "$agent"
check agent-exits-0 test $? -eq 0
grep 'off-CPU:' "$TMP/agent.log"
kill -TERM "$symb"
wait "$symb"
check fleet-offcpu-files bash -c "ls '$TMP'/out/*/offcpu/*.folded > /dev/null"
check fleet-cpu-files-apart bash -c "! grep -l 'waits off' '$TMP'/out/*/*.folded 2> /dev/null |
	grep -q ."
cat "$TMP"/out/*/offcpu/*.folded > "$TMP/fleet-off.folded" 2> /dev/null
check fleet-whole-pipe-wait grep -qE '^waitwork;.*;piper;wait_on_pipe;.* [0-9]+$|^waitwork;.*piper.*wait_on_pipe' \
	"$TMP/fleet-off.folded"
# The 25 s wait: all of it, in one interval's file.
check long-wait-whole python3 - "$TMP"/out/*/offcpu/*.folded <<'PY'
import sys
best = 0
for path in sys.argv[1:]:
    n = sum(int(l.rsplit(" ", 1)[1]) for l in open(path) if l.startswith("sleep;"))
    best = max(best, n)
print(f"the sleep's wait in one interval: {best / 1e9:.2f} s", file=sys.stderr)
sys.exit(0 if 24.5e9 <= best <= 26e9 else 1)
PY
