#!/bin/bash
# push_test.sh: the symbolizer pushes every interval over OTLP/HTTP through
# its on-disk spool, with the real BPF agent and a real OpenTelemetry
# Collector (tests/otlp/build-collector.sh) as the receiver.
#
#  1. Nothing listens at --otlp-endpoint: intervals pile up in the spool and
#     the symbolizer says it is retrying.  SIGTERM leaves them spooled.
#  2. A second symbolizer on the same spool takes them over (a restart), a
#     new agent adds more, still without a receiver; then the collector
#     starts and the spool drains, oldest first, while the agent runs.
#     Every interval of both agents reaches the collector once: requests,
#     the sum of the sample values (= what the agents sampled) and the
#     function names in its debug output.
#  3. A receiver that answers 400 (a permanent failure): counted, logged with
#     the body, deleted, never retried; one that answers an OTLP partial
#     success: logged and its rejected profiles counted; --push-header and
#     --push-gzip reach the wire.
#  4. --pyroscope-format pprof, the whole machine: one /ingest request per
#     interval and service, the name in Pyroscope's syntax, each pprof with
#     that service's samples only, all adding up to what the agent sampled.
#  5. Logs and credentials: a hello whose host name holds a newline, CR and an
#     escape sequence is logged as one line, escaped, with no forged line;
#     --push-header-file (mode 644: a warning) reaches the wire and its
#     secret never the log; the retry bounds of --push-max-attempts and
#     --push-max-age are in the start line.
#  Invalid push flags exit 2 with a message (a bad header file: 1, the line
#  number without its text).
TEST=push
. tests/e2e/lib.sh
need_root

COL=$(realpath -m "$BUILD")/otelcol/otelcol-fleetprof-test
if how=$(BUILD=$BUILD tests/otlp/build-collector.sh 2> "$TMP/builder.log"); then
	pass "collector-builds ($how)"
else
	fail collector-builds
	tail -n 30 "$TMP/builder.log" >&2
	exit 0
fi

