#!/bin/bash
# nobtf_test.sh: the BPF program needs no kernel BTF and no kernel headers:
# hide /sys/kernel/btf, /lib/modules and /usr/src and it still loads.
TEST=nobtf
. tests/e2e/lib.sh
need_root

"$WORKLOAD" 30 & wl=$!
PIDS+=($wl)
unshare -m --propagation private bash -c "
	for d in /sys/kernel/btf /lib/modules /usr/src; do [ -d \$d ] && mount -t tmpfs none \$d; done
	test ! -e /sys/kernel/btf/vmlinux || exit 3
	exec '$FP' record -d 2 -p $wl -o '$TMP/out' --cache '$TMP/cache'" > "$TMP/log" 2>&1
rc=$?
check loads-without-btf-and-headers test $rc -eq 0
check samples-without-btf grep -q 'fpwork_mix' "$TMP/out/profile.folded"
cat "$TMP/log" >&2
