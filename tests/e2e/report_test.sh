#!/bin/bash
# report_test.sh: `fleetprof report` against `go tool pprof -top` on the
# same files: fleetprof's own pprof and folded outputs of a recording of
# the known workload, and a pprof file written by go tool pprof itself.
TEST=report
. tests/e2e/lib.sh
need_root

"$WORKLOAD" 30 & wl=$!
PIDS+=($wl)
sleep 0.5
"$FP" record -d 4 -p "$wl" -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check record test -s "$TMP/out/profile.pb.gz" -a -s "$TMP/out/profile.folded"
PB=$TMP/out/profile.pb.gz
F=$TMP/out/profile.folded

# same_top OURS PPROF: the functions of both tables, in the same order,
# with the same self (flat) and total (cum) shares to the printed
# hundredth; at least 5 rows compared.
same_top() {
	python3 - "$1" "$2" <<'PY'
import re, sys
def rows(path, ours):
    out = []
    for line in open(path):
        m = re.match(r'\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(.+?)( \(inline\))?$', line)
        if m:
            out.append((m.group(6), float(m.group(2)), float(m.group(5))))
    return out
ours, ref = rows(sys.argv[1], True), rows(sys.argv[2], False)
n = min(len(ours), len(ref))
ok = n >= 5
for (a, s1, t1), (b, s2, t2) in zip(ours[:n], ref[:n]):
    if a != b or abs(s1 - s2) > 0.011 or abs(t1 - t2) > 0.011:
        print(f"differs: ours {a} {s1} {t1}, pprof {b} {s2} {t2}", file=sys.stderr)
        ok = False
print(f"{n} rows compared; top: {ours[0] if ours else None}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

if command -v go > /dev/null; then
	export PPROF_BINARY_PATH=/nonexistent
	go tool pprof -top -nodecount=12 "$PB" > "$TMP/pprof.top" 2>&1
	"$FP" report -n 12 "$PB" > "$TMP/ours.top" 2>&1
	check top-matches-pprof same_top "$TMP/ours.top" "$TMP/pprof.top"
	go tool pprof -top -cum -nodecount=12 "$PB" > "$TMP/pprof.cum" 2>&1
	"$FP" report -s total -n 12 "$PB" > "$TMP/ours.cum" 2>&1
	check cum-matches-pprof same_top "$TMP/ours.cum" "$TMP/pprof.cum"
	# a pprof file that go tool pprof wrote, not fleetprof
	go tool pprof -proto "$PB" > "$TMP/go.pb.gz" 2> /dev/null
	"$FP" report -n 12 "$TMP/go.pb.gz" > "$TMP/go.top" 2>&1
	check go-made-pprof same_top "$TMP/go.top" "$TMP/pprof.top"
	go tool pprof -top -nodecount=12 -sample_index=samples "$PB" > "$TMP/pprof.samples" 2>&1
	"$FP" report -n 12 --sample-type samples "$PB" > "$TMP/ours.samples" 2>&1
	check sample-type same_top "$TMP/ours.samples" "$TMP/pprof.samples"
else
	fail top-matches-pprof "go not installed"
fi
cat "$TMP/ours.top" >&2

# The folded file of the same recording: the same shares.
"$FP" report -n 12 "$F" > "$TMP/folded.top" 2>&1
check folded-matches-pprof same_top "$TMP/folded.top" "$TMP/ours.top"
check names-the-workload grep -qE 'fpwork_mix|fp::Cruncher::crunch' "$TMP/folded.top"
"$FP" report -p workload -n 5 "$F" > "$TMP/proc.top" 2>&1
check process-filter grep -q 'process workload:' "$TMP/proc.top"
"$FP" report -p nosuchprocess "$F" > "$TMP/noproc.out" 2>&1
check unknown-process-exit test $? -eq 1
check unknown-process-says grep -q "no samples of process 'nosuchprocess'" "$TMP/noproc.out"

# The tree: the process at 100%, and the threads' calls below
# start_thread, each deeper than its caller.
"$FP" report -t "$PB" > "$TMP/tree.out" 2>&1
check tree-root grep -qE '^100\.00% +0\.00%  workload \[process\]$' "$TMP/tree.out"
check tree-path python3 - "$TMP/tree.out" <<'PY'
import sys
path = ["workload [process]", "__GI___clone3", "start_thread", "thread_main(void*)", "compute_loop"]
at = 0
for l in open(sys.argv[1]).read().splitlines()[2:]:
    name = l[17:].lstrip(" ")
    depth = (len(l) - 17 - len(name)) // 2
    if at < len(path) and name == path[at] and depth == at:
        at += 1
sys.exit(0 if at == len(path) else 1)
PY
# Widths fit the terminal: no line longer than COLUMNS.
COLUMNS=60 "$FP" report -t "$PB" > "$TMP/narrow.out" 2>&1
check fits-columns bash -c "[ \$(awk '{ if (length(\$0) > m) m = length(\$0) } END { print m }' '$TMP/narrow.out') -le 60 ]"

# Bad input: a clear error and exit status 1; bad flags: 2.
head -c 1000 /bin/ls > "$TMP/notprofile"
"$FP" report "$TMP/notprofile" > "$TMP/bad.out" 2>&1
check bad-file-exit test $? -eq 1
check bad-file-says grep -q 'neither a pprof profile nor folded stacks' "$TMP/bad.out"
"$FP" report --sort sideways "$F" > /dev/null 2>&1
check bad-sort-exit test $? -eq 2
"$FP" report "$TMP/missing" > "$TMP/missing.out" 2>&1
check missing-file grep -q 'No such file' "$TMP/missing.out"
