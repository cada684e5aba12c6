#!/bin/bash
# tls_test.sh: mutual TLS on the agents' link and HTTPS on the symbol
# service, with certificates made here by openssl: a test CA; the
# symbolizer's certificate for 127.0.0.1; a client certificate for this
# host; and three that must be refused: one signed by another CA, one
# expired, and none at all.
#
# The good agent's intervals go agent -> symbolizer (tls+tcp://) ->
# Grafana Pyroscope and are read back from Pyroscope.  Each bad agent is
# refused during the handshake, before any message, and counted in
# fleetprof_connections_refused_total{reason="tls_auth"} on /metrics.
# The agent refuses a symbolizer whose certificate its CA did not sign,
# or that names another host than the one dialled; each says why.
#
# Identity: the host is the one the client certificate names.  An agent
# in a UTS namespace of its own says hello as another host than its
# certificate's (DNS name first, else common name): refused, counted in
# fleetprof_rejected_total{reason="host_mismatch"}, and nothing stored
# under either name; as the certificate's host it is served, and its
# profiles are stored under that name.
#
# HTTPS: `fleetprof upload` verifies the certificate (--ca, or the system
# CAs: refused without), uploads, and debuginfod-find downloads the file
# (libcurl verifies it against the system bundle, replaced in a private
# mount namespace by one that holds the test CA).  The token rules: a
# --http beyond loopback needs a token, --http-token-for-reads guards
# downloads and /v1/missing.
TEST=tls
. tests/e2e/lib.sh
need_root

# ---- certificates ----
C=$TMP/certs
mkdir -p "$C/ca.d"
HOST=$(hostname)
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2> /dev/null; }
# cert NAME CA SUBJECT_CN SAN: NAME.key and NAME.crt, signed by CA, valid a day.
cert() {
	key "$C/$1.key"
	openssl req -new -key "$C/$1.key" -subj "/CN=$3" -out "$C/$1.csr" 2> /dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$4" > "$C/$1.ext"
	openssl x509 -req -in "$C/$1.csr" -CA "$C/$2.crt" -CAkey "$C/$2.key" -CAcreateserial \
		-days 1 -extfile "$C/$1.ext" -out "$C/$1.crt" 2> /dev/null
}
for ca in ca otherca; do
	key "$C/$ca.key"
	openssl req -x509 -new -key "$C/$ca.key" -subj "/CN=fleetprof test $ca" -days 2 \
		-out "$C/$ca.crt" 2> /dev/null
done
# mbedTLS 2.28 (nng's TLS) matches a dialled address against DNS names
# only, so the address is a DNS name too.
# Not localhost: dialled by that name, the symbolizer is not the one its
# certificate names.
cert server ca 127.0.0.1 "DNS:127.0.0.1,IP:127.0.0.1"
cert good ca "$HOST" "DNS:$HOST"
cert stranger otherca "$HOST" "DNS:$HOST"
# host-a by its DNS name (its CN says otherwise); host-c by its CN alone.
cert hosta ca fp-cn-not-host-a "DNS:fp-host-a"
key "$C/hostc.key"
openssl req -new -key "$C/hostc.key" -subj "/CN=fp-host-c" -out "$C/hostc.csr" 2> /dev/null
openssl x509 -req -in "$C/hostc.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
	-days 1 -out "$C/hostc.crt" 2> /dev/null
# noname: neither a DNS name nor a CN.
key "$C/noname.key"
openssl req -new -key "$C/noname.key" -subj "/O=fleetprof test" -out "$C/noname.csr" 2> /dev/null
openssl x509 -req -in "$C/noname.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
	-days 1 -out "$C/noname.crt" 2> /dev/null
# Expired: openssl ca sets both dates.
touch "$C/ca.d/index.txt"
printf '[ca]\ndefault_ca=d\n[d]\ndatabase=%s\nnew_certs_dir=%s\nserial=%s\ndefault_md=sha256\npolicy=p\ncopy_extensions=copy\n[p]\ncommonName=supplied\n' \
	"$C/ca.d/index.txt" "$C/ca.d" "$C/ca.d/serial" > "$C/ca.cnf"
