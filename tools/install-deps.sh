#!/bin/sh
# install-deps.sh: idempotent installation of everything fleetprof needs to
# build, test and benchmark on Debian 12 (bookworm). Safe to run repeatedly.
set -eu

# librbd1-dbg: a real detached debug file of 137 MB (full DWARF) that
# tests/e2e/fleet_test.sh and the fleet benchmark have the symbolizer ingest.
PKGS="make gcc g++ clang llvm pkg-config
 libbpf-dev bpftool linux-libc-dev
 libnng-dev libmsgpack-dev liblmdb-dev lmdb-utils libelf-dev libdwarf-dev zlib1g-dev
 liblzma-dev xz-utils
 libprotobuf-c-dev protobuf-c-compiler
 libc6-dbg linux-perf libclang-rt-14-dev binutils python3 iproute2 util-linux procps
 libdebuginfod-dev debuginfod elfutils curl
 qemu-system-x86 busybox-static cpio
 redis-server redis-tools
 debootstrap gdb python3-venv inotify-tools
 prometheus python3-prometheus-client librbd1-dbg"

# py-spy (the Python tests compare with it), from PyPI, in a venv of its
# own made with Debian's python3; the binary is linked to /usr/local/bin.
PYSPY_VERSION=0.4.3
PYSPY_VENV=/opt/fleetprof-py-spy
PYSPY=/usr/local/bin/py-spy

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
pyspy_ok() {
	[ -x "$PYSPY" ] && "$PYSPY" --version 2>/dev/null | grep -qx "py-spy $PYSPY_VERSION"
}
[ -z "$missing" ] && pyspy_ok && exit 0

if [ "$(id -u)" != 0 ]; then
	[ -n "$missing" ] && echo "install-deps: missing packages:$missing (run as root to install)" >&2
	pyspy_ok || echo "install-deps: missing py-spy $PYSPY_VERSION at $PYSPY (run as root to install)" >&2
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
