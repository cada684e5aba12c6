#!/bin/bash
# serve.sh DIR HTTP_PORT [FLAG...]: runs the test Pyroscope server (built by
# build.sh, or $PYROSCOPE if set) in the foreground as one process with every
# module (target "all"), on loopback only, keeping all its state under DIR.
# Extra flags are Pyroscope's own and come last, so they win.
#
# Pyroscope's defaults would listen on every interface (gRPC 9095, memberlist
# 7946), advertise the first non-loopback address in its rings, push its own
# profiles to itself and report usage statistics to the internet; the flags
# below turn all of that to loopback or off. GET /ready answers 200 once it
# can take data (a second or two after start).
set -eu -o pipefail

if [ $# -lt 2 ]; then
	echo "usage: serve.sh DIR HTTP_PORT [FLAG...]" >&2
	exit 2
fi
dir=$1
http=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${PYROSCOPE:-$("$here/build.sh")}

port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
grpc=$(port)
gossip=$(port)
lo=127.0.0.1

mkdir -p "$dir/db" "$dir/store" "$dir/compactor" "$dir/sync"
cd "$dir" # relative default paths land here too
exec "$bin" \
	-target=all \
	-server.http-listen-address=$lo -server.http-listen-port="$http" \
	-server.grpc-listen-address=$lo -server.grpc-listen-port="$grpc" \
	-memberlist.bind-addr=$lo -memberlist.bind-port="$gossip" \
	-memberlist.advertise-addr=$lo -memberlist.advertise-port="$gossip" \
	-memberlist.join=$lo:"$gossip" \
	-distributor.ring.instance-addr=$lo \
	-ingester.lifecycler.addr=$lo \
	-store-gateway.sharding-ring.instance-addr=$lo \
	-compactor.ring.instance-addr=$lo \
	-query-scheduler.ring.instance-addr=$lo \
	-query-frontend.instance-addr=$lo \
	-overrides-exporter.ring.instance-addr=$lo \
	-ingester.min-ready-duration=0s \
	-usage-stats.enabled=false \
	-self-profiling.disable-push=true \
	-tracing.enabled=false \
	-storage.backend=filesystem \
	-storage.filesystem.dir="$dir/store" \
	-pyroscopedb.data-path="$dir/db" \
	-compactor.data-dir="$dir/compactor" \
	-blocks-storage.bucket-store.sync-dir="$dir/sync" \
	"$@"
