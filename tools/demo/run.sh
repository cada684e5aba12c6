#!/bin/sh
# run.sh: what `make run` does.  Starts the bundled demo (tools/demo: C
# built as distributions build it, without frame pointers; a Python
# function; kernel work through a pipe), profiles the whole machine with
# `fleetprof record` while it runs, and says where the flame graph is.
# usage: tools/demo/run.sh BUILD OUT [SECONDS]
set -u
build=$1 out=$2 seconds=${3:-10}

if [ "$(id -u)" != 0 ]; then
	echo "make run: fleetprof record loads a BPF program: run it as root (sudo make run)" >&2
	exit 1
fi
# The demo runs a little longer than the recording, on each side of it.
"$build/demo/demo" $((seconds + 3)) & native=$!
python3 "$(dirname "$0")/demo.py" $((seconds + 3)) & python=$!
trap 'kill $native $python 2> /dev/null' EXIT INT TERM
sleep 1
"$build/fleetprof" record -d "$seconds" -o "$out"
status=$?
kill $native $python 2> /dev/null
wait $native $python 2> /dev/null
[ $status -eq 0 ] || exit $status
cat <<MSG

The demo ran: the whole machine was profiled for $seconds s while the bundled
workload ran (processes "demo": C without frame pointers and kernel work
through a pipe; "python3": tools/demo/demo.py), next to whatever else the
machine was doing.
  open $out/flame.svg in a browser (search: demo_ or _[py] or _[k])
  $build/fleetprof report -p demo -t $out/profile.pb.gz
  $build/fleetprof report $out/profile.pb.gz
MSG