echo 1000 > "$C/ca.d/serial"
key "$C/expired.key"
openssl req -new -key "$C/expired.key" -subj "/CN=$HOST" -out "$C/expired.csr" 2> /dev/null
openssl ca -batch -config "$C/ca.cnf" -cert "$C/ca.crt" -keyfile "$C/ca.key" \
	-startdate 20200101000000Z -enddate 20200102000000Z -in "$C/expired.csr" \
	-out "$C/expired.crt" > /dev/null 2>&1
check certificates-made test -s "$C/server.crt" -a -s "$C/good.crt" -a -s "$C/stranger.crt" \
	-a -s "$C/expired.crt" -a -s "$C/hosta.crt" -a -s "$C/hostc.crt" \
	-a -s "$C/noname.crt"
check expired-is-expired bash -c "! openssl x509 -checkend 0 -noout -in '$C/expired.crt' > /dev/null"

# ---- Pyroscope ----
# Built (about ten minutes the first time) and cached by build.sh.
GO=$(command -v go || echo /usr/local/go/bin/go)
if ! PYRO=$(BUILD=$BUILD GO=$GO tests/pyroscope/build.sh 2> "$TMP/build.log"); then
	fail pyroscope-builds "$(tail -n 1 "$TMP/build.log")"
	exit 0
fi
PPORT=$(free_port)
PURL=http://127.0.0.1:$PPORT
PYROSCOPE=$PYRO tests/pyroscope/serve.sh "$TMP/pyroscope" "$PPORT" > "$TMP/pyroscope.log" 2>&1 &
PIDS+=($!)
pyro_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$PURL/ready")" = 200 ]; }
check pyroscope-ready wait_for 60 pyro_ready

# ---- symbolizer ----
SPORT=$(free_port)
HPORT=$(free_port)
ADDR=tls+tcp://127.0.0.1:$SPORT
HURL=https://127.0.0.1:$HPORT
TOKEN=tls-test-token
FLEETPROF_UPLOAD_TOKEN=$TOKEN "$SYMB" --local-files --listen "$ADDR" --tls-cert "$C/server.crt" \
	--tls-key "$C/server.key" --tls-ca "$C/ca.crt" --http "127.0.0.1:$HPORT" \
	--http-token-for-reads --store "$TMP/store" --cache "$TMP/cache" --out "$TMP/out" \
	--spool "$TMP/spool" --pyroscope "$PURL" > "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
metric() { # metric NAME_AND_LABELS: its value on /metrics
	curl -s --cacert "$C/ca.crt" -H "Authorization: Bearer $TOKEN" "$HURL/metrics" |
		awk -v m="$1" '$1 == m { print $2 }'
}
https_up() { [ -n "$(metric fleetprof_connections_total)" ]; }
check https-metrics wait_for 10 https_up
refused() { metric 'fleetprof_connections_refused_total{reason="tls_auth"}'; }

# ---- refused agents ----
"$WORKLOAD" 300 > /dev/null & wl=$!
PIDS+=($wl)
# bad_agent NAME ARGS...: an agent that must never get its hello answered;
# PASS when the symbolizer counted one more refused handshake.
bad_agent() {
	local name=$1 before after pid more
	shift
	before=$(refused)
	"$AGENT" --table-cache "$TMP/tables" --server "$ADDR" --interval 1 --timeout 1 -p "$wl" --tls-ca "$C/ca.crt" "$@" \
		> "$TMP/agent-$name.log" 2>&1 &
	pid=$!
	PIDS+=($pid)
	more() { [ "$(refused)" -gt "$before" ]; }
	if wait_for 15 more; then pass "$name-refused-counted"; else
		fail "$name-refused-counted" "tls_auth refusals stayed at $before"; fi
	check "$name-agent-says-why" wait_for 15 grep -q 'refused during set-up (TLS' \
		"$TMP/agent-$name.log"
	kill -INT "$pid"
	wait "$pid"
	check "$name-no-session" bash -c "! grep -q 'session .* from' '$TMP/symb.log'"
	check "$name-nothing-acknowledged" grep -q 'acknowledged 0;' "$TMP/agent-$name.log"
}
bad_agent no-client-cert
bad_agent other-ca --tls-cert "$C/stranger.crt" --tls-key "$C/stranger.key"
bad_agent expired --tls-cert "$C/expired.crt" --tls-key "$C/expired.key"
check no-batch-written bash -c "! ls '$TMP'/out/*/*.folded > /dev/null 2>&1"

