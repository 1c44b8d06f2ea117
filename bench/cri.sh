#!/usr/bin/env bash
# CRI lifecycle benchmark: nodelet's runtime against Debian's containerd (CRI plugin, runc, a CNI
# bridge), both started here on their own dirs and measured in the same run, alternating between
# them each round. Every figure goes through crictl (about 20 ms of each call is crictl itself, the
# same for both runtimes). Prints median and p90 per operation and the ratio nodelet/containerd:
#   runp, create, start, create+start, exec (ExecSync), stop+rm, stopp+rmp, the whole lifecycle,
# then the RSS of each runtime idle and with 10 and 50 running pods, counting every process the
# runtime keeps per pod (containerd's shims and pause processes, nodelet's conmon/catatonit).
#
# --handler NAME runs nodelet's pods on that OCI runtime handler (runc, crun) instead of its default;
# --steps also prints, from nodelet's debug log, the median time of each step of RunPodSandbox and
# CreateContainer over the timed rounds.
#
#   sudo bench/cri.sh [--rounds N] [--runtimes nodelet,containerd] [--handler NAME] [--steps] [--no-rss] [--keep]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../hack/kube/lib.sh
. "$here/../hack/kube/lib.sh"

rounds=20 runtimes=nodelet,containerd rss=1 steps=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --runtimes) runtimes=$2; shift 2 ;;
    --handler) NL_NODELET_ARGS+=(--default-runtime-handler "$2"); shift 2 ;;
    --steps) steps=1; NL_NODELET_ARGS+=(--log-level debug); shift ;;
    --no-rss) rss=0; shift ;;
    --keep) export NL_KEEP=1; shift ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
image=registry.k8s.io/e2e-test-images/busybox:1.29-2

nl_init bench
command -v crictl >/dev/null || nl_die "crictl missing: run hack/install.sh"
nl_registry
declare -A ep pid
IFS=, read -r -a names <<<"$runtimes"
for r in "${names[@]}"; do
  case "$r" in
    nodelet) nl_nodelet nodelet; ep[$r]=$NL_NODELET_SOCK; pid[$r]=$NL_NODELET_PID ;;
    containerd) nl_containerd containerd; ep[$r]=$NL_CONTAINERD_SOCK; pid[$r]=$NL_CONTAINERD_PID ;;
    *) nl_die "--runtimes: unknown runtime $r" ;;
  esac
done
# crictl's warnings (one per runp about cgroup_parent) go to a file, shown if a call fails.
cri() { local r=$1; shift; crictl --runtime-endpoint "${ep[$r]}" --image-endpoint "${ep[$r]}" --timeout 60s "$@" 2>>"$NL_WORK/crictl.err"; }
trap 'echo "--- crictl stderr (last 10 lines)" >&2; grep -v level=warning "$NL_WORK/crictl.err" | tail -10 >&2' ERR

for r in "${names[@]}"; do cri "$r" pull "$image" >/dev/null || nl_die "$r could not pull $image"; done

cfg=$NL_WORK/cfg
mkdir -p "$cfg"
pod_json() { # pod_json NAME
  printf '{"metadata":{"name":"%s","namespace":"bench","uid":"%s","attempt":0},"log_directory":"%s","linux":{}}\n' \
    "$1" "$1-uid" "$NL_WORK/logs/$1"
}
ctr_json() {
  printf '{"metadata":{"name":"c"},"image":{"image":"%s"},"command":["sh","-c","trap \\"exit 0\\" TERM; sleep 3600 & wait"],"log_path":"c.log","linux":{}}\n' "$image"
}
ctr_json >"$cfg/ctr.json"

now() { date +%s%N; }
record() { echo "$3" >>"$NL_WORK/t.$1.$2"; } # record RUNTIME OP MS

