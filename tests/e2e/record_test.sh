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
