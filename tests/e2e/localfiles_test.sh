#!/bin/bash
# localfiles_test.sh: the symbolizer reads the files at the paths agents
# report only with --local-files, and then only regular files: a FIFO
# (whose open() used to block the one symbol worker, and every agent's
# symbols behind it) and a symbolic link are refused and counted, and a
# regular file after them still gets its table.
TEST=localfiles
. tests/e2e/lib.sh
SEND=$BUILD/tests/nngsend

build_id() { readelf -n "$1" | awk '/Build ID/ { print $3; exit }'; }
metric() { # metric HPORT NAME{LABELS}: its value, 0 when absent
	curl -sf "http://127.0.0.1:$1/metrics" | awk -v k="fleetprof_$2" '$1 == k { v = $2 } END { print v + 0 }'
}
metric_ge() { [ "$(metric "$1" "$2")" -ge "$3" ]; } # metric_ge HPORT NAME MIN
# session ADDR NAME N PATH ID: a hello and one batch of session N with a
# mapping at PATH of build-ID ID; both replies in $TMP/NAME.replies
session() {
	"$SEND" --hello "$TMP/$2.hello" nngsend "$3"
	"$SEND" --batch 1 "$TMP/$2.batch" "$3" "$4" "$5"
	{ "$SEND" "$1" "$TMP/$2.hello"; "$SEND" "$1" "$TMP/$2.batch"; } > "$TMP/$2.replies"
}

cp "$BUILD/fleetprof" "$TMP/app"
cp "$BUILD/fleetprof-agent" "$TMP/other"
ln -s "$TMP/other" "$TMP/link"
mkfifo "$TMP/fifo"
app_id=$(build_id "$TMP/app")
other_id=$(build_id "$TMP/other")
[ -n "$app_id" ] && [ -n "$other_id" ] || fail build-ids "readelf found none"

# With --local-files and one symbol worker.
port=$(free_port)
hport=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --local-files --listen "$addr" --http "127.0.0.1:$hport" --store "$TMP/store" \
	--cache "$TMP/cache" --out "$TMP/out" --debug-dir "$TMP/nodebug" --symbol-workers 1 \
	> "$TMP/symb.log" 2>&1 &
symb=$!
PIDS+=($symb)
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$hport/metrics" || fail start "$(cat "$TMP/symb.log")"
session "$addr" fifo 1 "$TMP/fifo" aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
session "$addr" link 2 "$TMP/link" "$other_id"
session "$addr" app 3 "$TMP/app" "$app_id"
for s in fifo link app; do
	check "answered:$s" test "$(tr '\n' ' ' < "$TMP/$s.replies")" = "status 0 status 0 "
done
# The app's table comes from its path: the worker is not stuck on the FIFO.
if wait_for 30 metric_ge "$hport" 'symbol_hits_total{source="local"}' 1; then
	pass regular-file-after-fifo
else
	fail regular-file-after-fifo "no table from the local file: the worker is stuck"
fi
# Both searches, the symbols' and the unwind table's, may try a path (the
# table's runs beside the symbols' when it comes first): each refusal counts.
wait_for 10 metric_ge "$hport" symbol_paths_refused_total 2
check fifo-and-link-refused metric_ge "$hport" symbol_paths_refused_total 2
# Nothing was read through the link (its target has symbols and CFI):
# the app is the one local file with symbols and a table.
check link-not-followed test "$(metric "$hport" 'symbol_hits_total{source="local"}')" -eq 1
check link-no-table test "$(metric "$hport" unwind_tables_compiled_total)" -eq 1
kill -TERM "$symb"
wait "$symb"
check server-exits test $? -eq 0

# By default the server reads no file at a reported path.
port=$(free_port)
hport=$(free_port)
addr=tcp://127.0.0.1:$port
"$SYMB" --listen "$addr" --http "127.0.0.1:$hport" --store "$TMP/store" --cache "$TMP/cache2" \
	--out "$TMP/out2" --debug-dir "$TMP/nodebug" > "$TMP/symb2.log" 2>&1 &
symb=$!
PIDS+=($symb)
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$hport/metrics" || fail start2 "$(cat "$TMP/symb2.log")"
session "$addr" default 4 "$TMP/app" "$app_id"
check default:answered test "$(tr '\n' ' ' < "$TMP/default.replies")" = "status 0 status 0 "
wait_for 30 metric_ge "$hport" symbol_ingest_failed_total 1
check default:searched test "$(metric "$hport" symbol_ingest_failed_total)" -eq 1
check default:local-not-asked test "$(metric "$hport" 'symbol_hits_total{source="local"}')" -eq 0 \
	-a "$(metric "$hport" 'symbol_misses_total{source="local"}')" -eq 0
kill -TERM "$symb"
wait "$symb"
