#!/bin/sh
# install-deps.sh: idempotent installation of everything fleetprof needs to
# build, test and benchmark on Debian 12 (bookworm). Safe to run repeatedly.
# usage: install-deps.sh [run]
#   (none)  build, test and benchmark (make test, make bench, CI)
#   run     build and run only (make, make run): no test tools
set -eu

# What building and running need (libc6-dbg: libc's symbols, so that a
# profile names libc's functions; python3: the demo of make run).
RUN_PKGS="make gcc clang llvm pkg-config binutils
 libbpf-dev bpftool linux-libc-dev
 cmake patch libmbedtls-dev libmsgpack-dev liblmdb-dev libelf-dev libdwarf-dev zlib1g-dev
 liblzma-dev libprotobuf-c-dev protobuf-c-compiler libdebuginfod-dev curl
 libc6-dbg python3"
# The rest is for tests and benchmarks.  mandoc, man-db:
# tests/e2e/manpages_test.sh lints the man pages and renders them with
# man -l.  libbpf-tools: offcputime, the off-CPU oracle.  librbd1-dbg: a
# real detached debug file of 137 MB (full DWARF) that
# tests/e2e/fleet_test.sh and the fleet benchmark have the symbolizer
# ingest.
PKGS="$RUN_PKGS g++ lmdb-utils xz-utils
 linux-perf libclang-rt-14-dev iproute2 util-linux procps
 debuginfod elfutils clang-format-14 mandoc man-db
 qemu-system-x86 busybox-static cpio
 redis-server redis-tools
 debootstrap gdb python3-venv inotify-tools
 prometheus python3-prometheus-client librbd1-dbg libbpf-tools"
mode=${1:-all}
case $mode in
run) PKGS=$RUN_PKGS ;;
all) ;;
*)
	echo "usage: install-deps.sh [run]" >&2
	exit 2
	;;
esac

# py-spy (the Python tests compare with it), from PyPI, in a venv of its
# own made with Debian's python3; the binary is linked to /usr/local/bin.
PYSPY_VERSION=0.4.3
PYSPY_VENV=/opt/fleetprof-py-spy
PYSPY=/usr/local/bin/py-spy

# nng: Debian 12's 1.5.2, from its source package (checked against its
# sha256), with tools/nng-peer-names.patch, which adds the peer
# certificate's common name and DNS name as pipe options (nng 1.6 has the
# first; no newer nng's source is reachable from Debian 12) and makes a
# server with optional client certificates refuse one that does not
# verify.  Built static with TLS (bookworm's mbedtls 2.28) into
# NNG_PREFIX, which the Makefile links; each change of the patch gets a
# prefix of its own (-fp1, -fp2, ...), so that it builds anew.
NNG_VERSION=1.5.2
NNG_SHA256=f8b25ab86738864b1f2e3128e8badab581510fa8085ff5ca9bb980d317334c46
NNG_URL=http://deb.debian.org/debian/pool/main/n/nng/nng_$NNG_VERSION.orig.tar.gz
NNG_PATCH=$(dirname "$0")/nng-peer-names.patch
NNG_PREFIX=$(sed -n 's/^NNG_PREFIX *:= *//p' "$(dirname "$0")/../Makefile")

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
pyspy_ok() {
	[ -x "$PYSPY" ] && "$PYSPY" --version 2>/dev/null | grep -qx "py-spy $PYSPY_VERSION"
}
nng_ok() {
	[ -f "$NNG_PREFIX/lib/libnng.a" ] && [ -f "$NNG_PREFIX/include/nng/nng.h" ]
}
# py-spy is a test oracle: only for the full set
[ "$mode" = run ] && pyspy_ok() { true; }
[ -z "$missing" ] && pyspy_ok && nng_ok && exit 0

if [ "$(id -u)" != 0 ]; then
	[ -n "$missing" ] && echo "install-deps: missing packages:$missing (run as root to install)" >&2
	pyspy_ok || echo "install-deps: missing py-spy $PYSPY_VERSION at $PYSPY (run as root to install)" >&2
	nng_ok || echo "install-deps: missing nng $NNG_VERSION at $NNG_PREFIX (run as root to build)" >&2
	exit 1
fi
if [ -n "$missing" ]; then
	echo "install-deps: installing$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
	# the tests want promtool only, not a Prometheus server running
	if command -v systemctl > /dev/null; then
		systemctl disable --now prometheus > /dev/null 2>&1 || true
	fi
fi
if ! pyspy_ok; then
	echo "install-deps: installing py-spy $PYSPY_VERSION in $PYSPY_VENV" >&2
	[ -x "$PYSPY_VENV/bin/pip" ] || /usr/bin/python3 -m venv "$PYSPY_VENV"
	"$PYSPY_VENV/bin/pip" install -q --disable-pip-version-check "py-spy==$PYSPY_VERSION"
	ln -sf "$PYSPY_VENV/bin/py-spy" "$PYSPY"
	pyspy_ok
fi
if ! nng_ok; then
	echo "install-deps: building nng $NNG_VERSION (patched) into $NNG_PREFIX" >&2
	src=$(mktemp -d /tmp/fleetprof-nng.XXXXXX)
	trap 'rm -rf "$src"' EXIT
	curl -sSf -o "$src/nng.tar.gz" "$NNG_URL"
	echo "$NNG_SHA256  $src/nng.tar.gz" | sha256sum -c --quiet -
	tar xzf "$src/nng.tar.gz" -C "$src"
	patch -s -d "$src/nng-$NNG_VERSION" -p1 < "$NNG_PATCH"
	cmake -S "$src/nng-$NNG_VERSION" -B "$src/build" -Wno-dev \
		-DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
		-DCMAKE_INSTALL_PREFIX="$NNG_PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
		-DBUILD_SHARED_LIBS=OFF -DNNG_ENABLE_TLS=ON -DNNG_TESTS=OFF \
		-DNNG_TOOLS=OFF -DNNG_ENABLE_NNGCAT=OFF > "$src/cmake.log" 2>&1 || { tail -20 "$src/cmake.log" >&2; exit 1; }
	cmake --build "$src/build" -j2 > "$src/build.log" 2>&1 || { tail -20 "$src/build.log" >&2; exit 1; }
	cmake --install "$src/build" > /dev/null
	nng_ok
fi