# wary_agent NAME ADDR CA: an agent with a good certificate that must
# refuse the symbolizer at ADDR, verified against CA.
wary_agent() {
	local pid
	"$AGENT" --table-cache "$TMP/tables" --server "$2" --interval 1 --timeout 1 -p "$wl" --tls-ca "$3" \
		--tls-cert "$C/good.crt" --tls-key "$C/good.key" > "$TMP/agent-$1.log" 2>&1 &
	pid=$!
	PIDS+=($pid)
	check "$1-agent-says-why" wait_for 15 grep -q 'refused during set-up (TLS' \
		"$TMP/agent-$1.log"
	kill -INT "$pid"
	wait "$pid"
	check "$1-no-session" bash -c "! grep -q 'session .* from' '$TMP/symb.log'"
	check "$1-nothing-acknowledged" grep -q 'acknowledged 0;' "$TMP/agent-$1.log"
}
# A symbolizer whose certificate another CA signed...
wary_agent server-of-other-ca "$ADDR" "$C/otherca.crt"
# ... or that names another host than the one dialled (localhost, as
# 127.0.0.1 with tcp4, where the symbolizer listens).
wary_agent server-of-other-name "tls+tcp4://localhost:$SPORT" "$C/ca.crt"

# ---- the good agent, to Pyroscope ----
"$AGENT" --table-cache "$TMP/tables" --server "$ADDR" --interval 1 --timeout 2 -p "$wl" --label fp_test=tls \
	--tls-ca "$C/ca.crt" --tls-cert "$C/good.crt" --tls-key "$C/good.key" \
	> "$TMP/agent-good.log" 2>&1 &
