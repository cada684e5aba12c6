#!/bin/bash
# mkinitramfs.sh OUT.cpio BIN...: a minimal initramfs for the kernel matrix.
#
# Holds busybox (static), the programs given (in /opt/fp, under their own
# names), every shared library they need (found with ldd, at the path ldd
# reports, symbolic links of the names kept) with the dynamic loader, and
# tests/kernels/init as /init.  Nothing else: no modules, no /etc.
# Uncompressed: the kernel unpacks it faster than it would gunzip it under
# software emulation.  Needs root (mknod of /dev/console).
set -euo pipefail

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

for bin in "$@"; do
	[ -x "$bin" ] || die "$bin missing or not executable"
	cp "$bin" "$root/opt/fp/$(basename "$bin")"
	ldd "$bin" > "$root/ldd.txt" 2>&1 || continue # static
	if grep -q 'not found' "$root/ldd.txt"; then
		die "$bin: $(grep 'not found' "$root/ldd.txt" | head -n 3 | tr '\n' ' ')"
	fi
	# "libx.so => /path (0x...)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)".
	sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' \
		"$root/ldd.txt" | while read -r lib; do copy_lib "$lib"; done
	rm -f "$root/ldd.txt"
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet --owner=0:0) > "$out.new"
mv "$out.new" "$out"
