#!/bin/bash
# manpages_test.sh: the man pages of docs/man against the programs they
# describe.  Every page is mandoc -T lint clean; the flags of each page
# and of its program's --help agree both ways, the options listed in the
# order of the SYNOPSIS (tests/e2e/manflags.py); man -l renders each page;
# make install puts programs and pages where man finds them, and make
# uninstall takes them away.  Needs no root.
TEST=manpages
. tests/e2e/lib.sh
MAN=docs/man

# The pages and the --help that each describes.
declare -A HELP=(
	[fleetprof.1]="$FP --help"
	[fleetprof-record.1]="$FP record --help"
	[fleetprof-report.1]="$FP report --help"
	[fleetprof-symbolize.1]="$FP symbolize --help"
	[fleetprof-upload.1]="$FP upload --help"
	[fleetprof-loadgen.1]="$FP loadgen --help"
	[fleetprof-agent.8]="$AGENT --help"
	[fleetprof-symbolizer.8]="$SYMB --help"
)
PAGES=("${!HELP[@]}")

# Every command of `fleetprof --help` has its page, and every page in
# docs/man is one of the pages above.
cmds=$($FP --help | awk '/^commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }')
check commands-listed test -n "$cmds"
for c in $cmds; do
	check "page:fleetprof-$c.1" test -n "${HELP[fleetprof-$c.1]}"
done
for p in "$MAN"/*; do
	check "known:$(basename "$p")" test -n "${HELP[$(basename "$p")]}"
done

for p in "${PAGES[@]}"; do
	check "exists:$p" test -s "$MAN/$p"
	# shellcheck disable=SC2086
	${HELP[$p]} > "$TMP/$p.help" 2>&1
	check "help:$p" grep -q '^usage:' "$TMP/$p.help"
done

# mandoc -T lint: nothing at warning level or above; style messages too,
# but for cross-references to pages this machine has not installed
# (mandoc looks them up in its own database, which man-db does not keep).
for p in "${PAGES[@]}"; do
	out=$(mandoc -T lint -W warning "$MAN/$p" 2>&1)
	check "lint:$p" test $? -eq 0 -a -z "$out"
	[ -z "$out" ] || echo "$out"
	out=$(mandoc -T lint -W style "$MAN/$p" 2>&1 | grep -v -e 'referenced manual not found' -e 'mandoc.db')
	check "lint-style:$p" test -z "$out"
	[ -z "$out" ] || echo "$out"
done
# ... and catches a broken one: a list left open.
mkdir -p "$TMP/broken"
sed '0,/^\.El$/{/^\.El$/d}' "$MAN/fleetprof-agent.8" > "$TMP/broken/fleetprof-agent.8"
check lint-catches bash -c "! mandoc -T lint -W warning '$TMP/broken/fleetprof-agent.8' > /dev/null 2>&1"

# Cross-references among our pages point at pages that exist, and
# fleetprof(1) refers to every other page.
xrefs_exist() {
	local bad=0 name sect
	while read -r name sect; do
		[ -f "$MAN/$name.$sect" ] || { echo "$1: .Xr $name $sect: no such page"; bad=1; }
	done < <(sed -n 's/^\.Xr \(fleetprof[a-z-]*\) \([0-9]\).*/\1 \2/p' "$MAN/$1")
	return $bad
}
for p in "${PAGES[@]}"; do
	check "xrefs:$p" xrefs_exist "$p"
done
for p in "${PAGES[@]}"; do
	[ "$p" = fleetprof.1 ] && continue
	check "seealso:$p" grep -qx "\.Xr ${p%.*} ${p##*.}.*" "$MAN/fleetprof.1"
done