agent=$!
PIDS+=($agent)
resolved() { grep -qsh 'compute_loop;fp::Cruncher::crunch(int)' "$TMP"/out/*/*.folded; }
check good-agent-resolved wait_for 30 resolved
check good-session grep -q "session .* from $HOST" "$TMP/symb.log"
kill -INT "$agent"
wait "$agent"
check good-agent-exit-status test $? -eq 0
check good-agent-acknowledged grep -q 'acknowledged [1-9]' "$TMP/agent-good.log"
render() {
	curl -s -G "$PURL/pyroscope/render" \
		--data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{fp_test="tls"}' \
		--data-urlencode from=now-1h --data-urlencode until=now --data-urlencode format=json \
		-o "$TMP/render.json"
	python3 tests/pyroscope/flamebearer.py "$TMP/render.json" > "$TMP/render.folded" 2> /dev/null
	grep -q 'fp::Cruncher::crunch(int)' "$TMP/render.folded"
}
check pyroscope-has-the-stacks wait_for 30 render

# ---- the host is the certificate's ----
# as_host NAME CERT HOSTNAME: an agent with CERT, in a UTS namespace whose
# host name is HOSTNAME; its pid in $pid.
as_host() {
	unshare -u bash -c "hostname '$3' && exec '$AGENT' --table-cache '$TMP/tables' --server '$ADDR' --interval 1 \
		--timeout 1 -p '$wl' --tls-ca '$C/ca.crt' --tls-cert '$C/$2.crt' \
		--tls-key '$C/$2.key'" > "$TMP/agent-$1.log" 2>&1 &
	pid=$!
	PIDS+=($pid)
}
mismatch() { metric 'fleetprof_rejected_total{reason="host_mismatch"}'; }
before=$(mismatch)
as_host impostor hosta fp-host-b
more_mismatch() { [ "$(mismatch)" -gt "${before:-0}" ]; }
check impostor-refused-counted wait_for 15 more_mismatch
check impostor-agent-says-why wait_for 15 grep -q \
	'refused hello: host fp-host-b is not fp-host-a, the client certificate' "$TMP/agent-impostor.log"
check impostor-logged grep -q 'rejected a message: host fp-host-b is not fp-host-a' "$TMP/symb.log"
kill -INT "$pid"
wait "$pid"
check impostor-no-session bash -c "! grep -q 'session .* from fp-host-' '$TMP/symb.log'"
check impostor-nothing-stored test ! -e "$TMP/out/fp-host-b" -a ! -e "$TMP/out/fp-host-a"
# A certificate that names no host proves none: no hello is taken.
as_host noname noname fp-host-d
check noname-refused wait_for 15 grep -q \
	'refused hello: host fp-host-d: the client certificate names no host' "$TMP/agent-noname.log"
kill -INT "$pid"
wait "$pid"
check noname-nothing-stored test ! -e "$TMP/out/fp-host-d"
for h in a c; do
	as_host "host-$h" "host$h" "fp-host-$h"
	stored() { ls "$TMP/out/fp-host-$h/"*.folded > /dev/null 2>&1; }
	check "host-$h-served" wait_for 30 stored
	check "host-$h-session" grep -q "session .* from fp-host-$h " "$TMP/symb.log"
	kill -INT "$pid"
	wait "$pid"
	check "host-$h-acknowledged" grep -q 'acknowledged [1-9]' "$TMP/agent-host-$h.log"
done
check mismatches-counted test "$(mismatch)" -ge 2
check impostor-host-never-stored test ! -e "$TMP/out/fp-host-b"

# ---- HTTPS symbol service ----
# Not one the agent sampled: the cache has those already.
SO=$BUILD/tests/nngsend
BID=$(readelf -n "$SO" | awk '/Build ID/ { print $3 }')
"$FP" upload --server "$HURL" --token "$TOKEN" "$SO" > "$TMP/up-noca.log" 2>&1
check upload-unknown-ca-refused test $? -ne 0
check upload-unknown-ca-says-why grep -qi 'certificate\|TLS\|crypto\|auth' "$TMP/up-noca.log"
check upload-unknown-ca-stored-nothing test ! -e "$TMP/store/.build-id/${BID:0:2}/${BID:2}"
"$FP" upload --server "$HURL" --token "$TOKEN" --ca "$C/otherca.crt" "$SO" > "$TMP/up-other.log" 2>&1
check upload-other-ca-refused test $? -ne 0
"$FP" upload --server "$HURL" --token "$TOKEN" --ca "$C/ca.crt" "$SO" > "$TMP/up.log" 2>&1
check upload-https test $? -eq 0
check upload-https-stored grep -q 'uploaded 1, failed 0' "$TMP/up.log"
# debuginfod-find (libcurl) trusts the system bundle: in a mount namespace
# of its own, the bundle gets the test CA.
cat /etc/ssl/certs/ca-certificates.crt "$C/ca.crt" > "$C/bundle.crt"
fetch() { # fetch TOKEN: debuginfod-find's exit status
	unshare -m bash -c "mount --bind '$C/bundle.crt' /etc/ssl/certs/ca-certificates.crt &&
		DEBUGINFOD_URLS='$HURL' DEBUGINFOD_CACHE_PATH='$TMP/dcache-$1' \
		${1:+DEBUGINFOD_HEADERS_FILE='$C/headers'} \
		debuginfod-find executable '$BID'" > "$TMP/find-$1.out" 2> "$TMP/find-$1.err"
}
printf 'Authorization: Bearer %s\n' "$TOKEN" > "$C/headers"
fetch token
check debuginfod-find-https cmp -s "$(cat "$TMP/find-token.out")" "$SO"
fetch ""
check download-without-token-refused test ! -s "$TMP/find-.out"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$C/ca.crt" -X POST --data-binary "$BID" \
	"$HURL/v1/missing")
check missing-without-token-401 test "$code" = 401
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$C/ca.crt" -X POST --data-binary "$BID" \
	-H "Authorization: Bearer $TOKEN" "$HURL/v1/missing")
check missing-with-token-200 test "$code" = 200
check plain-http-refused bash -c "! curl -s -o /dev/null 'http://127.0.0.1:$HPORT/metrics'"
kill -TERM "$symb"
wait "$symb"
check symbolizer-exit-status test $? -eq 0
check refusals-logged grep -qE 'refused: TLS authentication ([3-9]|[1-9][0-9]+),' "$TMP/symb.log"

# ---- start-up rules ----
"$SYMB" --listen "tcp://127.0.0.1:$(free_port)" --http "0.0.0.0:$(free_port)" \
	--store "$TMP/store2" --cache "$TMP/cache2" > "$TMP/open.log" 2>&1
check open-http-needs-token test $? -eq 2
check open-http-says-why grep -q 'beyond loopback' "$TMP/open.log"
"$SYMB" --listen "$ADDR" --tls-cert "$C/server.crt" --tls-key "$C/server.key" \
	--cache "$TMP/cache2" > "$TMP/noca.log" 2>&1
check require-client-cert-needs-ca test $? -ne 0
check require-client-cert-says-why grep -q 'no CA file' "$TMP/noca.log"

# ---- optional client certificates ----
# --tls-require-client-cert no: an agent without a certificate is served
# under its hello's host; one that shows a certificate gets that
# certificate's host, as when they are required; one whose certificate
# does not verify (another CA, expired) is refused during the handshake,
# not taken as one without.
OPORT=$(free_port)
OHPORT=$(free_port)
OADDR=tls+tcp://127.0.0.1:$OPORT
"$SYMB" --local-files --listen "$OADDR" --tls-cert "$C/server.crt" --tls-key "$C/server.key" \
	--tls-ca "$C/ca.crt" --tls-require-client-cert no --http "127.0.0.1:$OHPORT" \
	--store "$TMP/store3" --cache "$TMP/cache3" --out "$TMP/out3" > "$TMP/symb-opt.log" 2>&1 &
osymb=$!
PIDS+=($osymb)
ometric() { # ometric NAME_AND_LABELS: its value on this symbolizer's /metrics
	curl -s --cacert "$C/ca.crt" "https://127.0.0.1:$OHPORT/metrics" |
		awk -v m="$1" '$1 == m { print $2 }'
}
ohttps_up() { [ -n "$(ometric fleetprof_connections_total)" ]; }
check opt-https-metrics wait_for 10 ohttps_up
# opt_agent NAME HOSTNAME [CERT]: an agent in a UTS namespace whose host
# name is HOSTNAME, with CERT when given; its pid in $pid.
opt_agent() {
	local certs=""
	[ -n "$3" ] && certs="--tls-cert '$C/$3.crt' --tls-key '$C/$3.key'"
	unshare -u bash -c "hostname '$2' && exec '$AGENT' --table-cache '$TMP/tables' --server '$OADDR' --interval 1 \
		--timeout 1 -p '$wl' --tls-ca '$C/ca.crt' $certs" > "$TMP/agent-$1.log" 2>&1 &
	pid=$!
	PIDS+=($pid)
}
# (a) No certificate: the hello's host.
opt_agent opt-anon fp-opt-anon
ostored() { ls "$TMP/out3/$1/"*.folded > /dev/null 2>&1; }
check opt-no-cert-served wait_for 30 ostored fp-opt-anon
check opt-no-cert-session grep -q "session .* from fp-opt-anon " "$TMP/symb-opt.log"
kill -INT "$pid"
wait "$pid"
check opt-no-cert-acknowledged grep -q 'acknowledged [1-9]' "$TMP/agent-opt-anon.log"
# (b) A good certificate: its host, and no other.
omismatch() { ometric 'fleetprof_rejected_total{reason="host_mismatch"}'; }
before=$(omismatch)
opt_agent opt-impostor fp-host-b hosta
omore_mismatch() { [ "$(omismatch)" -gt "${before:-0}" ]; }
check opt-impostor-refused-counted wait_for 15 omore_mismatch
check opt-impostor-agent-says-why wait_for 15 grep -q \
	'refused hello: host fp-host-b is not fp-host-a, the client certificate' \
	"$TMP/agent-opt-impostor.log"
kill -INT "$pid"
wait "$pid"
check opt-impostor-nothing-stored test ! -e "$TMP/out3/fp-host-b" -a ! -e "$TMP/out3/fp-host-a"
opt_agent opt-host-a fp-host-a hosta
check opt-cert-served wait_for 30 ostored fp-host-a
kill -INT "$pid"
wait "$pid"
# (c) A certificate that does not verify: refused, not served as none.
orefused() { ometric 'fleetprof_connections_refused_total{reason="tls_auth"}'; }
for bad in stranger expired; do
	before=$(orefused)
	opt_agent "opt-$bad" "fp-opt-$bad" "$bad"
	omore_refused() { [ "$(orefused)" -gt "${before:-0}" ]; }
	check "opt-$bad-refused-counted" wait_for 15 omore_refused
	check "opt-$bad-agent-says-why" wait_for 15 grep -q 'refused during set-up (TLS' \
		"$TMP/agent-opt-$bad.log"
	kill -INT "$pid"
	wait "$pid"
	check "opt-$bad-no-session" bash -c "! grep -q 'session .* from fp-opt-$bad' '$TMP/symb-opt.log'"
	check "opt-$bad-nothing-stored" test ! -e "$TMP/out3/fp-opt-$bad"
done
kill -TERM "$osymb"
wait "$osymb"
check opt-symbolizer-exit-status test $? -eq 0
