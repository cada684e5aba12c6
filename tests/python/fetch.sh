#!/bin/bash
# fetch.sh: the CPython interpreters the Python tests profile, with the DWARF
# of each interpreter's own build (Debian's -dbg packages), cached.
#
#   3.9   Debian bullseye, a minbase tree: chroot $FPY_CACHE/bullseye python3.9
#   3.11  Debian bookworm, a minbase tree: chroot $FPY_CACHE/bookworm python3.11
#         (the machine's own /usr/bin/python3.11 may be a build whose -dbg
#         the archive no longer has: the archive keeps only the newest)
#   3.13  Debian trixie, a minbase tree: chroot $FPY_CACHE/trixie python3.13
#   3.12  no Debian suite served here ships it; pyenv's 3.12 and 3.13
#         builds are listed too when the machine has them (with DWARF)
#
# Trees are made with debootstrap --variant=minbase from the suite itself
# (not its security updates: the interpreter and its -dbg must be one
# build); debootstrap is installed with apt-get when missing, and the
# machine's apt setup is not used.  A tree already in the cache is not made
# again (no network).  It ends by writing $FPY_CACHE/pythons.txt, one line
# per interpreter, and prints it:
#
#   VERSION SOURCE ROOT INTERPRETER RUNTIME-ELF BUILD-ID DEBUG-FILE
#
# ROOT is the tree to chroot into ("/" for the machine's own), INTERPRETER
# the interpreter's path inside ROOT, RUNTIME-ELF (a host path) the ELF file
# holding _PyRuntime and the eval loop (the interpreter itself for Debian's
# statically linked ones, libpython for pyenv's), BUILD-ID its GNU build-ID
# and DEBUG-FILE (a host path) the file with its DWARF.
#
# Environment: FPY_CACHE (default /var/cache/fleetprof-python),
# DEBIAN_MIRROR, PYENV_ROOT (default /root/.pyenv).  Needs root (debootstrap).
set -euo pipefail

CACHE=${FPY_CACHE:-/var/cache/fleetprof-python}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# A change here makes every tree be made again.
TREE_FORMAT=1

die() { echo "fetch.sh: $*" >&2; exit 1; }
say() { echo "fetch.sh: $*" >&2; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

need_tools() {
	local missing="" t
	for t in "$@"; do
		command -v "$t" > /dev/null || missing="$missing $t"
	done
	[ -z "$missing" ] && return 0
	say "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing > /dev/null
}

# build_id FILE: the GNU build-ID of an ELF file, as hex.
build_id() {
	readelf -n "$1" 2> /dev/null | sed -n 's/^ *Build ID: \([0-9a-f]*\)$/\1/p' | head -n 1
}

# debug_file ROOT BUILDID: the separate debug file for BUILDID under ROOT.
debug_file() {
	local f=$1/usr/lib/debug/.build-id/${2:0:2}/${2:2}.debug
	[ -s "$f" ] && echo "$f"
}

# tree SUITE VERSION: a minbase tree of SUITE with pythonVERSION and its -dbg.
tree() {
	local suite=$1 ver=$2 out=$CACHE/$1 stamp tmp
	stamp="format=$TREE_FORMAT suite=$suite packages=python$ver,python$ver-dbg"
	if [ -f "$out/.fleetprof-tree" ] && [ "$(cat "$out/.fleetprof-tree")" = "$stamp" ] &&
		[ -x "$out/usr/bin/python$ver" ]; then
		say "$suite: python$ver (cached)"
		return 0
	fi
	need_tools debootstrap
	[ -r "$KEYRING" ] || die "$KEYRING missing (apt-get install debian-archive-keyring)"
	rm -rf "$CACHE/.$suite.new"
	tmp=$CACHE/.$suite.new
	say "$suite: debootstrap --variant=minbase with python$ver, python$ver-dbg"
	if ! debootstrap --variant=minbase --keyring="$KEYRING" \
		--include="python$ver,python$ver-dbg" "$suite" "$tmp" "$MIRROR" \
		> "$CACHE/$suite.debootstrap.log" 2>&1; then
		tail -n 20 "$CACHE/$suite.debootstrap.log" >&2
		grep -E '^W: ' "$tmp/debootstrap/debootstrap.log" 2> /dev/null | tail -n 10 >&2 || true
		die "$suite: debootstrap failed (log: $CACHE/$suite.debootstrap.log)"
	fi
	# Nothing in the tree runs as a service; apt's package cache is not needed.
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages
	echo "$stamp" > "$tmp/.fleetprof-tree"
	rm -rf "$out"
	mv "$tmp" "$out"
	rm -f "$CACHE/$suite.debootstrap.log"
}

need_tools readelf
tree bullseye 3.9
tree bookworm 3.11
tree trixie 3.13

# The table.
list=$CACHE/pythons.txt.new
: > "$list"
row() { # row VERSION SOURCE ROOT INTERPRETER RUNTIME-ELF DEBUGFILE-OR-ROOT
	local ver=$1 src=$2 root=$3 interp=$4 elf dbg id
	elf=$(readlink -f "$5")
	[ -x "$root/${interp#/}" ] || die "$ver: $root$interp missing"
	id=$(build_id "$elf")
	[ -n "$id" ] || die "$ver: $elf has no build-ID"
	if [ -d "$6" ]; then
		dbg=$(debug_file "$6" "$id") ||
			die "$ver: no DWARF for $elf (build-ID $id) under $6/usr/lib/debug"
	else
		dbg=$6
	fi
	echo "$ver $src $root $interp $elf $id $dbg" >> "$list"
}
for v in 3.9:bullseye 3.11:bookworm 3.13:trixie; do
	t=$CACHE/${v#*:}
	row "${v%:*}" "debian-${v#*:}" "$t" "/usr/bin/python${v%:*}" "$t/usr/bin/python${v%:*}" "$t"
done
# No Debian suite served here ships 3.12, and no registry package carries a
# 3.12 interpreter (the npm "portable python" packages only point at
# downloads elsewhere).  A machine image with pyenv's builds has one, built
# from source with its DWARF in libpython: use it when it is there.
PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
for d in "$PYENV_ROOT"/versions/3.12.* "$PYENV_ROOT"/versions/3.13.*; do
	[ -d "$d" ] || continue
	v=${d##*/}
	lib=$d/lib/libpython${v%.*}.so.1.0
	[ -x "$d/bin/python${v%.*}" ] && [ -f "$lib" ] || continue
	readelf -S "$lib" 2> /dev/null | grep -q '\.debug_info' || continue
	row "${v%.*}" "pyenv-$v" / "$d/bin/python${v%.*}" "$lib" "$lib"
done
mv "$list" "$CACHE/pythons.txt"
echo "# version source root interpreter runtime-elf build-id debug-file"
cat "$CACHE/pythons.txt"
if ! grep -q '^3\.12 ' "$CACHE/pythons.txt"; then
	say "3.12: no interpreter on this machine (none is obtainable from the registries)"
fi
