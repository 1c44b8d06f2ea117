#!/usr/bin/env bash
# CPU of an idle node with N running pods: `nodelet up` (agent and runtime in one process, pods
# from a manifest folder), then the upstream kubelet on Debian's containerd with the same
# manifests, in the same run. Each pod is one busybox container sleeping. Once all N run and
# have settled, CPU time (utime+stime from /proc/PID/stat) is read over --window seconds for the
# daemons and, separately, for the per-pod helpers (nodelet: conmon; containerd: its shims and
# pause processes). Prints % of one CPU and the daemons' RSS.
#
#   sudo bench/idle.sh [--pods 50,100,250] [--window 60] [--settle 15] [--runtimes nodelet,kubelet]
#
# Everything runs on its own temp dirs, sockets, cgroup root and CNI bridges (nlidle0 on
# 10.94.0.0/16, ctrdidle0 on 10.95.0.0/16) and is stopped and removed at exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../hack/kube/lib.sh
. "$here/../hack/kube/lib.sh"
# shellcheck source=../hack/kube/kubelet-lib.sh
. "$here/../hack/kube/kubelet-lib.sh"

pods=50,100,250 window=60 settle=15 runtimes=nodelet,kubelet
while [ $# -gt 0 ]; do
  case "$1" in
    --pods) pods=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --runtimes) runtimes=$2; shift 2 ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
IFS=, read -r -a counts <<<"$pods"
IFS=, read -r -a names <<<"$runtimes"
maxpods=10
for n in "${counts[@]}"; do [ "$n" -lt "$maxpods" ] || maxpods=$((n + 10)); done
image=registry.k8s.io/e2e-test-images/busybox:1.29-2
hz=$(getconf CLK_TCK)

nl_init idle-bench
command -v crictl >/dev/null || nl_die "crictl missing: run hack/install.sh"
nl_registry