port=$(free_port)
addr=tcp://127.0.0.1:$port
cport=$(free_port) # the collector's, later; nothing listens there yet
SPOOL=$TMP/spool/otlp
start_symbolizer() { # start_symbolizer LOG ARGS...
	local log=$1
	shift
	"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" "$@" >> "$log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	sleep 0.5
}
start_agent() { # start_agent LOG
	"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 -p "$wl" --label rack=r1 > "$1" 2>&1 &
	agent=$!
	PIDS+=($agent)
}
spooled() { ls "$SPOOL" 2> /dev/null | grep -c '\.req$'; }
spool_empty() { [ "$(spooled)" -eq 0 ]; }
# wait_for SECONDS COMMAND...: until the command succeeds, or false.
wait_for() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge "$deadline" ] && return 1
		sleep 0.2
	done
}
nonempty_intervals() { # profiles with samples: the pusher skips idle intervals
	local n=0 f
	for f in "$TMP"/out/*/*.folded; do
		[ -e "$f" ] && [ "$(folded_total "$f")" -gt 0 ] && n=$((n + 1))
	done
	echo $n
}
sampled() { sed -n 's/.*sampled \([0-9]*\) samples.*/\1/p' "$1"; }

"$WORKLOAD" 120 & wl=$!
PIDS+=($wl)

# ---- 1: no receiver ----
start_symbolizer "$TMP/symb1.log" --otlp-endpoint "http://127.0.0.1:$cport" --spool "$TMP/spool"
start_agent "$TMP/agent1.log"
sleep 6
n1=$(spooled)
check spool-fills test "$n1" -ge 3
check logs-retrying grep -q 'push otlp: http://127.0.0.1:[0-9]*: .*requests spooled, retrying in' \
	"$TMP/symb1.log"
kill -INT "$agent"; wait "$agent"
kill -TERM "$symb"; wait "$symb"
check symbolizer-exits-0 test $? -eq 0
left=$(spooled)
intervals1=$(nonempty_intervals)
echo "phase 1: $n1 requests spooled after 6 s, $left at exit, $intervals1 intervals with samples" >&2
check sigterm-keeps-spool test "$left" -eq "$intervals1"
check no-temporaries bash -c "! ls -A '$SPOOL' | grep -q '^\.tmp'"

# ---- 2: restart, more intervals, then the collector ----
start_symbolizer "$TMP/symb2.log" --otlp-endpoint "http://127.0.0.1:$cport" --spool "$TMP/spool"
check restart-resumes wait_for 10 grep -q "push otlp: OTLP to .*, $left requests waiting)" "$TMP/symb2.log"
start_agent "$TMP/agent2.log"
sleep 4
before=$(spooled)
FP_OTLP_PORT=$cport "$COL" --config=tests/otlp/collector-config.yaml \
	--feature-gates=+service.profilesSupport > "$TMP/collector.log" 2>&1 &
col=$!
PIDS+=($col)
t0=$(date +%s)
# The backoff has reached 4 to 8 s by now; then everything goes at once.
wait_for 90 spool_empty
drained=$?
echo "phase 2: $before requests spooled when the collector started, drained in $(($(date +%s) - t0)) s" >&2
check spool-drains test $drained -eq 0
sleep 2 # the agent keeps sending: these go straight through
kill -INT "$agent"; wait "$agent"
wait_for 30 spool_empty
kill -TERM "$symb"; wait "$symb"
check symbolizer-exits-0-again test $? -eq 0
sleep 1

sampled_total=$(($(sampled "$TMP/agent1.log") + $(sampled "$TMP/agent2.log")))
intervals=$(nonempty_intervals)
written=$(folded_total "$TMP"/out/*/*.folded)
# One resource per request (one service: -p); the debug exporter's summary
# lines are rate-limited, its detailed dump is not.
requests=$(grep -c '^ResourceProfiles #0$' "$TMP/collector.log")
values=$(grep -oE 'Values: \[[0-9]+\]' "$TMP/collector.log" | grep -oE '[0-9]+' | awk '{ n += $1 } END { print n + 0 }')
pushed=$(sed -n 's/.*push otlp .*: queued [0-9]*, pushed \([0-9]*\),.*/\1/p' "$TMP/symb2.log" | tail -n 1)
retried=$(sed -n 's/.*push otlp .*, retried \([0-9]*\),.*/\1/p' "$TMP/symb2.log" | tail -n 1)
echo "sampled $sampled_total, written $written in $intervals intervals; collector: $requests requests, sample values $values; pushed $pushed, retried $retried" >&2
check samples-taken test "$sampled_total" -gt 100
check every-interval-received test "$requests" -eq "$intervals"
check pushed-count test "${pushed:-x}" -eq "$intervals"
check values-add-up test "$values" -eq "$sampled_total"
check written-add-up test "$written" -eq "$sampled_total"
check retried-counted test "${retried:-0}" -gt 0
check nothing-dropped grep -qE 'push otlp .*dropped 0, permanent failures 0, gave up 0, partial successes 0 .*spool 0 requests' "$TMP/symb2.log"
# Oldest first: the intervals arrive in the order they were taken.
check oldest-first bash -c "grep -E '^ +Start time +: ' '$TMP/collector.log' | sed 's/.*: //' | sort -c"
check collector-cxx-method grep -qF 'fp::Cruncher::crunch(int)' "$TMP/collector.log"
check collector-shared-lib grep -qF 'fpwork_mix' "$TMP/collector.log"
check collector-service grep -qE 'service\.name: Str\(workload\)' "$TMP/collector.log"
check collector-host-label grep -qE 'rack: Str\(r1\)' "$TMP/collector.log"
check collector-no-errors bash -c "! grep -qiE '\"?level\"?[:=]\"?(error|fatal)|\berror\b.*(unmarshal|decode)' '$TMP/collector.log'"
kill "$col" 2> /dev/null
wait "$col" 2> /dev/null

# ---- 3: refusals ----
cat > "$TMP/receiver.py" << 'EOF'
# A fake receiver: MODE 400 refuses everything with a text body; MODE partial
# accepts with an ExportProfilesServiceResponse whose partial_success says 2
# profiles were rejected; MODE save accepts and keeps each body as LOG.N.
# Every request is one line of LOG.
import http.server, sys
port, mode, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open(log, 'a') as f:
            f.write('%s %s tenant=%s gzip=%s auth=%s\n' % (self.path,
                    self.headers.get('Content-Type'), self.headers.get('X-Scope-OrgID'),
                    body[:2] == b'\x1f\x8b', self.headers.get('Authorization')))
        if mode == 'save':
            H.n = getattr(H, 'n', 0) + 1
            with open('%s.%d' % (log, H.n), 'wb') as f:
                f.write(body)
            status, ctype, out = 200, 'text/plain', b''
        elif mode == '400':
            status, ctype, out = 400, 'text/plain', b'unknown tenant'
        else:
            msg = b'too old'
            ps = b'\x08\x02\x12' + bytes([len(msg)]) + msg
            status, ctype, out = 200, 'application/x-protobuf', b'\x0a' + bytes([len(ps)]) + ps
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
EOF
p400=$(free_port)
ppart=$(free_port)
psave=$(free_port)
python3 "$TMP/receiver.py" "$p400" 400 "$TMP/r400.log" & PIDS+=($!)
python3 "$TMP/receiver.py" "$ppart" partial "$TMP/rpart.log" & PIDS+=($!)
python3 "$TMP/receiver.py" "$psave" save "$TMP/rsave.log" & PIDS+=($!)
listening() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
wait_for 10 listening "$p400"
wait_for 10 listening "$ppart"
wait_for 10 listening "$psave"
rm -rf "$TMP/out"
start_symbolizer "$TMP/symb3.log" --otlp-endpoint "http://127.0.0.1:$p400" \
	--pyroscope "http://127.0.0.1:$ppart" --push-header 'X-Scope-OrgID: tenant-1' \
	--push-gzip --spool "$TMP/spool3"
start_agent "$TMP/agent3.log"
sleep 4
kill -INT "$agent"; wait "$agent"
sleep 1
kill -TERM "$symb"; wait "$symb"
intervals3=$(nonempty_intervals)
got400=$(wc -l < "$TMP/r400.log")
gotpart=$(wc -l < "$TMP/rpart.log")
echo "phase 3: $intervals3 intervals; the 400 receiver got $got400 requests, the partial one $gotpart" >&2
check permanent-not-retried test "$got400" -eq "$intervals3"
check permanent-logged-with-body grep -q 'push otlp: .* refused .* for good: 400 Bad Request: unknown tenant' "$TMP/symb3.log"
check permanent-counted grep -qE "push otlp .*pushed 0, retried 0, dropped 0, permanent failures $intervals3, .*spool 0 requests" "$TMP/symb3.log"
check partial-logged grep -q 'push pyroscope: .*partial success, 2 profiles rejected: too old' "$TMP/symb3.log"
check partial-counted grep -qE "push pyroscope .*pushed $intervals3, retried 0, dropped 0, permanent failures 0, gave up 0, partial successes $intervals3 \($((2 * intervals3)) profiles rejected\)" "$TMP/symb3.log"
check header-sent bash -c "grep -c 'tenant=tenant-1 gzip=True' '$TMP/rpart.log' | grep -qx '$gotpart'"
check otlp-content-type grep -q '^/v1development/profiles application/x-protobuf ' "$TMP/r400.log"

# ---- 4: Pyroscope's /ingest with pprof, the whole machine ----
# One request per interval and service; each body holds that service's
# samples only, and all of them add up to what the agent sampled.
rm -rf "$TMP/out"
start_symbolizer "$TMP/symb4.log" --pyroscope "http://127.0.0.1:$psave/pyro/" \
	--pyroscope-format pprof --push-gzip --spool "$TMP/spool4"
"$AGENT" --table-cache "$TMP/tables" --server "$addr" --interval 1 --label rack=r1 --label 'odd key=a,b}' > "$TMP/agent4.log" 2>&1 &
agent=$!
PIDS+=($agent)
sleep 3
kill -INT "$agent"; wait "$agent"
sleep 1
kill -TERM "$symb"; wait "$symb"
cat > "$TMP/checkpprof.py" << 'EOF'
# checkpprof.py LOG: the requests a 'save' receiver kept; prints
# "requests N services N samples N", and what is wrong (exit 1); then
# "workload: inline N crunch N": in the workload's requests, locations with
# inlined functions (two Lines or more) and requests naming its C++ method.
import gzip, re, sys, urllib.parse
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i
def fields(b):
    i = 0
    while i < len(b):
        t, i = varint(b, i)
        f, w = t >> 3, t & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        elif w == 1:
            v = b[i:i + 8]; i += 8
        elif w == 5:
            v = b[i:i + 4]; i += 4
        else:
            raise ValueError('wire type %d' % w)
        yield f, w, v
def ints(w, v):
    if w != 2:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i); out.append(x)
    return out
log = sys.argv[1]
total, services, bad, inline, crunch = 0, set(), [], 0, 0
lines = open(log).read().splitlines()
for n, line in enumerate(lines, 1):
    path = line.split(' ')[0]
    url = urllib.parse.urlparse(path)
    q = dict(urllib.parse.parse_qsl(url.query))
    m = re.fullmatch(r'([A-Za-z0-9_./-]+)\{host_name=([^,{}=]+),rack=r1,odd_key=a_b_\}', q.get('name', ''))
    if url.path != '/pyro/ingest' or not m or q.get('format') != 'pprof' or \
            q.get('sampleRate') != '99' or q.get('spyName') != 'fleetprof' or \
            not int(q['from']) < int(q['until']):
        bad.append('request %d: %s' % (n, path))
        continue
    prof = gzip.decompress(open('%s.%d' % (log, n), 'rb').read())
    strings, samples, locations = [], [], []
    for f, w, v in fields(prof):
        if f == 6:
            strings.append(v.decode())
        elif f == 2:
            samples.append(v)
        elif f == 4:
            locations.append(v)
    if m.group(1) == 'workload':
        crunch += 'fp::Cruncher::crunch(int)' in strings
        inline += sum(1 for loc in locations if sum(1 for f, w, v in fields(loc) if f == 4) > 1)
    seen = set()
    for smp in samples:
        vals, labels = [], {}
        for f, w, v in fields(smp):
            if f == 2:
                vals += ints(w, v)
            elif f == 3:
                lab = dict((lf, lv) for lf, lw, lv in fields(v))
                labels[strings[lab.get(1, 0)]] = strings[lab.get(2, 0)]
        total += vals[0]
        svc = labels.get('container') or labels.get('process_name') or 'unknown_service'
        seen.add(re.sub(r'[^A-Za-z0-9_./-]', '_', svc))
    if seen != {m.group(1)}:
        bad.append('request %d for %s holds samples of %s' % (n, m.group(1), sorted(seen)))
    services.add(m.group(1))
for b in bad[:10]:
    print(b)
print('requests %d services %d samples %d' % (len(lines), len(services), total))
print('workload: inline %d crunch %d' % (inline, crunch))
sys.exit(1 if bad else 0)
EOF
out=$(python3 "$TMP/checkpprof.py" "$TMP/rsave.log")
check pprof-one-service-per-request test $? -eq 0
echo "phase 4: $(echo $out); sampled $(sampled "$TMP/agent4.log")" >&2
check pprof-several-services test "$(echo "$out" | sed -n 's/.* services \([0-9]*\) .*/\1/p')" -ge 2
check pprof-values-add-up test "$(echo "$out" | sed -n 's/.* samples \([0-9]*\)$/\1/p')" -eq "$(sampled "$TMP/agent4.log")"
check pprof-keeps-functions grep -qE '^workload: inline [1-9][0-9]* crunch [1-9]' <<< "$out"
check pprof-pushed-all grep -qE "push pyroscope .*retried 0, dropped 0, permanent failures 0, .*spool 0 requests" "$TMP/symb4.log"

# ---- 5: a forged host name, --push-header-file ----
SEND=$BUILD/tests/nngsend
printf '# the tenant'"'"'s token\nAuthorization: Bearer s3cret-token\r\n' > "$TMP/headers"
chmod 644 "$TMP/headers"
before5=$(grep -c 'auth=Bearer s3cret-token' "$TMP/rsave.log")
start_symbolizer "$TMP/symb5.log" --otlp-endpoint "http://127.0.0.1:$psave" \
	--push-header-file "$TMP/headers" --push-max-attempts 3 --push-max-age 600 \
	--spool "$TMP/spool5"
"$SEND" --hello "$TMP/evil.hello" $'sw1\nfleetprof-symbolizer: FORGED accepted\r\x1b[2K'
check forged-hello-accepted bash -c "'$SEND' '$addr' '$TMP/evil.hello' | grep -qx 'status 0'"
start_agent "$TMP/agent5.log"
sleep 3
kill -INT "$agent"; wait "$agent"
sleep 1
kill -TERM "$symb"; wait "$symb"
after5=$(grep -c 'auth=Bearer s3cret-token' "$TMP/rsave.log")
echo "phase 5: $((after5 - before5)) requests with the file's header" >&2
check host-logged-escaped grep -qF 'from sw1\nfleetprof-symbolizer: FORGED accepted\r\x1b[2K (kernel' "$TMP/symb5.log"
check no-forged-line bash -c "! grep -q '^fleetprof-symbolizer: FORGED' '$TMP/symb5.log'"
check no-control-bytes test "$(LC_ALL=C tr -d '\n\t -~' < "$TMP/symb5.log" | wc -c)" -eq 0
check header-file-warns grep -q "push-header-file .*readable by everyone (mode 644)" "$TMP/symb5.log"
check header-file-sent test "$after5" -gt "$before5"
check header-file-not-logged bash -c "! grep -q s3cret '$TMP/symb5.log'"
check bounds-logged grep -q 'push otlp: .*dropped after 3 answered attempts or 600 s' "$TMP/symb5.log"
printf 'X-A: 1\nAuthorization Bearer s3cret-token\n' > "$TMP/badheaders"
out=$("$SYMB" --listen "$addr" --cache "$TMP/cache" --otlp-endpoint http://127.0.0.1:1 \
	--spool "$TMP/spool6" --push-header-file "$TMP/badheaders" 2>&1)
rc=$?
check header-file-bad-line test $rc -eq 1 -a -n "$(echo "$out" | grep "badheaders: line 2: expected 'Name: value'")"
check header-file-bad-not-logged bash -c "! grep -q s3cret <<< '$out'"

# ---- bad flags ----
bad() { # bad NAME PATTERN ARGS...: exit 2 and the message
	local name=$1 pat=$2 out rc
	shift 2
	out=$("$SYMB" --listen "$addr" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && echo "$out" | grep -q "$pat"; then pass "$name"; else fail "$name" "exit $rc: $out"; fi
}
bad header-crlf 'CR or LF' --otlp-endpoint http://127.0.0.1:1 --push-header $'X-A: b\r\nX-Evil: 1'
bad header-no-colon "expected 'Name: value'" --otlp-endpoint http://127.0.0.1:1 --push-header 'X-A b'
bad header-reserved 'sets this header itself' --otlp-endpoint http://127.0.0.1:1 --push-header 'Content-Length: 5'
bad url-scheme 'invalid --pyroscope' --pyroscope ftp://example.com
bad format 'expected otlp or pprof' --pyroscope http://127.0.0.1:1 --pyroscope-format json
bad spool-max 'invalid --spool-max' --otlp-endpoint http://127.0.0.1:1 --spool-max 0
bad max-attempts 'invalid --push-max-attempts' --otlp-endpoint http://127.0.0.1:1 --push-max-attempts 0
bad max-age 'invalid --push-max-age' --otlp-endpoint http://127.0.0.1:1 --push-max-age 5
bad header-escaped 'X-A: b\\x1b\[2K' --otlp-endpoint http://127.0.0.1:1 --push-header $'X-A: b\x1b[2K'
tail -n 12 "$TMP/symb2.log" >&2
