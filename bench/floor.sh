#!/usr/bin/env bash
# The floor of a pod start on this machine: only what no runtime can skip for a networked pod,
# each step run straight from this shell as a CRI call is run by crictl (one process each): a
# network namespace with its loopback up, the CNI ADD of the same bridge + portmap list the
# bench runtimes get (the plugins run one after the other, as libcni does), and the OCI runtime's
# create and start of a prepared bundle (busybox, read-only, no overlay). Prints the median and
# p90 of each step and of their sum, for runc and crun, over N rounds. On a hybrid cgroup host
# crun runs as nodelet runs it there, through the wrapper that hides the v2 hierarchy from it
# (runtime/oci/hybrid.go), so its floor is what nodelet can reach with it.
#
#   sudo bench/floor.sh [--rounds N] [--handlers crun,runc]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../hack/kube/lib.sh
. "$here/../hack/kube/lib.sh"

rounds=20 handlers=crun,runc
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --handlers) handlers=$2; shift 2 ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
nl_init floor
IFS=, read -r -a hs <<<"$handlers"
declare -A bin
for h in "${hs[@]}"; do bin[$h]=$(command -v "$h") || nl_die "$h missing: run hack/install.sh"; done
if [ -n "${bin[crun]:-}" ] && [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
  cat >"$NL_WORK/crun-hybrid.sh" <<EOW
#!/bin/sh
exec unshare --mount --propagation unchanged -- /bin/sh -c 'mount --make-rprivate /sys/fs/cgroup && mount -t tmpfs -o size=64k,mode=755 nodelet-no-cgroup2 /sys/fs/cgroup/unified && : > /sys/fs/cgroup/unified/cgroup.controllers && exec "\$0" "\$@"' '${bin[crun]}' "\$@"
EOW
  chmod 0700 "$NL_WORK/crun-hybrid.sh"
  bin[crun]=$NL_WORK/crun-hybrid.sh
  nl_say "hybrid cgroup host: crun runs through $NL_WORK/crun-hybrid.sh, as under nodelet"
fi
busybox=$(command -v busybox) || nl_die "busybox missing: run hack/install.sh (busybox-static)"
cni_bin=
for d in /opt/cni/bin /usr/lib/cni; do [ -x "$d/bridge" ] && cni_bin=$d && break; done
[ -n "$cni_bin" ] || nl_die "CNI plugins missing: run hack/install.sh (containernetworking-plugins)"

bundle=$NL_WORK/bundle
mkdir -p "$bundle/rootfs/bin" "$bundle/rootfs/proc" "$bundle/rootfs/dev" "$bundle/rootfs/sys" "$bundle/rootfs/tmp"
cp "$busybox" "$bundle/rootfs/bin/busybox"
for a in sh sleep; do ln -s busybox "$bundle/rootfs/bin/$a"; done
net=nlfloor bridge=nlfloor0
NL_BRIDGES+=("$bridge")
cg=/nlfloor-$$
NL_AFTER+=("nl_remove_cgroup $cg")

spec() { # spec NETNS CGROUP: a container's minimal OCI spec, its own namespaces but the pod's network
  cat <<EOS
{"ociVersion":"1.0.2","root":{"path":"rootfs","readonly":true},
 "process":{"args":["sleep","3600"],"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0},
  "capabilities":{"bounding":["CAP_KILL"],"effective":["CAP_KILL"],"permitted":["CAP_KILL"]},
  "noNewPrivileges":true},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},
  {"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755","size=65536k"]},
  {"destination":"/sys","type":"sysfs","source":"sysfs","options":["nosuid","noexec","nodev","ro"]},
  {"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev"]}],
 "linux":{"cgroupsPath":"$2","namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},
  {"type":"network","path":"$1"}],
  "maskedPaths":["/proc/kcore","/sys/firmware"],"readonlyPaths":["/proc/sys"]}}
EOS
}
cni() { # cni COMMAND NETNS ID: the bridge + portmap list, the result of one given to the next
  local cmd=$1 ns=$2 id=$3 res
  res=$(CNI_COMMAND=$cmd CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cni_bin "$cni_bin/bridge" <<EOC
{"cniVersion":"1.0.0","name":"$net","type":"bridge","bridge":"$bridge","isGateway":true,"ipMasq":false,"hairpinMode":true,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"10.98.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$NL_WORK/ipam"}}
EOC
)
  [ "$cmd" = ADD ] || res='{}'
  CNI_COMMAND=$cmd CNI_CONTAINERID=$id CNI_NETNS=$ns CNI_IFNAME=eth0 CNI_PATH=$cni_bin "$cni_bin/portmap" >/dev/null <<EOC
{"cniVersion":"1.0.0","name":"$net","type":"portmap","capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":[]},"prevResult":$res}
EOC
}
now() { date +%s%N; }
record() { echo "$3" >>"$NL_WORK/t.$1.$2"; } # record HANDLER STEP US

round() { # round HANDLER N
  local h=$1 id=floor-$1-$2 ns t0 t1 t2 t3 t4
  ns=/run/netns/$id
  t0=$(now); ip netns add "$id"; ip -n "$id" link set lo up
  t1=$(now); cni ADD "$ns" "$id" >/dev/null
  t2=$(now); spec "$ns" "$cg/$id" >"$bundle/config.json"
  "${bin[$h]}" --root "$NL_WORK/state-$h" create --bundle "$bundle" "$id"
  t3=$(now); "${bin[$h]}" --root "$NL_WORK/state-$h" start "$id"
  t4=$(now)
  "${bin[$h]}" --root "$NL_WORK/state-$h" delete -f "$id"
  cni DEL "$ns" "$id" >/dev/null
  ip netns del "$id"
  record "$h" netns $(( (t1 - t0) / 1000 ))
  record "$h" cni-add $(( (t2 - t1) / 1000 ))
  record "$h" create $(( (t3 - t2) / 1000 ))
  record "$h" start $(( (t4 - t3) / 1000 ))
  record "$h" floor $(( (t4 - t0) / 1000 ))
}

for h in "${hs[@]}"; do round "$h" warm; rm -f "$NL_WORK"/t."$h".*; done
nl_say "timing $rounds rounds of netns, CNI ADD, create, start on: ${hs[*]}"
for i in $(seq 1 "$rounds"); do
  for h in "${hs[@]}"; do round "$h" "$i"; done
done

stat() { # stat FILE → "median p90" in ms (nearest rank)
  sort -n "$1" | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; p=a[int(NR*0.9+0.999)]; if (p=="") p=a[NR]; printf "%.1f / %.1f", m/1000, p/1000}'
}
echo
printf '%-10s' "step"; for h in "${hs[@]}"; do printf '%-22s' "$h median/p90 ms"; done; echo
for step in netns cni-add create start floor; do
  printf '%-10s' "$step"
  for h in "${hs[@]}"; do printf '%-22s' "$(stat "$NL_WORK/t.$h.$step")"; done
  echo
done