# Flags, both ways, and the order of the DESCRIPTION's items.
for p in "${PAGES[@]}"; do
	check "flags:$p" python3 tests/e2e/manflags.py "$MAN/$p" "$TMP/$p.help" "$TMP"/*.help
done

# The comparison fails when it should: a flag that --help gains and the
# page lacks (another helper adds one), a page item removed, a flag of the
# page that --help does not know, items out of order, an item without the
# short flag --help pairs with it.
mutant() { # mutant NAME SED_SCRIPT: a copy of the agent's page, changed
	mkdir -p "$TMP/mutant-$1"
	sed "$2" "$MAN/fleetprof-agent.8" > "$TMP/mutant-$1/fleetprof-agent.8"
}
catches() { # catches WHAT PAGE HELP: manflags.py fails and says WHAT
	local out
	out=$(python3 tests/e2e/manflags.py "$2" "$3" "$TMP"/*.help)
	[ $? -eq 1 ] && grep -qF -e "$1" <<< "$out"
}
AH=$TMP/fleetprof-agent.8.help
{ cat "$AH"; echo "      --table-ttl SECONDS keep unwind tables this long"; } > "$TMP/new-flag.help"
check catches-new-help-flag catches '--table-ttl: an option of --help, no .It' \
	"$MAN/fleetprof-agent.8" "$TMP/new-flag.help"
mutant noitem '/^\.It Fl -no-fetch$/d'
check catches-missing-item catches '--no-fetch: in SYNOPSIS, no .It' "$TMP/mutant-noitem/fleetprof-agent.8" "$AH"
mutant unknown 's/^\.Op Fl -syslog$/&\n.Op Fl -bogus/'
check catches-unknown-flag catches '--bogus: in SYNOPSIS or an .It, not printed' \
	"$TMP/mutant-unknown/fleetprof-agent.8" "$AH"
mutant order '/^\.Op Fl -syslog$/d; s/^\.Fl -server Ar addr$/&\n.Op Fl -syslog/'
check catches-order catches 'out of the order of SYNOPSIS' "$TMP/mutant-order/fleetprof-agent.8" "$AH"
mutant short 's/^\.It Fl F , Fl -frequency Ar hz$/.It Fl -frequency Ar hz/'
check catches-short-flag catches '--frequency: --help pairs it with -F' "$TMP/mutant-short/fleetprof-agent.8" "$AH"

# man -l renders each page, without a message, with its name and sections.
for p in "${PAGES[@]}"; do
	MANWIDTH=80 man -l "$MAN/$p" > "$TMP/$p.txt" 2> "$TMP/$p.err"
	check "man-l:$p" test $? -eq 0 -a ! -s "$TMP/$p.err"
	check "rendered:$p" grep -q "^SYNOPSIS" "$TMP/$p.txt"
	check "rendered-name:$p" grep -q "${p%.*}" "$TMP/$p.txt"
	[ -s "$TMP/$p.err" ] && cat "$TMP/$p.err"
done

# make install into a staging directory: the command in bin, the daemons
# in sbin, the same bytes as the build's, the pages where man looks;
# make uninstall leaves nothing behind.
ROOT=$TMP/root
makeflags() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "$@" BUILD="$BUILD" PREFIX=/usr DESTDIR="$ROOT"; }
check install makeflags install
check install-bin cmp "$FP" "$ROOT/usr/bin/fleetprof"
check install-agent cmp "$AGENT" "$ROOT/usr/sbin/fleetprof-agent"
check install-symbolizer cmp "$SYMB" "$ROOT/usr/sbin/fleetprof-symbolizer"
check install-exec test -x "$ROOT/usr/bin/fleetprof" -a -x "$ROOT/usr/sbin/fleetprof-agent" \
	-a -x "$ROOT/usr/sbin/fleetprof-symbolizer"
check installed-runs bash -c "'$ROOT/usr/bin/fleetprof' --version | grep -q '^fleetprof '"
for p in "${PAGES[@]}"; do
	s=${p##*.}
	check "install-page:$p" cmp "$MAN/$p" "$ROOT/usr/share/man/man$s/$p"
	check "man-finds:$p" test "$(man -M "$ROOT/usr/share/man" -w "$s" "${p%.*}" 2> /dev/null)" = \
		"$ROOT/usr/share/man/man$s/$p"
done
n=$(find "$ROOT" -type f | wc -l)
check install-count test "$n" -eq $((${#PAGES[@]} + 3))
check uninstall makeflags uninstall
check uninstall-empty test -z "$(find "$ROOT" -type f)"