manifest() { # manifest DIR NAME
  cat >"$1/.$2.tmp" <<EOP
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "trap 'exit 0' TERM; sleep 100000 & wait"]
EOP
  mv "$1/.$2.tmp" "$1/$2.yaml"
}
running() { cri ps --state running -o json | grep -c '"io.kubernetes.pod.name": *"idle-' || true; }
ticks() { # ticks PID...: utime+stime of the processes still there
  local p t=0
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$(( t + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat" 2>/dev/null || echo 0) ))
  done
  echo "$t"
}
rss_mb() { local p s=0; for p in "$@"; do s=$(( s + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0) )); done; awk -v s="$s" 'BEGIN {printf "%.1f", s/1024}'; }
pct() { awk -v t="$1" -v hz="$hz" -v w="$window" 'BEGIN {printf "%.2f", t / hz / w * 100}'; }

declare -A cpu_daemon cpu_helpers rss_daemon nhelpers
# The per-pod helpers: nodelet's conmons (named by their paths under our dir); containerd's
# shims (named by its socket) and the pause process each runs.
conmons() { pgrep -f -- "conmon.*$NL_WORK/up/" | tr '\n' ' ' || true; }
shims() {
  local s
  for s in $(pgrep -f -- "containerd-shim-runc-v2.*-address $NL_WORK/idle/containerd.sock" || true); do
    printf '%s %s ' "$s" "$(pgrep -P "$s" -x pause | tr '\n' ' ' || true)"
  done
}
# On any exit the manifests go first, so each agent stops its own pods before the runtimes stop.
drain() {
  local m t0
  for m in "$NL_WORK/up/manifests" "$NL_WORK/kubelet/manifests"; do [ -d "$m" ] && rm -f "$m"/*.yaml; done
  if declare -F cri >/dev/null; then
    t0=$(date +%s)
    while [ "$(running)" != 0 ] && [ $(( $(date +%s) - t0 )) -lt 180 ]; do sleep 1; done
  fi
}
trap 'rc=$?; drain; (exit $rc); nl_cleanup' EXIT

measure() { # measure NAME N DAEMON_PIDS HELPER_LISTER
  local name=$1 n=$2 daemons=$3 lister=$4 helpers d0 h0 d1 h1
  sleep "$settle"
  helpers=$($lister)
  # shellcheck disable=SC2086
  d0=$(ticks $daemons); h0=$(ticks $helpers)
  sleep "$window"
  # shellcheck disable=SC2086
  d1=$(ticks $daemons); h1=$(ticks $helpers)
  cpu_daemon[$name,$n]=$(pct $(( d1 - d0 )))
  cpu_helpers[$name,$n]=$(pct $(( h1 - h0 )))
  # shellcheck disable=SC2086
  rss_daemon[$name,$n]=$(rss_mb $daemons)
  nhelpers[$name,$n]=$(wc -w <<<"$helpers")
  nl_say "$name, $n pods: daemons ${cpu_daemon[$name,$n]} %, ${nhelpers[$name,$n]} helpers ${cpu_helpers[$name,$n]} % of one CPU; daemons' RSS ${rss_daemon[$name,$n]} MB"
}

run_pods() { # run_pods DIR NAME DAEMON_PIDS HELPER_LISTER: grow to each count, measure; remove all
  local dir=$1 name=$2 daemons=$3 lister=$4 n have=0 t0
  for n in "${counts[@]}"; do
    for i in $(seq $((have + 1)) "$n"); do manifest "$dir" "idle-$i"; done
    have=$n
    t0=$(date +%s)
    until [ "$(running)" -ge "$n" ]; do
      [ $(( $(date +%s) - t0 )) -lt 600 ] || nl_die "$name: $n pods not running after 600 s"
      sleep 1
    done
    measure "$name" "$n" "$daemons" "$lister"
  done
  rm -f "$dir"/*.yaml
  t0=$(date +%s)
  until [ "$(running)" = 0 ]; do
    [ $(( $(date +%s) - t0 )) -lt 600 ] || { nl_say "$name: pods still running after 600 s"; break; }
    sleep 1
  done
}

for r in "${names[@]}"; do
  case "$r" in
  nodelet)
    # The cgo build, as a plain `go build` makes it (the RSS figures are of that build).
    (cd "$NL_ROOT" && go build -tags grpcnotrace -o "$NL_WORK/bin/nodelet" ./cmd/nodelet) || nl_die "go build ./cmd/nodelet failed"
    NL_NODELET_BIN=$NL_WORK/bin/nodelet
    nl_nodelet_up up 10.94.0.0/16 --max-pods "$maxpods"
    d=$NL_WORK/up pid=$NL_UP_PID
    cri() { crictl --runtime-endpoint "$NL_UP_SOCK" --image-endpoint "$NL_UP_SOCK" "$@" 2>/dev/null; }
    cri pull "$image" >/dev/null || nl_die "nodelet could not pull $image"
    measure nodelet 0 "$pid" conmons
    run_pods "$d/manifests" nodelet "$pid" conmons
    ;;
  kubelet)
    kl_build
    kl_guard_host
    NL_CONTAINERD_SUBNET=10.95.0.0/16 nl_containerd idle
    cri() { crictl --runtime-endpoint "$NL_CONTAINERD_SOCK" --image-endpoint "$NL_CONTAINERD_SOCK" "$@" 2>/dev/null; }
    cri pull "$image" >/dev/null || nl_die "containerd could not pull $image"
    cri pull registry.k8s.io/pause:3.9 >/dev/null || nl_die "containerd could not pull its pause image"
    k=$NL_WORK/kubelet
    kl_config "$k" "$NL_CONTAINERD_SOCK"
    echo "maxPods: $maxpods" >>"$k/config.yaml"
    kl_start "$k" nodelet-idle-bench
    measure kubelet 0 "$KL_PID $NL_CONTAINERD_PID" shims
    run_pods "$k/manifests" kubelet "$KL_PID $NL_CONTAINERD_PID" shims
    kill -TERM "$KL_PID"; wait "$KL_PID" 2>/dev/null || true
    ;;
  *) nl_die "--runtimes: unknown $r" ;;
  esac
done

echo
printf '%% of one CPU over %s s (daemons: agent+runtime process / kubelet+containerd; helpers: conmons / shims+pause)\n' "$window"
printf '%-6s' pods
for r in "${names[@]}"; do printf '%-16s%-16s%-12s' "$r daemons" "$r helpers" "$r RSS MB"; done
echo
for n in 0 "${counts[@]}"; do
  printf '%-6s' "$n"
  for r in "${names[@]}"; do
    printf '%-16s%-16s%-12s' "${cpu_daemon[$r,$n]:--}" "${cpu_helpers[$r,$n]:--} (${nhelpers[$r,$n]:-0})" "${rss_daemon[$r,$n]:--}"
  done
  echo
done
