#!/bin/bash
# mountns_test.sh: a process in its own mount namespace, running a binary
# that exists only on its private tmpfs, resolves like any other (no setns).
TEST=mountns
. tests/e2e/lib.sh
need_root

mkdir -p "$TMP/priv"
unshare -m --propagation private bash -c "mount -t tmpfs fp-priv '$TMP/priv' &&
	cp '$WORKLOAD' '$BUILD/tests/libfpwork.so' '$TMP/priv/' &&
	exec '$TMP/priv/workload' 30" &
wl=$!
PIDS+=($wl)
sleep 1
check binary-invisible-from-host test ! -e "$TMP/priv/workload"
"$FP" record -d 4 -p "$wl" -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check record-ok test $? -eq 0
check private-binary-resolved grep -qE 'compute_loop;fp::Cruncher::crunch\(int\)(;[^; ]*_\[i\])* ' "$TMP/out/profile.folded"
check private-library-resolved grep -qE 'compute_loop;fpwork_mix ' "$TMP/out/profile.folded"
