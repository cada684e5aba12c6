#!/bin/bash
# pyroscope_test.sh: `fleetprof record`'s outputs pushed to a real Grafana
# Pyroscope server, both ways a profiler pushes -- OTLP/HTTP
# (POST /v1development/profiles, DIR/profile.otlp.pb) and the ingest API
# (POST /ingest?format=pprof, DIR/profile.pb.gz) -- and read back: the flame
# graph from /pyroscope/render must hold fleetprof's own stacks, with the
# same counts, and the labels must be queryable.
#
# Then Python: the real agent samples tests/workload/pywork.py under Debian's
# /usr/bin/python3.11 and one symbolizer pushes every interval to the same
# server both ways at once (--pyroscope --pyroscope-format pprof, and
# --otlp-endpoint, which posts OTLP as --pyroscope does by default). Read
# back, both must show the qualified names of both threads in their call
# order, with the shares of the symbolizer's own folded files for the same
# intervals (tests/pyroscope/python_frames.py, same_stacks.py), one series
# per thread, and Functions with the script's path and lines
# (SelectMergeProfile). Python frames need the unwind tables that the
# symbolizer sends in its first replies: the run goes on until an interval
# has them, then a few seconds more.
#
# The server is Pyroscope v1.21 imported as a library by
# tests/pyroscope/server, built from the Go module proxy by
# tests/pyroscope/build.sh: about ten minutes on two cores the first time,
# then cached in $BUILD/pyroscope. tests/pyroscope/serve.sh runs it on
# loopback with its state in a temporary directory.
TEST=pyroscope
. tests/e2e/lib.sh
need_root

GO=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$GO" ]; then
	fail go "go not installed"
	exit 0
fi
export PATH="$(dirname "$GO"):$PATH"

# ---- build (cached) and start ----
if PYRO=$(BUILD=$BUILD GO=$GO tests/pyroscope/build.sh 2> "$TMP/build.log"); then
	pass builds
else
	fail builds "$(tail -n 1 "$TMP/build.log")"
	cat "$TMP/build.log" >&2
	exit 0
fi

PORT=$(free_port)
URL=http://127.0.0.1:$PORT
PYROSCOPE=$PYRO tests/pyroscope/serve.sh "$TMP/pyroscope" "$PORT" > "$TMP/pyroscope.log" 2>&1 &
srv=$!
PIDS+=($srv)
ready=
for _ in $(seq 1 300); do
	if [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ready")" = 200 ]; then
		ready=1
		break
	fi
	kill -0 "$srv" 2> /dev/null || break
	sleep 0.2
done
if [ -n "$ready" ]; then
	pass ready
else
	fail ready "no 200 from /ready within 60 s"
	tail -n 30 "$TMP/pyroscope.log" >&2
	exit 0
fi

# ---- record ----
"$WORKLOAD" 30 & wl=$!
PIDS+=($wl)
sleep 0.5
start=$(date +%s)
"$FP" record -d 3 -p "$wl" -o "$TMP/out" --cache "$TMP/cache" > "$TMP/record.log" 2>&1
check record-exit-status test $? -eq 0
end=$(($(date +%s) + 1))
kill "$wl" 2> /dev/null
check record-writes-both test -s "$TMP/out/profile.otlp.pb" -a -s "$TMP/out/profile.pb.gz"
FOLDED=$TMP/out/profile.folded

# post NAME URL FILE CONTENT-TYPE: POST the file; PASS on HTTP 200.
post() {
	local code
	code=$(curl -s -o "$TMP/$1.resp" -w '%{http_code}' -X POST -H "Content-Type: $4" \
		--data-binary "@$3" "$2")
	if [ "$code" = 200 ]; then pass "$1"; else fail "$1" "HTTP $code: $(head -c 300 "$TMP/$1.resp")"; fi
}

# render NAME QUERY: the flame graph of the last hour as folded stacks in
# $TMP/NAME.folded; waits up to 10 s for it to be non-empty.
render() {
	for _ in $(seq 1 20); do
		curl -s -G "$URL/pyroscope/render" --data-urlencode "query=$2" \
			--data-urlencode from=now-1h --data-urlencode until=now \
			--data-urlencode format=json -o "$TMP/$1.json"
		python3 tests/pyroscope/flamebearer.py "$TMP/$1.json" > "$TMP/$1.folded" 2> "$TMP/$1.err"
		[ -s "$TMP/$1.folded" ] && return 0
		sleep 0.5
	done
	head -c 500 "$TMP/$1.json" "$TMP/$1.err" >&2
	return 1
}

# label_values NAME SELECTOR: the label's values over the last hour, one a line.
label_values() {
	local now
	now=$(date +%s)
	curl -s -X POST -H 'Content-Type: application/json' \
		-d "{\"name\":\"$1\",\"matchers\":[$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")],\"start\":$(((now - 3600) * 1000)),\"end\":$(((now + 60) * 1000))}" \
		"$URL/querier.v1.QuerierService/LabelValues" |
		python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin).get("names", [])))'
}

