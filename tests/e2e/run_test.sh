#!/bin/bash
# run_test.sh: `make run`, as a newcomer types it: the whole machine
# profiled while the bundled demo runs, and a flame graph with the demo's
# native (no frame pointers), kernel and Python functions by name.
TEST=run
. tests/e2e/lib.sh
need_root

make -s run BUILD="$BUILD" RUN_OUT="$TMP/out" > "$TMP/run.log" 2>&1
check exit-0 test $? -eq 0
F=$TMP/out/profile.folded
check says-demo-ran grep -q '^The demo ran' "$TMP/run.log"
check writes-flame-graph grep -q 'demo_sort_records' "$TMP/out/flame.svg"
# native, through libc's qsort, down to main (tables from the demo's CFI)
check native-named grep -qE '^demo;(.*;)?main;demo_sort_records;(.*;)?demo_compare [0-9]+$' "$F"
check native-whole grep -qE '^demo;_start;__libc_start_main[^;]*;(.*;)?main;demo_checksum [0-9]+$' "$F"
check kernel-named grep -qE '^demo;(.*;)?demo_pipe_roundtrip;(.*;)?(ksys_write|ksys_read)_\[k\];' "$F"
check python-named grep -qE '^python3;(.*;)?demo_python_main_\[py\];demo_python_primes_\[py\]( |;)' "$F"
cat "$TMP/run.log" >&2
