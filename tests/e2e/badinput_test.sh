#!/bin/bash
# badinput_test.sh: hostile messages to the symbolizer and bad flags to
# every binary.  The server rejects, counts and keeps serving.
TEST=badinput
. tests/e2e/lib.sh
SEND=$BUILD/tests/nngsend

port=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --cache "$TMP/cache" --out "$TMP/out" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
sleep 0.5

"$SEND" --hello "$TMP/hello"
expect() { # expect NAME PATTERN FILE
	local out
	out=$("$SEND" "$addr" "$3" 2>&1)
	if echo "$out" | grep -q "$2"; then pass "$1"; else fail "$1" "$out"; fi
}
expect valid-hello 'status 0' "$TMP/hello"
: > "$TMP/empty"
expect empty-message 'status 2' "$TMP/empty"
# Random bytes after 0xc1, which msgpack never uses: random bytes alone
# start like a message with another version now and then (1 run in 30).
{ printf '\xc1'; head -c 4095 /dev/urandom; } > "$TMP/garbage"
expect garbage 'status 2' "$TMP/garbage"
size=$(stat -c %s "$TMP/hello")
ok=1
for n in $(seq 1 $((size - 1))); do
	head -c "$n" "$TMP/hello" > "$TMP/trunc"
	"$SEND" "$addr" "$TMP/trunc" | grep -q 'status 2' || ok=0
done
check every-truncation-rejected test $ok -eq 1
printf '\x93\x63\x01\x80' > "$TMP/version"
expect wrong-version 'unsupported protocol version' "$TMP/version"
printf '\x93\x01\x4d\x80' > "$TMP/type"
expect unknown-type 'unknown message type' "$TMP/type"
printf '\x93\x01\x02\xdd\xff\xff\xff\xff' > "$TMP/hugecount"
expect huge-declared-count 'status 2' "$TMP/hugecount"
# Over the 64 MiB limit: nng drops the connection; the server stays up.
head -c $((65 * 1024 * 1024)) /dev/zero > "$TMP/oversized"
"$SEND" "$addr" "$TMP/oversized" > /dev/null 2>&1
# Not even the SP protocol: raw bytes on the TCP port.
python3 -c "import socket,os; s=socket.create_connection(('127.0.0.1',$port)); s.sendall(os.urandom(8192)); s.close()" 2> /dev/null
expect still-serving 'status 0' "$TMP/hello"
kill -TERM "$symb"; wait "$symb"
check server-survived test $? -eq 0
if grep -qE 'rejected: malformed [1-9][0-9]*, version 1, type 1' "$TMP/symb.log"; then
	pass rejections-counted
else
	fail rejections-counted "$(grep -o 'rejected: [^;]*' "$TMP/symb.log" | tail -n 1)"
fi

# Bad flags: a clear message and exit status 2.
badflag() { # badflag NAME COMMAND...
	local name=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && [ -n "$out" ]; then pass "flags:$name"; else fail "flags:$name" "exit $rc: $out"; fi
}
badflag agent-no-server "$AGENT"
badflag agent-zero-hz "$AGENT" --server tcp://127.0.0.1:1 -F 0
badflag agent-bad-hz "$AGENT" --server tcp://127.0.0.1:1 -F abc
badflag agent-bad-interval "$AGENT" --server tcp://127.0.0.1:1 --interval -5
badflag agent-bad-label "$AGENT" --server tcp://127.0.0.1:1 --label novalue
badflag agent-unknown "$AGENT" --bogus
badflag agent-bad-second-server "$AGENT" --server tcp://127.0.0.1:1 --server bogus://x
badflag agent-too-many-servers "$AGENT" $(for i in $(seq 17); do echo --server tcp://127.0.0.1:$i; done)
badflag agent-zero-failover-after "$AGENT" --server tcp://127.0.0.1:1 --failover-after 0
badflag agent-bad-failback "$AGENT" --server tcp://127.0.0.1:1 --failback -1
badflag agent-table-cache-mb-over "$AGENT" --server tcp://127.0.0.1:1 --table-cache-mb 65537
badflag agent-table-cache-mb-bad "$AGENT" --server tcp://127.0.0.1:1 --table-cache-mb x
badflag agent-table-cache-empty "$AGENT" --server tcp://127.0.0.1:1 --table-cache ''
badflag agent-off-cpu-stacks-under "$AGENT" --server tcp://127.0.0.1:1 --off-cpu --off-cpu-stacks 9
badflag agent-off-cpu-stacks-bad "$AGENT" --server tcp://127.0.0.1:1 --off-cpu --off-cpu-stacks x
badflag symbolizer-table-rate-zero "$SYMB" --listen tcp://127.0.0.1:1 --table-rate 0
badflag loadgen-spread-over "$FP" loadgen --server tcp://127.0.0.1:1 --devices 1 --seconds 1 \
	--spread 3601
badflag symbolizer-no-listen "$SYMB"
badflag symbolizer-unknown "$SYMB" --listen tcp://127.0.0.1:1 --bogus
badflag cli-no-command "$FP"
badflag cli-unknown-command "$FP" frobnicate
badflag record-zero-duration "$FP" record -d 0
badflag record-bad-pid "$FP" record -p x
badflag record-off-cpu-stacks-over "$FP" record --off-cpu --off-cpu-stacks 100001
# (an extra argument is a command to run, as perf takes it: record_test)
badflag record-duration-and-command "$FP" record -d 1 true
for b in "$AGENT" "$SYMB" "$FP" "$FP record"; do
	check "help:$(basename ${b// /-})" bash -c "$b --help | grep -q usage"
done
"$SYMB" --listen bogus://x --cache "$TMP/c2" > "$TMP/bad-listen.log" 2>&1
check symbolizer-bad-address bash -c "[ $? -ne 0 ] && grep -q 'cannot listen' '$TMP/bad-listen.log'"