HOST=$(uname -n)
CPU=process_cpu:cpu:nanoseconds:cpu:nanoseconds
SAMPLES=process_cpu:samples:count:cpu:nanoseconds

# ---- OTLP/HTTP ----
post otlp-accepted "$URL/v1development/profiles" "$TMP/out/profile.otlp.pb" application/x-protobuf
# Pyroscope turns "samples/count every cpu/nanoseconds" into CPU time, and
# resource and sample attributes into labels (dots become underscores).
# process_executable_name comes only from the OTLP sample attributes.
OTLPQ="$CPU{service_name=\"workload\",process_executable_name=\"workload\"}"
if render otlp "$OTLPQ"; then pass otlp-render; else fail otlp-render "$OTLPQ"; fi
F=$TMP/otlp.folded
check otlp-cxx-method-chain grep -qE '(^|;)compute_loop;fp::Cruncher::crunch\(int\) [0-9]+$' "$F"
check otlp-shared-lib-chain grep -qE '(^|;)compute_loop;fpwork_mix [0-9]+$' "$F"
check otlp-kernel-frames grep -qE '(^|;)writer_loop;(.*;)?ksys_write(;| )' "$F"
python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$F" > "$TMP/otlp.same" 2>&1
check otlp-same-stacks-as-folded test $? -eq 0
cat "$TMP/otlp.same" >&2
check otlp-label-service test "$(label_values service_name "{process_executable_name=\"workload\"}")" = workload
check otlp-label-host test "$(label_values host_name '{service_name="workload"}')" = "$HOST"
check otlp-label-threads test "$(label_values thread_name "{process_executable_name=\"workload\"}" | sort | tr '\n' ' ')" = "fp-compute fp-writer "
check otlp-label-pid test "$(label_values process_pid '{service_name="workload"}')" = "$wl"

# ---- /ingest, pprof ----
# The name's {ingest=pprof} becomes a label that tells these series apart.
post pprof-accepted "$URL/ingest?name=workload%7Bingest%3Dpprof%7D&from=$start&until=$end&format=pprof" \
	"$TMP/out/profile.pb.gz" application/octet-stream
PPROFQ="$SAMPLES{service_name=\"workload\",ingest=\"pprof\"}"
if render pprof "$PPROFQ"; then pass pprof-render; else fail pprof-render "$PPROFQ"; fi
F=$TMP/pprof.folded
check pprof-cxx-method-chain grep -qE '(^|;)compute_loop;fp::Cruncher::crunch\(int\) [0-9]+$' "$F"
check pprof-shared-lib-chain grep -qE '(^|;)compute_loop;fpwork_mix [0-9]+$' "$F"
check pprof-kernel-frames grep -qE '(^|;)writer_loop;(.*;)?ksys_write_\[k\];' "$F"
python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$F" > "$TMP/pprof.same" 2>&1
check pprof-same-stacks-as-folded test $? -eq 0
cat "$TMP/pprof.same" >&2
# The pprof profile's second sample type, CPU time, is a series of its own.
if render pprof-cpu "$CPU{service_name=\"workload\",ingest=\"pprof\"}"; then
	python3 tests/pyroscope/same_stacks.py --drop-root "$FOLDED" "$TMP/pprof-cpu.folded" > "$TMP/pprof-cpu.same" 2>&1
	check pprof-cpu-same-stacks-as-folded test $? -eq 0
else
	fail pprof-cpu-same-stacks-as-folded "no $CPU series"
fi
check pprof-label-threads test "$(label_values thread_name '{ingest="pprof"}' | sort | tr '\n' ' ')" = "fp-compute fp-writer "
check pprof-label-service test "$(label_values service_name '{ingest="pprof"}')" = workload

