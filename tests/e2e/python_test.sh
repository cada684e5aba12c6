#!/bin/bash
# python_test.sh: Python frames of real CPython interpreters, against
# py-spy sampling the same process over the same seconds.
#
# Every interpreter tests/python/fetch.sh provides (Debian's 3.9, 3.11 and
# 3.13, and pyenv's builds when the machine has them: 3.12 comes only from
# there) runs tests/workload/pywork.py: classes, nested calls, a generator,
# json (a C extension) and two threads.  `fleetprof record -p` and
# `py-spy record --nonblocking` sample it at once; compare_python.py checks
# coverage, inclusive shares and the hottest lines.  Then the cases that
# must never give wrong names: an interpreter version the agent does not
# know (counted and logged), code objects freed and their memory reused,
# and processes that exit while they are sampled.
TEST=python
. "$(dirname "$0")/lib.sh"
need_root

SPY=$(command -v py-spy || echo /usr/local/bin/py-spy)
GO=/usr/local/go/bin/go
[ -x "$GO" ] || GO=$(command -v go)
SECONDS_EACH=${PY_SECONDS:-8}
if [ ! -x "$SPY" ] || [ -z "$GO" ]; then
	fail tools "py-spy and go are needed (tools/install-deps.sh)"
	exit 0
fi
if ! bash tests/python/fetch.sh > "$TMP/fetch.out" 2>&1; then
	fail fetch "$(tail -n 3 "$TMP/fetch.out")"
	exit 0
fi
LIST=${FPY_CACHE:-/var/cache/fleetprof-python}/pythons.txt

# start ROOT INTERPRETER SCRIPT ARGS...: run a Python script (copied into
# ROOT) in the background; $! is the interpreter.
start() {
	local root=$1 interp=$2 script=$3
	shift 3
	if [ "$root" = / ]; then
		"$interp" "$script" "$@" &
	else
		mkdir -p "$root/tmp/fp"
		cp "$script" "$root/tmp/fp/"
		chroot "$root" "$interp" "/tmp/fp/$(basename "$script")" "$@" &
	fi
}

versions=0
while read -r ver src root interp _; do
	name="$ver-$src"
	start "$root" "$interp" tests/workload/pywork.py $((SECONDS_EACH + 10))
	pid=$!
	PIDS+=("$pid")
	sleep 1
	"$FP" record -p "$pid" -d "$SECONDS_EACH" -F 199 -o "$TMP/$name" > "$TMP/$name.rec" 2>&1 &
	rec=$!
	"$SPY" record -p "$pid" -d "$SECONDS_EACH" -r 199 $SPY_MODE -f raw \
		-o "$TMP/$name.spy" > "$TMP/$name.spylog" 2>&1
	wait "$rec"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if [ ! -s "$TMP/$name/profile.pb.gz" ] || [ ! -s "$TMP/$name.spy" ]; then
		fail "$name" "no profile: $(tail -n 2 "$TMP/$name.rec" "$TMP/$name.spylog" | tr '\n' ' ')"
		continue
	fi
	PPROF_BINARY_PATH=/nonexistent "$GO" tool pprof -raw "$TMP/$name/profile.pb.gz" \
		> "$TMP/$name.raw" 2>&1
	python3 tests/e2e/compare_python.py --name "$name" "$TMP/$name.raw" "$TMP/$name.spy"
	# The folded output names them qualname_[py]: the method of a class
	# on 3.11 and later, the bare name before (3.9 has no co_qualname).
	case $ver in
	3.9) want='step_\[py\]' ;;
	*) want='Model\.step_\[py\]' ;;
	esac
	check "$name:folded" grep -q "$want" "$TMP/$name/profile.folded"
	versions=$((versions + 1))
done < "$LIST"
check versions [ "$versions" -ge 3 ]
exit 0
