#!/bin/bash
# upload_test.sh: the symbol service.  `fleetprof upload` sends a build's
# binary and debug file to fleetprof-symbolizer --http, and only once, and
# a frame the symbolizer could not resolve before resolves right after,
# without a restart; wrong tokens, mismatching build-IDs, non-ELF and
# oversized bodies are refused with the right status; /v1/missing and the
# debuginfod API answer (also to the real debuginfod-find); the store is a
# symbol source after a restart with an empty cache; a real debuginfod
# server as --debuginfod upstream resolves a build-ID the symbolizer has
# nowhere else.  Batches are sent over the wire protocol.  No root needed.
TEST=upload
. tests/e2e/lib.sh
SEND=$BUILD/tests/nngsend
TOKEN=e2e-$RANDOM-$RANDOM

for tool in curl debuginfod debuginfod-find gcc objcopy strip readelf nm; do
	if ! command -v "$tool" > /dev/null; then
		fail "tools" "$tool missing (tools/install-deps.sh installs it)"
		exit 0
	fi
done

# program NAME FUNC: an executable built with -g whose main calls FUNC.
program() {
	cat > "$TMP/$1.c" << EOF
int $2(int x) { int s = 0; for (int i = 0; i < x * 1000; i++) s += i ^ x; return s; }
int main(int argc, char **argv) { return $2(argc) == 42; }
EOF
	gcc -g -O1 "$TMP/$1.c" -o "$TMP/$1"
}
build_id() { readelf -n "$1" | awk '/Build ID/ { print $3 }'; }

# The wire protocol by hand (proto/PROTOCOL.md), for batches whose frames
# are in the test programs: mkmsg.py OUT hello SESSION HOST, or mkmsg.py
# OUT batch SESSION SEQ PROGRAM FUNCTION: one frame in FUNCTION, 7 samples.
cat > "$TMP/mkmsg.py" << 'PYTHON'
import struct, subprocess, sys, time

def enc(o):
    if isinstance(o, int):
        if 0 <= o < 128: return bytes([o])
        if -32 <= o < 0: return struct.pack('b', o)
        if o >= 0:
            for lim, tag, fmt in ((1 << 8, 0xcc, '>B'), (1 << 16, 0xcd, '>H'), (1 << 32, 0xce, '>I')):
                if o < lim: return bytes([tag]) + struct.pack(fmt, o)
            return b'\xcf' + struct.pack('>Q', o)
        return b'\xd3' + struct.pack('>q', o)
    if isinstance(o, bytes):
        return b'\xc4' + bytes([len(o)]) + o
    if isinstance(o, str):
        b = o.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b'\xd9' + bytes([len(b)])) + b
    if isinstance(o, list):
        head = bytes([0x90 | len(o)]) if len(o) < 16 else b'\xdc' + struct.pack('>H', len(o))
        return head + b''.join(enc(x) for x in o)
    if isinstance(o, dict):
        return bytes([0x80 | len(o)]) + b''.join(enc(k) + enc(v) for k, v in o.items())
    raise TypeError(o)

def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout

def file_offset(prog, func):
    addr = [int(f[0], 16) for f in (l.split() for l in run('nm', prog).splitlines())
            if len(f) == 3 and f[2] == func][0]
    for f in (l.split() for l in run('readelf', '-lW', prog).splitlines()):
        if f and f[0] == 'LOAD':
            off, va, fsz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= addr < va + fsz:
                return addr - va + off

out, kind, session = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == 'hello':
    msg = [1, 1, {1: session, 2: sys.argv[4], 3: 'boot', 4: 'r', 5: b'', 6: 'e2e', 7: 99, 8: 1}]
else:
    seq, prog, func = int(sys.argv[4]), sys.argv[5], sys.argv[6]
    name = prog.rsplit('/', 1)[-1]
    hexid = [l.split()[2] for l in run('readelf', '-n', prog).splitlines() if 'Build ID' in l][0]
    now = time.time_ns()
    # New ids in every batch: nodes are never redefined within a session.
    msg = [1, 2, {1: session, 2: seq, 3: now - 10**9, 4: now, 5: 10**9 // 99,
                  6: [[seq, 0, bytes.fromhex(hexid), '/opt/app/' + name]],
                  7: [[seq, 4242, 4242, 0, name, name, '']],
                  8: [seq, 0, seq, file_offset(prog, func) + 2],
                  9: [seq, seq, 7]}]
