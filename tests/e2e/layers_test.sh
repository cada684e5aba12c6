#!/bin/bash
# layers_test.sh: the folders depend on each other one way (the
# symbolizer's: elf, symbols, profile, sinks, ingest, service; device/ and
# symbolizer/ apart) and no modules call each other in a circle
# (tests/e2e/layers.py, from the includes of the sources and the symbols of
# the build's objects).  Breaches known today are listed in layers.py and
# reported; a new one fails, and so does a listed one that is gone.  Needs
# the build (make all), no root.
TEST=layers
. tests/e2e/lib.sh
OBJ=$BUILD/obj

check objects test -s "$OBJ/symbolizer/profile/pprof.o" -a -s "$OBJ/symbolizer/sinks/files.o"
python3 tests/e2e/layers.py --obj "$OBJ" > "$TMP/tree.out"
check tree test $? -eq 0
cat "$TMP/tree.out"
# The encoders of profile/ write no file: they call nothing of sinks/
# (files.c used to write their files for them).
check profile-below-sinks bash -c "! grep -q 'symbolizer/profile -> symbolizer/sinks' '$TMP/tree.out'"

# It fails when it should.
catches() { # catches WHAT ARGS...: layers.py fails and says WHAT
	local what=$1 out
	shift
	out=$(python3 tests/e2e/layers.py --obj "$OBJ" "$@")
	[ $? -eq 1 ] && grep -qF -e "$what" <<< "$out"
}
# An encoder calling the file sink again.
check catches-upward-call catches 'breach: folder symbolizer/profile -> symbolizer/sinks' \
	--edge symbolizer/profile/pprof symbolizer/sinks/files
# Two modules of one folder calling each other (folded.c calls profile.c).
check catches-cycle catches 'breach: cycle symbolizer/profile/folded symbolizer/profile/profile' \
	--edge symbolizer/profile/profile symbolizer/profile/folded
# The agent's code using the symbolizer's.
check catches-sides catches 'breach: folder device -> symbolizer/profile' \
	--edge device/collector symbolizer/profile/profile
# An include, not a call: a copy of the sources where pprof.c includes
# sinks/files.h.
mkdir -p "$TMP/src"
cp -r bpf common device symbolizer tools "$TMP/src/"
sed -i 's/^#include "output.h"$/&\n#include "files.h"/' "$TMP/src/symbolizer/profile/pprof.c"
check catches-include catches 'symbolizer/profile/pprof -> symbolizer/sinks/files' --src "$TMP/src"
