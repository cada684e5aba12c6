#!/bin/bash
# fetch.sh [SUITE...]: the kernels SONiC ships, from Debian's archive.
#
# For each suite (default: bullseye bookworm trixie) takes the kernel that
# the suite's linux-image-amd64 metapackage currently depends on (the
# suite plus its security updates), downloads that one .deb with a private
# apt configuration (the machine's apt setup is neither read nor changed),
# and keeps only its vmlinuz:
#
#   $BUILD/kernels/SUITE/vmlinuz   the kernel image
#   $BUILD/kernels/SUITE/release   its release (uname -r), e.g. 6.1.0-37-amd64
#   $BUILD/kernels/SUITE/package   package=version of the image .deb
#
# A suite whose vmlinuz is already there is not fetched again (no network).
set -euo pipefail

BUILD=${BUILD:-build}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

[ $# -gt 0 ] || set -- bullseye bookworm trixie
top=$(mkdir -p "$BUILD/kernels" && cd "$BUILD/kernels" && pwd)

die() { echo "fetch.sh: $*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb tar; do
	command -v "$tool" > /dev/null || die "$tool not found"
done
[ -r "$KEYRING" ] || die "$KEYRING missing (apt-get install debian-archive-keyring)"

fetch_suite() {
	local suite=$1 out=$top/$1 apt=$top/apt/$1 pkg ver deb rel tmp
	if [ -s "$out/vmlinuz" ] && [ -s "$out/release" ] && [ -s "$out/package" ]; then
		echo "fetch.sh: $suite: $(cat "$out/package") (cached)" >&2
		return 0
	fi
	rm -rf "$apt"
	mkdir -p "$apt/etc/apt.conf.d" "$apt/etc/sources.list.d" "$apt/etc/preferences.d" \
		"$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
	: > "$apt/state/status"
	cat > "$apt/etc/sources.list" <<-EOF
		deb [signed-by=$KEYRING] $MIRROR $suite main
		deb [signed-by=$KEYRING] $SECURITY $suite-security main
	EOF
	# Everything under Dir::Etc is private, so none of the machine's
	# apt.conf.d snippets (hooks, extra index targets) apply.
	cat > "$apt/apt.conf" <<-EOF
		Dir::Etc "$apt/etc/";
		Dir::State "$apt/state/";
		Dir::State::status "$apt/state/status";
		Dir::Cache "$apt/cache/";
		Dir::Log "$apt/log/";
		APT::Architecture "amd64";
		APT::Architectures { "amd64"; };
		Acquire::Languages "none";
		Acquire::Retries "3";
	EOF
	export APT_CONFIG=$apt/apt.conf
	apt-get -q update > "$apt/update.log" 2>&1 || { cat "$apt/update.log" >&2; die "$suite: apt-get update failed"; }
	# An unreachable mirror is only a warning to apt-get update.
	if grep -qE '^(Err:|E:|W: Failed to fetch)' "$apt/update.log"; then
		grep -E '^(Err:|E:|W:)' "$apt/update.log" | head -n 4 >&2
		die "$suite: apt-get update: $(grep -E '^(E:|W: Failed)' "$apt/update.log" | head -n 1)"
	fi

	# The metapackage's candidate depends on exactly one versioned image.
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1) || true
	[ -n "$pkg" ] || die "$suite: linux-image-amd64 has no linux-image-*-amd64 dependency"
	ver=$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p') || true
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "$suite: no candidate for $pkg"

	(cd "$apt/debs" && apt-get -q download "$pkg=$ver" > "$apt/download.log" 2>&1) ||
		{ cat "$apt/download.log" >&2; die "$suite: download of $pkg=$ver failed"; }
	deb=$(find "$apt/debs" -name "${pkg}_*.deb" | head -n 1)
	[ -n "$deb" ] || die "$suite: no .deb after download"

	tmp=$(mktemp -d "$top/.extract.XXXXXX")
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
	set -- "$tmp"/boot/vmlinuz-*
	[ -s "$1" ] || die "$suite: no vmlinuz in $deb"
	rel=${1##*/vmlinuz-}
	mkdir -p "$out"
	mv "$1" "$out/vmlinuz.new"
	echo "$rel" > "$out/release"
	echo "$pkg=$ver" > "$out/package"
	mv "$out/vmlinuz.new" "$out/vmlinuz"
	rm -rf "$tmp" "$apt"
	unset APT_CONFIG
	echo "fetch.sh: $suite: $pkg=$ver ($rel)" >&2
}

for suite in "$@"; do
	case $suite in
	*[!a-z]* | "") die "bad suite name '$suite'" ;;
	esac
	fetch_suite "$suite"
done
rmdir "$top/apt" 2> /dev/null || true