open(out, 'wb').write(enc(msg))
PYTHON

# send PORT HOST SEQ PROGRAM FUNCTION: a hello first when SEQ is 1, then
# one batch; its profile is OUT/HOST/*-SEQ.folded.
send() {
	local port=$1 host=$2 seq=$3 prog=$4 func=$5
	if [ "$seq" = 1 ]; then
		python3 "$TMP/mkmsg.py" "$TMP/hello.msg" hello 77 "$host" || return 1
		for i in $(seq 25); do # until the symbolizer listens
			"$SEND" "tcp://127.0.0.1:$port" "$TMP/hello.msg" | grep -q 'status 0' && break
			[ "$i" = 25 ] && return 1
			sleep 0.2
		done
	fi
	python3 "$TMP/mkmsg.py" "$TMP/batch.msg" batch 77 "$seq" "$prog" "$func" &&
		"$SEND" "tcp://127.0.0.1:$port" "$TMP/batch.msg" | grep -q 'status 0'
}
# folded OUT HOST SEQ: that batch's profile.
# folded OUT HOST SEQ: the interval's profile; the sink writes it after the
# reply, so wait for it a little.
folded() {
	wait_for 10 compgen -G "$1/$2/*-$3.folded" > /dev/null
	cat "$1/$2"/*-"$3".folded 2> /dev/null
}

# wait_http PORT: until the HTTP API answers.
wait_http() {
	local i
	for i in $(seq 50); do
		curl -s -o /dev/null -X POST --data-binary '' "http://127.0.0.1:$1/v1/missing" && return 0
		sleep 0.2
	done
	return 1
}

# A build's output: a stripped binary and its debug file, plus a file that
# is not ELF and a symbolic link loop.
program app app_work
mkdir -p "$TMP/build/bin" "$TMP/build/debug" "$TMP/nodebug"
objcopy --only-keep-debug "$TMP/app" "$TMP/build/debug/app.debug"
strip -o "$TMP/build/bin/app" "$TMP/app"
cp "$TMP/app.c" "$TMP/build/README"
ln -s .. "$TMP/build/debug/loop"
HEX=$(build_id "$TMP/app")

port=$(free_port)
http=$(free_port)
URL=http://127.0.0.1:$http
"$SYMB" --listen "tcp://127.0.0.1:$port" --http "127.0.0.1:$http" --store "$TMP/store" \
	--cache "$TMP/cache" --out "$TMP/out" --upload-token "$TOKEN" \
	--debug-dir "$TMP/nodebug" --no-local-files > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
check http-up wait_http "$http"

# Before the upload the symbolizer has no symbols for app.
check batch-before-upload send "$port" e2e 1 "$TMP/app" app_work
before=$(folded "$TMP/out" e2e 1)
check unresolved-before-upload bash -c '[[ "$1" == "app;app+0x"* && "$1" != *app_work* ]]' _ "$before"

# --- fleetprof upload -----------------------------------------------------
out=$("$FP" upload --server "$URL" --token "$TOKEN" "$TMP/build" 2>&1)
rc=$?
echo "$out" >&2
check upload-exit-0 test $rc -eq 0
check upload-both grep -q 'found 2, already present 0, uploaded 2, failed 0' <<< "$out"
check stored-debuginfo cmp -s "$TMP/build/debug/app.debug" "$TMP/store/.build-id/${HEX:0:2}/${HEX:2}.debug"
check stored-executable cmp -s "$TMP/build/bin/app" "$TMP/store/.build-id/${HEX:0:2}/${HEX:2}"
check no-temporary-files-left test -z "$(ls -A "$TMP/store/.tmp")"
# ... and from the next batch on, without a restart, it has.
check batch-after-upload send "$port" e2e 2 "$TMP/app" app_work
check resolved-after-upload grep -qx 'app;app_work 7' <(folded "$TMP/out" e2e 2)

out=$("$FP" upload --server "$URL" --token "$TOKEN" "$TMP/build" 2>&1)
rc=$?
check second-upload-exit-0 test $rc -eq 0
check second-upload-nothing grep -q 'found 2, already present 2, uploaded 0, failed 0' <<< "$out"

program other other_work
mkdir -p "$TMP/build2"
cp "$TMP/other" "$TMP/build2/"
OTHER=$(build_id "$TMP/other")
out=$("$FP" upload --server "$URL" --token wrong-token "$TMP/build2" 2>&1)
rc=$?
echo "$out" >&2
check wrong-token-fails test $rc -ne 0
check wrong-token-says-401 grep -q '401' <<< "$out"
check wrong-token-not-stored test ! -e "$TMP/store/.build-id/${OTHER:0:2}/${OTHER:2}"
out=$(FLEETPROF_UPLOAD_TOKEN=$TOKEN "$FP" upload --server "$URL" "$TMP/build2" 2>&1)
check token-from-environment grep -q 'uploaded 1, failed 0' <<< "$out"
check unstripped-stored-as-both test -e "$TMP/store/.build-id/${OTHER:0:2}/${OTHER:2}.debug" -a \
	-e "$TMP/store/.build-id/${OTHER:0:2}/${OTHER:2}"
out=$("$FP" upload --server "http://127.0.0.1:$(free_port)" --token "$TOKEN" "$TMP/build2" 2>&1)
rc=$?
check connection-refused-fails test $rc -ne 0
check connection-refused-says-so grep -qi 'connection refused' <<< "$out"
check missing-path-fails bash -c "! '$FP' upload --server '$URL' '$TMP/nonexistent' 2> /dev/null"

# --- the API with curl ----------------------------------------------------
# status WANT NAME CURL-ARGS...: the HTTP status of one request is one of
# WANT; the body is left in $TMP/body.
status() {
	local want=$1 name=$2 got
	shift 2
	got=$(curl -s -o "$TMP/body" -w '%{http_code}' "$@")
	if [[ " $want " == *" $got "* ]]; then pass "$name"; else fail "$name" "HTTP $got: $(head -c 300 "$TMP/body")"; fi
}
auth=(-H "Authorization: Bearer $TOKEN")
status 400 upload-build-id-mismatch -X POST "${auth[@]}" --data-binary @"$TMP/build/debug/app.debug" \
	"$URL/v1/upload?build_id=0123456789abcdef0123456789abcdef01234567"
check mismatch-message grep -q '"error": "build-ID mismatch' "$TMP/body"
status 200 upload-build-id-match -X POST "${auth[@]}" --data-binary @"$TMP/build/debug/app.debug" \
	"$URL/v1/upload?build_id=$HEX"
check existing-is-exists grep -q "{\"build_id\": \"$HEX\", \"status\": \"exists\"" "$TMP/body"
status 400 upload-not-elf -X POST "${auth[@]}" --data-binary @"$TMP/app.c" "$URL/v1/upload"
check not-elf-json-error grep -q '^{"error": "not an ELF file"}' "$TMP/body"
# No GNU build-ID: stored under its synthetic id (common/fileid.h: fb1d02
# for one derived from the contents), the id agents report for it.
gcc -O1 -Wl,--build-id=none "$TMP/app.c" -o "$TMP/nobuildid"
status 200 upload-no-build-id -X POST "${auth[@]}" --data-binary @"$TMP/nobuildid" "$URL/v1/upload"
check no-build-id-synthetic grep -q '"build_id": "fb1d0201[0-9a-f]\{32\}", "status": "stored"' "$TMP/body"
status 401 upload-no-token -X POST --data-binary @"$TMP/app" "$URL/v1/upload"
status 401 upload-wrong-token -X POST -H "Authorization: Bearer x$TOKEN" --data-binary @"$TMP/app" "$URL/v1/upload"
status 400 upload-bad-build-id-param -X POST "${auth[@]}" --data-binary @"$TMP/app" "$URL/v1/upload?build_id=../x"

printf '%s\n%s\n\n%s\n' "$HEX" 00112233445566778899aabbccddeeff00112233 "$OTHER" > "$TMP/ask"
status 200 missing-answers -X POST --data-binary @"$TMP/ask" "$URL/v1/missing"
check missing-lists-only-unknown test "$(cat "$TMP/body")" = 00112233445566778899aabbccddeeff00112233
status 400 missing-rejects-garbage -X POST --data-binary 'not-hex' "$URL/v1/missing"
python3 -c "import sys; sys.stdout.write(''.join('%040x\n' % i for i in range(100001)))" > "$TMP/ask-too-many"
status "400 413" missing-at-most-100000 -X POST --data-binary @"$TMP/ask-too-many" "$URL/v1/missing"

status 200 get-debuginfo "$URL/buildid/$HEX/debuginfo"
check get-debuginfo-exact-bytes cmp -s "$TMP/body" "$TMP/build/debug/app.debug"
check get-content-type bash -c "curl -sI '$URL/buildid/$HEX/debuginfo' | grep -qi '^content-type: application/octet-stream'"
status 200 get-executable "$URL/buildid/$HEX/executable"
check get-executable-exact-bytes cmp -s "$TMP/body" "$TMP/build/bin/app"
check head-length bash -c "curl -sI '$URL/buildid/$HEX/executable' | grep -qi '^content-length: $(stat -c %s "$TMP/build/bin/app")'"
status 404 get-unknown "$URL/buildid/00112233445566778899aabbccddeeff00112233/debuginfo"
status 404 get-source-not-served "$URL/buildid/$HEX/source/x.c"
status "400 404" traversal-encoded --path-as-is "$URL/buildid/..%2f..%2fetc/debuginfo"
status "400 404" traversal-plain --path-as-is "$URL/buildid/../../../etc/passwd/debuginfo"
check traversal-nothing-served bash -c "! grep -q root: '$TMP/body'"
status 400 uppercase-hex-refused "$URL/buildid/${HEX^^}/debuginfo"

# The real debuginfod client against our API.
fetched=$(DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$TMP/dfcache debuginfod-find -v debuginfo "$HEX" 2> "$TMP/dfind.log")
cat "$TMP/dfind.log" >&2
check debuginfod-find-debuginfo cmp -s "$fetched" "$TMP/build/debug/app.debug"
fetched=$(DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$TMP/dfcache debuginfod-find executable "$HEX" 2>&1)
check debuginfod-find-executable cmp -s "$fetched" "$TMP/build/bin/app"

# Four uploads of one new build-ID at once: one file, whole.
program twin twin_work
TWIN=$(build_id "$TMP/twin")
curls=()
for i in 1 2 3 4; do
	curl -s -o "$TMP/twin.$i" -X POST "${auth[@]}" --data-binary @"$TMP/twin" "$URL/v1/upload" &
	curls+=($!)
done
wait "${curls[@]}"
check concurrent-one-stored test "$(cat "$TMP"/twin.? | grep -c '"stored"')" -eq 1
check concurrent-rest-exist test "$(cat "$TMP"/twin.? | grep -c '"exists"')" -eq 3
check concurrent-file-whole cmp -s "$TMP/twin" "$TMP/store/.build-id/${TWIN:0:2}/${TWIN:2}"

# --- too large --------------------------------------------------------------
port2=$(free_port)
http2=$(free_port)
"$SYMB" --local-files --listen "tcp://127.0.0.1:$port2" --http "127.0.0.1:$http2" --store "$TMP/store2" \
	--cache "$TMP/cache2" --out "$TMP/out2" --max-upload 1 > "$TMP/symb2.log" 2>&1 &
symb2=$!
PIDS+=($symb2)
wait_http "$http2"
cp "$TMP/build/debug/app.debug" "$TMP/big.debug"
head -c $((2 * 1024 * 1024)) /dev/zero >> "$TMP/big.debug"
status 413 upload-too-large -X POST --data-binary @"$TMP/big.debug" "http://127.0.0.1:$http2/v1/upload"
status 413 upload-too-large-no-expect -X POST -H 'Expect:' --data-binary @"$TMP/big.debug" "http://127.0.0.1:$http2/v1/upload"
check too-large-json grep -q '"error": "upload of' "$TMP/body"
mkdir -p "$TMP/bigdir" && cp "$TMP/big.debug" "$TMP/bigdir/"
out=$("$FP" upload --server "http://127.0.0.1:$http2" "$TMP/bigdir" 2>&1)
rc=$?
echo "$out" >&2
check cli-too-large-fails test $rc -ne 0
check cli-too-large-says-413 grep -q 'too large for the server (413' <<< "$out"
status 200 small-still-accepted -X POST --data-binary @"$TMP/build/bin/app" "http://127.0.0.1:$http2/v1/upload"
kill -TERM "$symb2"; wait "$symb2"
check too-large-counted grep -q 'too large 3' "$TMP/symb2.log"

kill -TERM "$symb"; wait "$symb"
check server-exits-0 test $? -eq 0
check uploads-counted grep -qE 'uploads: accepted [0-9]+ \(stored [4-9]' "$TMP/symb.log"
check unauthorized-counted grep -qE 'unauthorized [3-9]' "$TMP/symb.log"
check rejections-logged grep -q 'upload refused (401)' "$TMP/symb.log"

# --- the store as a symbol source -------------------------------------------
# A new symbolizer with an empty cache and no HTTP finds "other" (uploaded
# above, unstripped: stored as debug file and executable) in the store.
port4=$(free_port)
"$SYMB" --listen "tcp://127.0.0.1:$port4" --store "$TMP/store" --cache "$TMP/cache4" \
	--out "$TMP/out4" --debug-dir "$TMP/nodebug" --no-local-files > "$TMP/symb4.log" 2>&1 &
symb4=$!
PIDS+=($symb4)
check store-batch send "$port4" e2e-store 1 "$TMP/other" other_work
kill -TERM "$symb4"; wait "$symb4"
check resolved-from-store grep -qx 'other;other_work 7' <(folded "$TMP/out4" e2e-store 1)

# --- a real debuginfod server upstream --------------------------------------
program far far_away_fn
mkdir -p "$TMP/upstream"
objcopy --only-keep-debug "$TMP/far" "$TMP/upstream/far.debug"
FAR=$(build_id "$TMP/far")
dport=$(free_port)
env -u DEBUGINFOD_URLS debuginfod -F "$TMP/upstream" -p "$dport" -d "$TMP/debuginfod.sqlite" > "$TMP/debuginfod.log" 2>&1 &
dpid=$!
PIDS+=($dpid)
indexed=0
for i in $(seq 300); do # it scans the directory in the background
	if curl -sf -o /dev/null "http://127.0.0.1:$dport/buildid/$FAR/debuginfo"; then indexed=1; break; fi
	sleep 0.2
done
check upstream-indexed test $indexed -eq 1

# far's build-ID is in neither the debug directory, nor a store, nor on
# the mapping's path.
port3=$(free_port)
"$SYMB" --listen "tcp://127.0.0.1:$port3" --cache "$TMP/cache3" --out "$TMP/out3" \
	--debug-dir "$TMP/nodebug" --no-local-files --debuginfod "http://127.0.0.1:$dport" \
	> "$TMP/symb3.log" 2>&1 &
symb3=$!
PIDS+=($symb3)
check upstream-batch send "$port3" e2e-upstream 1 "$TMP/far" far_away_fn
kill -TERM "$symb3"; wait "$symb3"
check resolved-through-upstream grep -qx 'far;far_away_fn 7' <(folded "$TMP/out3" e2e-upstream 1)
check upstream-fetch-logged grep -q "debuginfod: fetched $FAR" "$TMP/symb3.log"
check upstream-cached-by-libdebuginfod test -s "$TMP/cache3/debuginfod/$FAR/debuginfo"
if ! grep -qx 'far;far_away_fn 7' <(folded "$TMP/out3" e2e-upstream 1); then
	cat "$TMP"/out3/*/*.folded "$TMP/symb3.log" "$TMP/debuginfod.log" 2> /dev/null | tail -n 30 >&2
fi
kill -TERM "$dpid"; wait "$dpid" 2> /dev/null
tail -n 5 "$TMP/symb.log" >&2
