#!/bin/bash
# pyfold_test.sh: the rows the agent folds native frames below Python to
# (device/unwind_maps.h, fp_unwind_row_start) never span two functions.
# For the interpreters tests/python/fetch.sh provides with their debug
# files, and for libc with libc6-dbg's, `fleetprof symbolize` must name the
# same function at each foldable row's start as in its middle and at its
# end (pyfold.py; 4,000 rows evenly spread), rows in a function's entry
# state included, as the agent folds them with tables of a symbolizer
# that announces function rows (FP_FEATURE_FUNCTION_ROWS).  Before the
# table compiler kept a row at every function's start, adjacent .cold
# parts in the same state shared a row, and 15 of about 5,000 pairs
# differed per interpreter; adjacent leaf functions would share one too.
TEST=pyfold
. "$(dirname "$0")/lib.sh"

PYTHONS=/var/cache/fleetprof-python/pythons.txt
files=()
if [ -f "$PYTHONS" ]; then
	while read -r _ what root _ file _ debug; do
		case $what in debian-*) files+=("$file:$root/usr/lib/debug") ;; esac
	done < "$PYTHONS"
fi
libc=$(ldd /bin/true | awk '/libc\.so/ { print $3 }')
[ -d /usr/lib/debug/.build-id ] && files+=("$libc:/usr/lib/debug")
if [ ${#files[@]} -eq 0 ]; then
	fail inputs "no interpreter with its debug file (tests/python/fetch.sh) and no libc6-dbg"
	exit 0
fi
for spec in "${files[@]}"; do
	file=${spec%%:*}
	debug=${spec#*:}
	name=$(basename "$file")
	if ! "$FP" symbolize -e "$file" -u -o "$TMP/$name.table" > "$TMP/$name.log" 2>&1; then
		fail "$name" "no unwind table: $(tail -1 "$TMP/$name.log")"
		continue
	fi
	if out=$(python3 tests/e2e/pyfold.py "$FP" "$file" "$TMP/$name.table" "$debug"); then
		pass "$name ($out)"
	else
		fail "$name" "$out"
	fi
done
