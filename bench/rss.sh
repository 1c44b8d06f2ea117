#!/usr/bin/env bash
# Idle memory of `nodelet runtime` and of `nodelet up` (no pods, empty manifest folder, no CNI),
# each on private temp dirs, sockets and cgroup root: VmRSS, RssFile and RssAnon after they have
# been idle for --idle seconds, then which packages the binary's resident pages belong to
# (bench/pages). Stops and removes exactly what it started.
#
# The binary's pages are dropped from the page cache first (written back, then
# `dd iflag=nocache`), so that both processes fault them in from disk as after a reboot. A binary
# just written by the linker sits in the page cache in folios of whatever size the writes made,
# and a fault maps the whole folio: the same binary then measured up to 2 MB more or less RssFile
# than after a drop, by how it was written. Pages another running process maps stay cached.
#
#   sudo bench/rss.sh [--bin PATH | --tags grpcnotrace] [--idle 30] [--top 15] [--depth 0]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin="" idle=30 top=15 depth=0 tags=grpcnotrace
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --idle) idle=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --tags) tags=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d /tmp/nodelet-rss.XXXXXX)
if [ -z "$bin" ]; then
  (cd "$here/.." && go build -tags "$tags" -o "$tmp/nodelet" ./cmd/nodelet)
  bin=$tmp/nodelet
fi
(cd "$here/.." && go build -o "$tmp/pages" ./bench/pages)
cg=nodelet-rss-$$
pids=()
cleanup() {
  set +e +o pipefail # a failed step (nothing mounted to unmount) must not skip the rest
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
  grep -F " $tmp/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" || true; done
  for c in /sys/fs/cgroup/*/"$cg"; do [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

report() { # report NAME PID
  printf '%s: ' "$1"
  awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %.1f MB  ", $1, $2/1024}' "/proc/$2/status"
  echo
  "$tmp/pages" -pid "$2" -top "$top" -depth "$depth"
  echo
}

mkdir -p "$tmp/rt" "$tmp/up/manifests"
sync "$bin"
dd if="$bin" iflag=nocache count=0 status=none
"$bin" runtime --root "$tmp/rt/root" --state "$tmp/rt/state" --listen "unix://$tmp/rt/state/cri.sock" \
  --no-network >"$tmp/rt.log" 2>&1 &
pids+=($!)
"$bin" up --root "$tmp/up/root" --state "$tmp/up/state" --listen "unix://$tmp/up/state/cri.sock" \
  --root-dir "$tmp/up/root/agent" \
  --manifests "$tmp/up/manifests" --api-socket "$tmp/up/state/agent.sock" --healthz-port 0 \
  --pod-logs-dir "$tmp/up/logs" --cgroup-root "/$cg" --cgroup-parent "/$cg/pods" --no-network \
  --streaming-address 127.0.0.1:0 >"$tmp/up.log" 2>&1 &
pids+=($!)
sleep "$idle"
for i in 0 1; do
  if ! kill -0 "${pids[$i]}" 2>/dev/null; then
    echo "process $i exited early:" >&2; cat "$tmp/rt.log" "$tmp/up.log" >&2; exit 1
  fi
done
report "nodelet runtime" "${pids[0]}"
report "nodelet up" "${pids[1]}"