# ---- off-CPU: a series of its own ----
# waitwork's off-CPU profile (pprof sample types waits/count and
# off_cpu/nanoseconds) is a profile type of its own in Pyroscope, apart
# from the CPU series, with our stacks and times.
if gcc -O2 -fomit-frame-pointer -pthread tests/workload/waitwork.c -o "$TMP/waitwork"; then
	"$TMP/waitwork" 6 &
	ww=$!
	PIDS+=($ww)
	sleep 0.5
	ostart=$(date +%s)
	"$FP" record --off-cpu -d 3 -p "$ww" -o "$TMP/offout" --cache "$TMP/cache" > /dev/null 2>&1
	check offcpu-record-exit-status test $? -eq 0
	oend=$(($(date +%s) + 1))
	post offcpu-accepted "$URL/ingest?name=waitwork%7Bingest%3Doffcpu%7D&from=$ostart&until=$oend&format=pprof" \
		"$TMP/offout/offcpu.pb.gz" application/octet-stream
	OFFCPU=process_cpu:off_cpu:nanoseconds:off_cpu:nanoseconds
	if render offcpu "$OFFCPU{service_name=\"waitwork\",ingest=\"offcpu\"}"; then
		pass offcpu-render
		python3 tests/pyroscope/same_stacks.py --drop-root "$TMP/offout/offcpu.folded" "$TMP/offcpu.folded" \
			> "$TMP/offcpu.same" 2>&1
		check offcpu-same-stacks-as-folded test $? -eq 0
		cat "$TMP/offcpu.same" >&2
		check offcpu-pipe-wait grep -qE '(^|;)piper;wait_on_pipe;' "$TMP/offcpu.folded"
	else
		fail offcpu-render "no $OFFCPU series"
	fi
	# not in the CPU series of the same service
	check offcpu-apart bash -c "! curl -s -X POST -H 'Content-Type: application/json' \
		-d '{\"start\":$(((ostart - 60) * 1000)),\"end\":$(((oend + 60) * 1000))}' \
		'$URL/querier.v1.QuerierService/ProfileTypes' | grep -q 'process_cpu:cpu:nanoseconds:off_cpu'"
	wait "$ww"
else
	fail offcpu-build "waitwork does not build"
fi

# ---- Python, from the agent through the symbolizer's pushes ----
PY=/usr/bin/python3.11
# A copy: the Functions must name the file that ran, whatever happens to
# the work tree meanwhile.
cp tests/workload/pywork.py "$TMP/pywork.py"
PYSCRIPT=$TMP/pywork.py
pyt0=$(date +%s)
if [ ! -x "$PY" ]; then
	fail python "no $PY (Debian's python3.11)"