lifecycle() { # lifecycle RUNTIME N: one pod through every call, timing each
  local r=$1 n=$2 t0 t1 t2 t3 t4 t5 t6 p c
  pod_json "bench-$r-$n" >"$cfg/pod-$r-$n.json"
  mkdir -p "$NL_WORK/logs/bench-$r-$n"
  t0=$(now); p=$(cri "$r" runp "$cfg/pod-$r-$n.json")
  t1=$(now); c=$(cri "$r" create "$p" "$cfg/ctr.json" "$cfg/pod-$r-$n.json")
  t2=$(now); cri "$r" start "$c" >/dev/null
  t3=$(now); cri "$r" exec -s "$c" true >/dev/null
  t4=$(now); cri "$r" stop -t 10 "$c" >/dev/null; cri "$r" rm "$c" >/dev/null
  t5=$(now); cri "$r" stopp "$p" >/dev/null; cri "$r" rmp "$p" >/dev/null
  t6=$(now)
  record "$r" runp $(( (t1 - t0) / 1000000 ))
  record "$r" create $(( (t2 - t1) / 1000000 ))
  record "$r" start $(( (t3 - t2) / 1000000 ))
  record "$r" create+start $(( (t3 - t1) / 1000000 ))
  record "$r" exec $(( (t4 - t3) / 1000000 ))
  record "$r" stop+rm $(( (t5 - t4) / 1000000 ))
  record "$r" stopp+rmp $(( (t6 - t5) / 1000000 ))
  record "$r" lifecycle $(( (t6 - t0) / 1000000 ))
}

