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

# A Python daemon in a container-like root: Debian bullseye's python3.9 in
# its own tree (a path the host does not have), its script on a tmpfs only
# its mount namespace sees.  The interpreter's table comes through
# /proc/PID/root, its code objects through process_vm_readv: no setns.
if ! bash tests/python/fetch.sh > "$TMP/fetch.log" 2>&1; then
	fail python-fetch "$(tail -n 2 "$TMP/fetch.log")"
	exit 0
fi
tree=${FPY_CACHE:-/var/cache/fleetprof-python}/bullseye
mkdir -p "$tree/tmp/fpns"
unshare -m --propagation private bash -c "mount -t tmpfs fp-py '$tree/tmp/fpns' &&
	cp tests/workload/pywork.py '$tree/tmp/fpns/' &&
	exec chroot '$tree' python3.9 /tmp/fpns/pywork.py 30" > /dev/null &
py=$!
PIDS+=($py)
sleep 2
check python-script-invisible-from-host test ! -e "$tree/tmp/fpns/pywork.py"
"$FP" record -d 4 -p "$py" -o "$TMP/pyout" --cache "$TMP/cache" > "$TMP/pyrecord.log" 2>&1
check python-record-ok test $? -eq 0
check python-frames-resolved grep -qE ';run_\[py\];step_\[py\];inner_\[py\];leaf_\[py\]' \
	"$TMP/pyout/profile.folded"
check python-file-names grep -q '/tmp/fpns/pywork.py' <(PPROF_BINARY_PATH=/nonexistent \
	/usr/local/go/bin/go tool pprof -raw "$TMP/pyout/profile.pb.gz" 2>&1)
