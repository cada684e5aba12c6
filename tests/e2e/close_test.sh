#!/bin/bash
# close_test.sh: the symbolizer exits promptly on SIGTERM however its
# agents' connections left it.  Once a symbolizer hung at exit in
# nng_close after many connections had been reset (nng 1.5.2 closes
# pipes in one reaper thread).  Each round, raw SP-over-TCP clients
# (scripted here, no nng) open ROUND_CONNS connections to a fresh
# symbolizer: a third send a hello and reset the connection before the
# reply (as an nng client does with a reply over its receive limit), a
# third send a hello and stop reading, a third send half a message; then
# SIGTERM, with all of them still open.  PASS when every round exits with
# status 0 within EXIT_S seconds; a symbolizer that does not is shown
# with gdb (every thread's stack) and killed.
TEST=close
. tests/e2e/lib.sh

ROUNDS=${ROUNDS:-20}
ROUND_CONNS=${ROUND_CONNS:-150}
EXIT_S=${EXIT_S:-15}
"$BUILD/tests/nngsend" --hello "$TMP/hello.msg" close-test
check hello-made test -s "$TMP/hello.msg"

# clients PORT HELLO N: N connections as above, held until killed.
clients() {
	python3 - "$@" << 'EOF'
import socket, struct, sys
port, hello, n = int(sys.argv[1]), open(sys.argv[2], "rb").read(), int(sys.argv[3])
# SP header of a REQ (0x30) peer of a REP (0x31); a message is its
# 64-bit big-endian length, then a request id with its top bit set.
header = b"\x00SP\x00\x00\x30\x00\x00"
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(header)
    s.recv(8)
    body = struct.pack(">I", 0x80000000 | (i + 1)) + hello
    msg = struct.pack(">Q", len(body)) + body
    if i % 3 == 0:
        s.sendall(msg)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # reset before the reply
    elif i % 3 == 1:
        s.sendall(msg)  # never reads its reply
        held.append(s)
    else:
        s.sendall(msg[: len(msg) // 2])  # half a message
        held.append(s)
print("ready", flush=True)
sys.stdin.read()
EOF
}

hung=0
for round in $(seq "$ROUNDS"); do
	port=$(free_port)
	"$SYMB" --listen "tcp://127.0.0.1:$port" --cache "$TMP/cache" --out "$TMP/out" \
		> "$TMP/symb-$round.log" 2>&1 &
	symb=$!
	PIDS+=($symb)
	up() { grep -qs 'listening on' "$TMP/symb-$round.log"; }
	if ! wait_for 10 up; then
		fail "round-$round-starts" "$(tail -n 1 "$TMP/symb-$round.log")"
		continue
	fi
	coproc CLIENTS { clients "$port" "$TMP/hello.msg" "$ROUND_CONNS"; }
	cpid=$CLIENTS_PID
	read -r -t 30 ready <&"${CLIENTS[0]}"
	[ "$ready" = ready ] || fail "round-$round-clients" "the clients did not connect"
	kill -TERM "$symb"
	gone() { ! kill -0 "$symb" 2> /dev/null; }
	if ! wait_for "$EXIT_S" gone; then
		hung=$((hung + 1))
		fail "round-$round-exits" "still running $EXIT_S s after SIGTERM"
		gdb -p "$symb" -batch -ex 'thread apply all bt' > "$TMP/hang-$round.txt" 2>&1
		grep -E '^#|^Thread' "$TMP/hang-$round.txt" | head -n 60
		kill -9 "$symb"
	fi
	wait "$symb"
	status=$?
	[ "$hung" -gt 0 ] || [ "$status" -eq 0 ] ||
		fail "round-$round-exit-status" "exited $status: $(tail -n 1 "$TMP/symb-$round.log")"
	kill "$cpid" 2> /dev/null
	wait "$cpid" 2> /dev/null
done
check every-round-exited test "$hung" -eq 0