else
	"$PY" "$PYSCRIPT" 60 > "$TMP/pywork.out" 2>&1 &
	py=$!
	PIDS+=($py)
	wait_for 10 grep -q 'pywork: ready' "$TMP/pywork.out"
	check python-workload-ready grep -q 'pywork: ready' "$TMP/pywork.out"
	sport=$(free_port)
	"$SYMB" --local-files --listen "tcp://127.0.0.1:$sport" --cache "$TMP/pycache" --out "$TMP/pyout" \
		--spool "$TMP/pyspool" --pyroscope "$URL" --pyroscope-format pprof \
		--otlp-endpoint "$URL" > "$TMP/pysymb.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	"$AGENT" --table-cache "$TMP/tables" --server "tcp://127.0.0.1:$sport" --interval 1 -p "$py" --label fp_test=python \
		> "$TMP/pyagent.log" 2>&1 &
	agent=$!
	PIDS+=($agent)
	# The first intervals show the interpreter's C frames only, until the
	# tables of python3.11 arrive; then three more intervals.
	pyframes() { grep -qs 'Model\.leaf_\[py\]' "$TMP"/pyout/*/*.folded; }
	if wait_for 20 pyframes; then
		pass python-frames-in-folded
		sleep 3
	else
		fail python-frames-in-folded "no Model.leaf_[py] in the symbolizer's folded files within 20 s"
		tail -n 5 "$TMP/pyagent.log" "$TMP/pysymb.log" >&2
	fi
	kill -INT "$agent"
	wait "$agent"
	check python-agent-exit-status test $? -eq 0
	kill "$py" 2> /dev/null
	spools_empty() { ! ls "$TMP"/pyspool/*/ 2> /dev/null | grep -q '\.req$'; }
	wait_for 20 spools_empty
	check python-pushes-drained spools_empty
	kill -TERM "$symb"
	wait "$symb"
	check python-symbolizer-exit-status test $? -eq 0
	cat "$TMP"/pyout/*/*.folded > "$TMP/py.folded" 2> /dev/null
	intervals=0
	for f in "$TMP"/pyout/*/*.folded; do
		[ -e "$f" ] && [ "$(folded_total "$f")" -gt 0 ] && intervals=$((intervals + 1))
	done
	pyint=$(grep -ls 'Model\.leaf_\[py\]' "$TMP"/pyout/*/*.folded | wc -l)
	echo "python: $(folded_total "$TMP/py.folded") samples in $intervals intervals, $pyint with Python frames, $(($(date +%s) - pyt0)) s" >&2
	for dest in pyroscope otlp; do
		check "python-$dest-pushed-every-interval" grep -qE \
			"push $dest .*: queued $intervals, pushed $intervals, retried [0-9]+, dropped 0, permanent failures 0, gave up 0, partial successes 0 " \
			"$TMP/pysymb.log"
	done

	# pycheck NAME QUERY PROFILE_TYPE [--drop-unresolved]: the flame graph
	# of QUERY against the folded files, the stacks exactly and the Python
	# frames one by one, and the functions of the merged profile.
	pycheck() {
		local name=$1 query=$2 type=$3 drop=$4 now sel
		if ! render "$name" "$query"; then
			fail "$name-render" "$query"
			return
		fi
		pass "$name-render"
		python3 tests/pyroscope/same_stacks.py --drop-root $drop "$TMP/py.folded" "$TMP/$name.folded" \
			> "$TMP/$name.same" 2>&1
		check "$name-same-stacks-as-folded" test $? -eq 0
		cat "$TMP/$name.same" >&2
		python3 tests/pyroscope/python_frames.py stacks $drop "$TMP/py.folded" "$TMP/$name.folded" \
			> "$TMP/$name.py" 2>&1
		check "$name-call-chains-and-shares" test $? -eq 0
		cat "$TMP/$name.py" >&2
		now=$(date +%s)
		sel=${query#"$type"}
		python3 -c 'import json,sys; print(json.dumps({"profileTypeID": sys.argv[1], "labelSelector": sys.argv[2], "start": int(sys.argv[3]), "end": int(sys.argv[4])}))' \
			"$type" "$sel" $(((now - 3600) * 1000)) $(((now + 60) * 1000)) > "$TMP/$name.req"
		curl -s -X POST -H 'Content-Type: application/json' --data-binary "@$TMP/$name.req" \
			-o "$TMP/$name.merged.json" "$URL/querier.v1.QuerierService/SelectMergeProfile"
		python3 tests/pyroscope/python_frames.py functions "$PYSCRIPT" "$TMP/$name.merged.json" \
			> "$TMP/$name.fn" 2>&1
		check "$name-functions-file-and-lines" test $? -eq 0
		cat "$TMP/$name.fn" >&2
	}
	# The process renamed itself after its main thread ("model"): that is
	# the service. Only OTLP sets process_executable_name; only /ingest
	# sets pyroscope_spy and has a samples/count series.
	pycheck py-otlp "$CPU{service_name=\"model\",fp_test=\"python\",process_executable_name=\"model\"}" \
		"$CPU" --drop-unresolved
	pycheck py-pprof "$SAMPLES{service_name=\"model\",fp_test=\"python\",pyroscope_spy=\"fleetprof\"}" \
		"$SAMPLES"
	# One series per thread: each holds its own thread's Python frames only.
	for t in model:Model.run:Mixer.run mixer:Mixer.run:Model.run; do
		IFS=: read -r tn has hasnot <<< "$t"
		for q in "py-otlp-$tn:$CPU{fp_test=\"python\",process_executable_name=\"model\",thread_name=\"$tn\"}" \
			"py-pprof-$tn:$SAMPLES{fp_test=\"python\",pyroscope_spy=\"fleetprof\",thread_name=\"$tn\"}"; do
			n=${q%%:*}
			if render "$n" "${q#*:}"; then
				check "$n-thread-has-$has" grep -q "\(^\|;\)$has;" "$TMP/$n.folded"
				check "$n-thread-not-$hasnot" bash -c "! grep -q '\(^\|;\)$hasnot;' '$TMP/$n.folded'"
			else
				fail "$n-render" "${q#*:}"
			fi
		done
	done
	check py-otlp-label-threads test "$(label_values thread_name '{fp_test="python",process_executable_name="model"}' | sort | tr '\n' ' ')" = "mixer model "
	check py-pprof-label-threads test "$(label_values thread_name '{fp_test="python",pyroscope_spy="fleetprof"}' | sort | tr '\n' ' ')" = "mixer model "
	check py-label-host test "$(label_values host_name '{fp_test="python"}')" = "$HOST"
	echo "python: $(($(date +%s) - pyt0)) s in all" >&2
fi

# /pyroscope/label-values answers only for __name__ (the profile types) in
# this version: for any other label it asks the querier without a name.
curl -s -G "$URL/pyroscope/label-values" --data-urlencode label=__name__ > "$TMP/types.json"
check profile-types python3 -c '
import json, sys
t = set(json.load(open(sys.argv[1])))
sys.exit(0 if {sys.argv[2], sys.argv[3]} <= t else 1)' "$TMP/types.json" "$CPU" "$SAMPLES"

# Pyroscope's own query path may log that its scheduler was shutting down
# (seen once in CI, mid-run, from a query: not of our data).
check server-logged-no-errors bash -c "! grep -E 'level=error' '$TMP/pyroscope.log' |
	grep -v 'component=frontend msg=\"error sending requests to scheduler\"' >&2"

# ---- stop ----
kill -TERM "$srv"
stopped=
for _ in $(seq 1 100); do
	kill -0 "$srv" 2> /dev/null || { stopped=1; break; }
	sleep 0.2
done
wait "$srv" 2> /dev/null
check stops-on-sigterm test -n "$stopped"
