#!/usr/bin/env bash
# The embedded default with the example pods: makes the offline demo image (busybox from this
# machine; nothing is downloaded), imports it, and runs `nodelet up` on examples/manifests.
# Leave it running; in another terminal: nodelet get pods, nodelet logs hello-$(hostname) -c ticker.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "up.sh: nodelet makes namespaces and mounts: run as root (sudo $0)" >&2; exit 1; }
export PATH=$PATH:/usr/local/go/bin:/usr/local/bin
root=${NODELET_ROOT:-/var/lib/nodelet}
tar=$root/demo-busybox.tar
if [ ! -f "$tar" ]; then
  mkdir -p "$root"
  (cd "$here" && go run ./hack/images demo-tar "$tar.tmp" docker.io/library/busybox:latest) && mv "$tar.tmp" "$tar"
fi
nodelet image --root "$root" import "$tar" >/dev/null
exec nodelet up --root "$root" --manifests "$here/examples/manifests" "$@"