# One warm-up lifecycle each (first CNI setup, first rootfs of the image), not recorded.
for r in "${names[@]}"; do lifecycle "$r" warm; rm -f "$NL_WORK"/t."$r".*; done
steps_from=0
[ -f "$NL_WORK/nodelet/nodelet.log" ] && steps_from=$(wc -l <"$NL_WORK/nodelet/nodelet.log")
nl_say "timing $rounds rounds of runp, create, start, exec, stop+rm, stopp+rmp on: ${names[*]}"
for i in $(seq 1 "$rounds"); do
  # Alternate which runtime goes first, so neither always runs on a warmer machine.
  if (( i % 2 )); then order=("${names[@]}"); else order=(); for (( j=${#names[@]}-1; j>=0; j-- )); do order+=("${names[$j]}"); done; fi
  for r in "${order[@]}"; do lifecycle "$r" "$i"; done
done

stat() { # stat FILE → "median p90" (nearest rank)
  sort -n "$1" | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; p=a[int(NR*0.9+0.999)]; if (p=="") p=a[NR]; print m, p}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo
printf '%-14s' "operation"; for r in "${names[@]}"; do printf '%-26s' "$r median/p90 ms"; done
[ ${#names[@]} = 2 ] && printf 'ratio %s/%s (median)' "${names[0]}" "${names[1]}"
echo
for op in runp create start create+start exec stop+rm stopp+rmp lifecycle; do
  printf '%-14s' "$op"
  meds=()
  for r in "${names[@]}"; do
    read -r m p < <(stat "$NL_WORK/t.$r.$op")
    meds+=("$m")
    printf '%-26s' "$m / $p"
  done
  [ ${#names[@]} = 2 ] && printf '%s' "$(ratio "${meds[0]}" "${meds[1]}")"
  echo
done

if [ "$steps" = 1 ] && [ -f "$NL_WORK/nodelet/nodelet.log" ]; then
  # The step lines are slog text: msg="create container steps" id=… total=41.2ms joinSandbox=3µs …
  echo
  echo "nodelet steps, median ms over the timed rounds"
  tail -n +"$((steps_from + 1))" "$NL_WORK/nodelet/nodelet.log" | awk '
    function ms(v) {
      if (v ~ /ns$/) return substr(v, 1, length(v) - 2) / 1e6
      if (v ~ /µs$/) return substr(v, 1, length(v) - 3) / 1e3
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
      if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1e3
      return -1
    }
    match($0, /msg="[a-z ]+ steps"/) {
      what = substr($0, RSTART + 5, RLENGTH - 12)
      for (i = 1; i <= NF; i++) {
        n = split($i, kv, "=")
        if (n != 2 || kv[1] == "time" || kv[1] == "level" || kv[1] == "id" || kv[1] == "msg" || kv[1] == "failedAt") continue
        v = ms(kv[2]); if (v < 0) continue
        key = what SUBSEP kv[1]
        if (!(key in count)) order[++norder] = key
        vals[key, ++count[key]] = v
      }
    }
    END {
      for (o = 1; o <= norder; o++) {
        key = order[o]; c = count[key]
        for (i = 1; i <= c; i++) a[i] = vals[key, i]
        for (i = 2; i <= c; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        split(key, w, SUBSEP)
        printf "%-18s %-22s %8.2f\n", w[1], w[2], a[int((c + 1) / 2)]
      }
    }'
fi

[ "$rss" = 1 ] || exit 0

rss_of() { # rss_of RUNTIME → "RSS PSS" in kB: the daemon plus every process whose command line names its dir, plus pause processes
  local r=$1 total=0 ptotal=0 p kb pkb
  for p in /proc/[0-9]*; do p=${p#/proc/}
    [ -r "/proc/$p/cmdline" ] || continue
    if [ "$p" = "${pid[$r]}" ] || tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "${ep[$r]#unix://}" ||
      { [ "$r" = containerd ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pause ]; } ||
      { [ "$r" = nodelet ] && grep -qx 'conmon\|catatonit' "/proc/$p/comm" 2>/dev/null &&
        tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "$NL_WORK/nodelet/"; }; then
      kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
      pkb=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
      total=$((total + ${kb:-0})); ptotal=$((ptotal + ${pkb:-0}))
    fi
  done
  echo "$total $ptotal"
}
start_pods() { # start_pods RUNTIME FROM TO
  local r=$1 n p c
  for n in $(seq "$2" "$3"); do
    pod_json "rss-$r-$n" >"$cfg/rss-$r-$n.json"
    mkdir -p "$NL_WORK/logs/rss-$r-$n"
    p=$(cri "$r" runp "$cfg/rss-$r-$n.json")
    c=$(cri "$r" create "$p" "$cfg/ctr.json" "$cfg/rss-$r-$n.json")
    cri "$r" start "$c" >/dev/null
  done
}
echo
# RSS counts a shared library's pages once in every process that maps them (each conmon's 1.7 MB
# of libc and glib, say); PSS divides them among the processes sharing them, so the sum over
# processes is the memory they really take. Both are shown.
echo "RSS and PSS (MB; daemon + per-pod helpers)"
declare -A idle r10 r50 pidle p10 p50
for r in "${names[@]}"; do
  sleep 2; read -r idle[$r] pidle[$r] < <(rss_of "$r")
  start_pods "$r" 1 10; sleep 2; read -r r10[$r] p10[$r] < <(rss_of "$r")
  start_pods "$r" 11 50; sleep 2; read -r r50[$r] p50[$r] < <(rss_of "$r")
  cri "$r" rmp -fa >/dev/null
done
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
printf '%-14s' ""; for r in "${names[@]}"; do printf '%-14s' "$r"; done
[ ${#names[@]} = 2 ] && printf 'ratio'
echo
for row in idle 10-pods 50-pods per-pod pss-idle pss-10-pods pss-50-pods pss-per-pod; do
  printf '%-14s' "$row"; vals=()
  for r in "${names[@]}"; do
    case $row in
      idle) v=${idle[$r]} ;;
      10-pods) v=${r10[$r]} ;;
      50-pods) v=${r50[$r]} ;;
      per-pod) v=$(( (${r50[$r]} - ${r10[$r]}) / 40 )) ;;
      pss-idle) v=${pidle[$r]} ;;
      pss-10-pods) v=${p10[$r]} ;;
      pss-50-pods) v=${p50[$r]} ;;
      pss-per-pod) v=$(( (${p50[$r]} - ${p10[$r]}) / 40 )) ;;
    esac
    vals+=("$v"); printf '%-14s' "$(mb "$v")"
  done
  [ ${#names[@]} = 2 ] && printf '%s' "$(ratio "${vals[0]}" "${vals[1]}")"
  echo
done
