#!/bin/bash
# container_test.sh: a hostile container.  The symbolizer learns a
# container's binary from the device (device fetch), and the container
# has meanwhile put something else at the binary's path: an absolute
# symbolic link to a file of the host, a FIFO nobody writes, another
# program.  The agent reads the file the process maps, never the path:
# it opens nothing outside the container (inotify on the host's file),
# never blocks (its intervals keep coming), and the names resolve.  The
# agent runs as it does in the field: with five capabilities left, behind
# a seccomp filter.
TEST=container
. tests/e2e/lib.sh
need_root
if ! command -v inotifywait > /dev/null; then
	fail tools "inotifywait is needed (tools/install-deps.sh)"
	exit 0
fi

# make_root DIR: a container root holding the workload at /app/workload,
# its library beside it and the system libraries it links.
make_root() {
	local dir=$1 lib
	mkdir -p "$dir/app"
	cp "$WORKLOAD" "$BUILD/tests/libfpwork.so" "$dir/app/"
	for lib in $(ldd "$WORKLOAD" | grep -o '/lib[^ ]*' | grep -v libfpwork); do
		cp -L --parents "$lib" "$dir/"
	done
}

mkdir -p "$TMP/nodebug" "$TMP/host"
cp "$WORKLOAD" "$TMP/host/workload" # the host's copy: the same build-ID

# tamper CASE ROOT: what the container puts at its binary's path.
tamper() {
	rm "$2/app/workload"
	case $1 in
	symlink) ln -s "$TMP/host/workload" "$2/app/workload" ;;
	fifo) mkfifo "$2/app/workload" ;;
	swapped) cp /bin/true "$2/app/workload" ;;
	esac
}

bid=$(readelf -n "$WORKLOAD" | awk '/Build ID/ { print $3; exit }')
for case in symlink fifo swapped; do
	root=$TMP/$case
	make_root "$root"
	# no /proc in the root, so no $ORIGIN: the library path says where
	LD_LIBRARY_PATH=/app chroot "$root" /app/workload 60 > /dev/null &
	wl=$!
	PIDS+=($wl)
	# The agent samples first, with its symbolizer away: it learns the
	# binary's path while the binary is still there.  Then the container
	# swaps the path, and only then does the symbolizer come and ask.
	addr=tcp://127.0.0.1:$(free_port)
	"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$wl" > "$TMP/$case.agent.log" 2>&1 &
	agent=$!
	PIDS+=($agent)
	sleep 2.5
	tamper "$case" "$root"
	inotifywait -q -m -e open,access "$TMP/host/workload" > "$TMP/$case.inotify" 2>&1 &
	watch=$!
	PIDS+=($watch)
	sleep 0.5
	"$SYMB" --listen "$addr" --cache "$TMP/$case.cache" --out "$TMP/$case.out" \
		--debug-dir "$TMP/nodebug" --no-local-files > "$TMP/$case.symb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	wait_for 20 grep -q "symbols of $bid fetched from the device" "$TMP/$case.symb.log"
	sleep 3 # intervals after the fetch, resolved
	if [ $case = symlink ]; then
		# least privilege: the agent that did all this kept five
		# capabilities (CAP_DAC_READ_SEARCH 2, CAP_SYS_PTRACE 19,
		# CAP_SYSLOG 34, CAP_BPF 39, CAP_CHECKPOINT_RESTORE 40), in
		# every thread, behind no_new_privs and a seccomp filter; and
		# CAP_PERFMON 38 permitted only, for the Python walker's load
		want=$(printf '%016x' $(( 1 << 2 | 1 << 19 | 1 << 34 | 1 << 39 | 1 << 40 )))
		wantprm=$(printf '%016x' $(( 1 << 2 | 1 << 19 | 1 << 34 | 1 << 38 | 1 << 39 | 1 << 40 )))
		caps_ok=1
		for st in /proc/$agent/task/*/status; do
			for f in CapEff CapBnd; do
				grep -q "^$f:[[:space:]]*$want\$" "$st" || caps_ok=0
			done
			grep -q "^CapPrm:[[:space:]]*$wantprm\$" "$st" || caps_ok=0
			grep -q '^Seccomp:[[:space:]]*2$' "$st" || caps_ok=0
			grep -q '^NoNewPrivs:[[:space:]]*1$' "$st" || caps_ok=0
		done
		check agent-least-privilege [ $caps_ok = 1 ]
		check agent-threads [ "$(ls /proc/$agent/task | wc -l)" -gt 1 ]
	fi
	kill -INT "$agent"
	if ! timeout 10 tail --pid="$agent" -f /dev/null; then
		fail "$case:agent-exits" "the agent did not stop on SIGINT"
		kill -9 "$agent"
	fi
	wait "$agent"
	kill -TERM "$symb"; wait "$symb"
	kill "$wl" "$watch" 2>/dev/null; wait "$wl" "$watch" 2>/dev/null

	check "$case:fetched-from-device" grep -q "symbols of $bid fetched from the device" \
		"$TMP/$case.symb.log"
	ls "$TMP/$case.out"/*/*.folded 2>/dev/null | tail -n 2 | xargs cat > "$TMP/$case.late" 2>/dev/null
	check "$case:names-resolved" grep -qE 'compute_loop;fp::Cruncher::crunch\(int\)' "$TMP/$case.late"
	# intervals after the fetch: the agent never waited on the path
	check "$case:agent-not-blocked" [ "$(ls "$TMP/$case.out"/*/*.folded 2>/dev/null | wc -l)" -ge 4 ]
	check "$case:host-file-untouched" [ ! -s "$TMP/$case.inotify" ]
	tail -n 4 "$TMP/$case.symb.log" "$TMP/$case.agent.log" "$TMP/$case.inotify" >&2
done
