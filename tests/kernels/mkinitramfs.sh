#!/bin/bash
# mkinitramfs.sh [--python PY] [--file FILE]... OUT.cpio BIN...: a minimal
# initramfs for the kernel matrix.
#
# Holds busybox (static), the programs given (in /opt/fp, under their own
# names), every shared library they need (found with ldd, at the path ldd
# reports, symbolic links of the names kept) with the dynamic loader, and
# tests/kernels/init as /init.  Nothing else: no modules, no /etc.
# Uncompressed: the kernel unpacks it faster than it would gunzip it under
# software emulation.  Needs root (mknod of /dev/console).
#
# --python PY: a CPython interpreter at its own path (so that it finds its
# prefix), its shared libraries, and only the standard library modules
# that `PY -S -I` imports from files at start-up (3.11 freezes the others;
# `encodings` is not), with their cached bytecode when the host has it,
# and the landmark files of its prefix.
# --file FILE: FILE in /opt/fp as it is (a script for the interpreter).
set -euo pipefail

python="" files=()
while [ $# -gt 0 ]; do
	case $1 in
	--python) python=$2; shift 2 ;;
	--file) files+=("$2"); shift 2 ;;
	*) break ;;
	esac
done
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
BUSYBOX=${BUSYBOX:-/bin/busybox}
die() { echo "mkinitramfs.sh: $*" >&2; exit 1; }

[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (apt-get install busybox-static)"
file -L "$BUSYBOX" 2> /dev/null | grep -q 'statically linked' ||
	ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic' || die "$BUSYBOX is not static"
command -v cpio > /dev/null || die "cpio missing"

root=$(mktemp -d /tmp/fpk-initramfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,opt/fp,etc}
cp "$BUSYBOX" "$root/bin/busybox"
cp "$here/init" "$root/init"
chmod 755 "$root/init"
mknod -m 600 "$root/dev/console" c 5 1
mknod -m 666 "$root/dev/null" c 1 3

# /lib, /lib64 (on Debian symbolic links into /usr) keep their layout.
for l in /lib /lib64; do
	if [ -L "$l" ] && [ ! -e "$root$l" ]; then
		t=$(readlink "$l")
		case $t in /*) mkdir -p "$root$t" ;; *) mkdir -p "$root$(dirname "$l")/$t" ;; esac
		ln -s "$t" "$root$l"
	fi
done

# copy_lib PATH: the file and, when PATH is a symbolic link, the link too.
copy_lib() {
	local p real
	p=$(readlink -f "$(dirname "$1")")/$(basename "$1") # directories resolved
	[ -e "$root$p" ] && return 0
	mkdir -p "$root$(dirname "$p")"
	real=$(readlink -f "$p")
	if [ "$real" != "$p" ]; then
		mkdir -p "$root$(dirname "$real")"
		[ -e "$root$real" ] || cp "$real" "$root$real"
		ln -s "$real" "$root$p"
	else
		cp "$p" "$root$p"
	fi
}

# copy_libs BIN: the shared libraries BIN needs, and the loader.
copy_libs() {
	ldd "$1" > "$root/ldd.txt" 2>&1 || { rm -f "$root/ldd.txt"; return 0; } # static
	if grep -q 'not found' "$root/ldd.txt"; then
		die "$1: $(grep 'not found' "$root/ldd.txt" | head -n 3 | tr '\n' ' ')"
	fi
	# "libx.so => /path (0x...)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)".
	sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' \
		"$root/ldd.txt" | while read -r lib; do copy_lib "$lib"; done
	rm -f "$root/ldd.txt"
}

for bin in "$@"; do
	[ -x "$bin" ] || die "$bin missing or not executable"
	cp "$bin" "$root/opt/fp/$(basename "$bin")"
	copy_libs "$bin"
done

for f in "${files[@]}"; do
	[ -r "$f" ] || die "$f missing"
	cp "$f" "$root/opt/fp/$(basename "$f")"
done

if [ -n "$python" ]; then
	[ -x "$python" ] || die "$python missing or not executable"
	mkdir -p "$root$(dirname "$python")"
	cp "$python" "$root$python"
	copy_libs "$python"
	# The modules start-up loaded from files (frozen and built-in ones have
	# no path for an origin), each with its .pyc when there is one: the
	# source's time stamp is kept (cp -p), so that the .pyc stays valid.
	env -i "$python" -S -I -c '
import sys
for m in list(sys.modules.values()):
    s = getattr(m, "__spec__", None)
    for p in (getattr(s, "origin", None), getattr(s, "cached", None)):
        if p and p.startswith("/"):
            print(p)' > "$root/pyfiles.txt" || die "$python -S -I does not start"
	grep -q '/encodings/__init__\.py$' "$root/pyfiles.txt" ||
		die "$python: no encodings/__init__.py among the modules it loaded: $(tr '\n' ' ' < "$root/pyfiles.txt")"
	while read -r f; do
		[ -e "$f" ] || continue # a .pyc the host never wrote
		mkdir -p "$root$(dirname "$f")"
		cp -p "$f" "$root$f"
	done < "$root/pyfiles.txt"
	rm -f "$root/pyfiles.txt"
	# The landmarks by which it finds its prefix (os.py; os itself is
	# frozen) and exec prefix (lib-dynload), else it warns at each start.
	stdlib=$(env -i "$python" -S -I -c 'import os; print(os.path.dirname(os.__file__))')
	dynload=$(env -i "$python" -S -I -c 'import sys; print([p for p in sys.path if p.endswith("/lib-dynload")][0])')
	mkdir -p "$root$stdlib" "$root$dynload"
	cp -p "$stdlib/os.py" "$root$stdlib/os.py"
fi

(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet --owner=0:0) > "$out.new"
mv "$out.new" "$out"
