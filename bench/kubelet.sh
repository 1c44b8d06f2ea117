#!/usr/bin/env bash
# The upstream kubelet (hack/kube/build.sh) on nodelet's runtime and on Debian's containerd, one
# after the other in the same run, standalone with static pods: how long from a manifest written
# to its container running (seen through crictl, polled; crictl itself takes ~20 ms a call), over
# N single pods, then 30 manifests at once. Prints median and p90 per runtime and the ratio of the
# first to the second. FACTS.md's reference: containerd 242–271 ms median, 30 pods 4.05–4.14 s.
# `up` in --runtimes is the whole pair of nodelet's own, `nodelet up` (agent and runtime in one
# process, no kubelet), on the same manifests: `--runtimes up,containerd` compares it with
# kubelet + containerd.
#
#   sudo bench/kubelet.sh [--runs N] [--burst N] [--runtimes nodelet,containerd|up,containerd|up,nodelet,containerd] [--keep]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../hack/kube/lib.sh
. "$here/../hack/kube/lib.sh"
# shellcheck source=../hack/kube/kubelet-lib.sh
. "$here/../hack/kube/kubelet-lib.sh"

runs=10 burst=30 runtimes=nodelet,containerd
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --runtimes) runtimes=$2; shift 2 ;;
    --keep) export NL_KEEP=1; shift ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
IFS=, read -r -a names <<<"$runtimes"
image=registry.k8s.io/e2e-test-images/busybox:1.29-2
node=nodelet-kubelet-bench

nl_init kubelet-bench
command -v crictl >/dev/null || nl_die "crictl missing: run hack/install.sh"
kl_guard_host
kl_build
nl_registry

manifest() { # manifest DIR NAME: write a one-container static pod atomically
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
    command: [sh, -c, "trap 'exit 0' TERM; sleep 3600 & wait"]
EOP
  mv "$1/.$2.tmp" "$1/$2.yaml"
}
running_count() { # running_count PREFIX: running containers of pods whose name starts so
  cri ps --state running -o json | grep -Ec "\"io.kubernetes.pod.name\": *\"$1" || true
}
now() { date +%s%N; }
stat() { sort -n "$1" | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; p=a[int(NR*0.9+0.999)]; if (p=="") p=a[NR]; print m, p}'; }

declare -A med p90 burst_ms
for r in "${names[@]}"; do
  case "$r" in
    nodelet) nl_nodelet "kl-$r"; endpoint=$NL_NODELET_SOCK ;;
    containerd) nl_containerd "kl-$r"; endpoint=$NL_CONTAINERD_SOCK ;;
    up) nl_nodelet_up "kl-up" 10.97.0.0/16 --max-pods $((burst + 10)); endpoint=$NL_UP_SOCK ;;
    *) nl_die "--runtimes: unknown runtime $r" ;;
  esac
  cri() { crictl --runtime-endpoint "$endpoint" --image-endpoint "$endpoint" "$@" 2>/dev/null; }
  cri pull "$image" >/dev/null || nl_die "$r could not pull $image"
  if [ "$r" = up ]; then
    manifests=$NL_UP_MANIFESTS daemon=$NL_UP_PID
    nl_say "nodelet up: $runs single pods, then $burst at once"
  else
    k=$NL_WORK/kubelet-$r
    kl_config "$k" "$endpoint"
    nl_say "kubelet on $r: $runs single pods, then $burst at once"
    kl_start "$k" "$node"
    manifests=$k/manifests daemon=$KL_PID
  fi
  for i in warm $(seq 1 "$runs"); do
    t0=$(now)
    manifest "$manifests" "single-$i"
    until [ "$(running_count "single-$i-")" -ge 1 ]; do
      [ $(( ($(now) - t0) / 1000000000 )) -lt 120 ] || nl_die "$r: pod single-$i not running after 120 s"
      sleep 0.01
    done
    ms=$(( ($(now) - t0) / 1000000 ))
    [ "$i" = warm ] || echo "$ms" >>"$NL_WORK/single.$r"
    rm "$manifests/single-$i.yaml"
    until [ "$(running_count "single-$i-")" = 0 ]; do sleep 0.05; done
  done
  read -r med[$r] p90[$r] < <(stat "$NL_WORK/single.$r")
  t0=$(now)
  for i in $(seq 1 "$burst"); do manifest "$manifests" "burst-$i"; done
  until [ "$(running_count burst-)" -ge "$burst" ]; do
    [ $(( ($(now) - t0) / 1000000000 )) -lt 300 ] || nl_die "$r: $burst pods not running after 300 s"
    sleep 0.05
  done
  burst_ms[$r]=$(( ($(now) - t0) / 1000000 ))
  # Stop this kubelet (or nodelet up) before the next, so two agents never share the machine.
  rm -f "$manifests"/*.yaml
  until [ "$(running_count burst-)" = 0 ]; do sleep 0.2; done
  kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
echo
printf '%-34s' ""; for r in "${names[@]}"; do printf '%-22s' "$r"; done
[ ${#names[@]} = 2 ] && printf 'ratio %s/%s' "${names[0]}" "${names[1]}"
echo
printf '%-34s' "manifest -> running, median ms"
for r in "${names[@]}"; do printf '%-22s' "${med[$r]}"; done
[ ${#names[@]} = 2 ] && ratio "${med[${names[0]}]}" "${med[${names[1]}]}"
echo
printf '%-34s' "manifest -> running, p90 ms"
for r in "${names[@]}"; do printf '%-22s' "${p90[$r]}"; done
[ ${#names[@]} = 2 ] && ratio "${p90[${names[0]}]}" "${p90[${names[1]}]}"
echo
printf '%-34s' "$burst manifests -> all running, ms"
for r in "${names[@]}"; do printf '%-22s' "${burst_ms[$r]}"; done
[ ${#names[@]} = 2 ] && ratio "${burst_ms[${names[0]}]}" "${burst_ms[${names[1]}]}"
echo
