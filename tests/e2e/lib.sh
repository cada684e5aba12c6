# lib.sh: shared by the end-to-end tests (sourced).
BUILD=${BUILD:-build}
FP=$BUILD/fleetprof
# Agents the tests run keep their tables in the test's own directory
# (--table-cache "$TMP/tables"): the default, /var/cache/fleetprof-agent,
# is shared by every run on the host, and one test's tables would make
# another's first seconds whole.
AGENT=$BUILD/fleetprof-agent
SYMB=$BUILD/fleetprof-symbolizer
WORKLOAD=$BUILD/tests/workload
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fleetprof-e2e.XXXXXX")
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT

pass() { echo "PASS: $TEST:$1"; }
fail() { echo "FAIL: $TEST:$1${2:+ ($2)}"; }
check() { # check NAME COMMAND...: PASS if the command succeeds
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

# need_root: BPF tests skip when not root, but never in CI.
need_root() {
	if [ "$(id -u)" != 0 ]; then
		if [ -n "$CI" ]; then
			fail "root" "BPF tests need root and CI is set"
		else
			echo "SKIP: $TEST (needs root)"
		fi
		exit 0
	fi
}

# free_port: a TCP port nobody listens on.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# folded_total FILE...: the sum of the counts.
folded_total() {
	cat "$@" 2>/dev/null | awk '{ n += $NF } END { print n + 0 }'
}

# wait_for SECONDS COMMAND...: poll until the command succeeds; 1 on timeout.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.2
	done
}
