#!/bin/sh
# install-deps.sh: idempotent installation of everything fleetprof needs to
# build, test and benchmark on Debian 12 (bookworm). Safe to run repeatedly.
set -eu

PKGS="make gcc g++ clang llvm pkg-config
 libbpf-dev bpftool linux-libc-dev
 libnng-dev libmsgpack-dev liblmdb-dev lmdb-utils libelf-dev libdwarf-dev zlib1g-dev
 liblzma-dev xz-utils
 libprotobuf-c-dev protobuf-c-compiler
 libc6-dbg linux-perf libclang-rt-14-dev binutils python3 iproute2 util-linux procps
 libdebuginfod-dev debuginfod elfutils curl
 qemu-system-x86 busybox-static cpio
 redis-server redis-tools"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing (run as root to install)" >&2
	exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
