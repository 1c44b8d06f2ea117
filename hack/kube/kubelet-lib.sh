# shellcheck shell=bash
# The upstream kubelet for the interop scripts (source after hack/kube/lib.sh and nl_init).
#   kl_build              build (or find) the kubelet; sets KL_BIN (its bin dir) and KL_KUBELET
#   kl_guard_host         undo at exit what the kubelet changes on the host (kernel tunables,
#                         KUBE-* iptables chains, /var/lib/kubelet)
#   kl_config DIR EP      write DIR/config.yaml: standalone, static pods from DIR/manifests, runtime EP;
#                         with KL_SERVE=ADDR its server on ADDR:10250 (client certificates of
#                         KL_CLIENT_CA, webhook authorization), pods under KL_CGROUP_ROOT, KL_CLUSTER_DNS
#   kl_start DIR NODE [ARGS...]   start it; sets KL_PID (stopped with the rest by nl_cleanup)

kl_build() {
  nl_say "building the kubelet (cached after the first run)"
  KL_BIN=$("$NL_ROOT/hack/kube/build.sh" kubelet | tail -1)
  KL_KUBELET=$KL_BIN/kubelet
  "$KL_KUBELET" --version >/dev/null || nl_die "$KL_KUBELET does not run"
}

kl_guard_host() {
  # The kubelet sets kernel tunables at start (kernel.panic, kernel.panic_on_oops,
  # vm.overcommit_memory, vm.panic_on_oom): their previous values are put back at exit.
  KL_SAVED=()
  local t
  for t in kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom; do
    KL_SAVED+=("$t=$(sysctl -n "$t")")
  done
  # It also adds KUBE-* iptables chains (a canary, and KUBE-FIREWALL, which drops packets to
  # 127.0.0.0/8 from other sources): those that were not there before are removed at exit.
  KL_CHAINS_BEFORE=$(kl_chains)
  KL_HAD_VARLIB=$([ -d /var/lib/kubelet ] && echo 1 || true)
  NL_AFTER+=(kl_restore_host)
}

kl_chains() {
  local c t
  for c in iptables ip6tables; do
    for t in filter nat mangle; do
      "$c" -w -t "$t" -S 2>/dev/null | sed -n "s/^-N \(KUBE-[A-Z0-9-]*\)$/$c $t \1/p"
    done
  done
}

kl_restore_host() {
  local kv c t ch now rules rule
  for kv in "${KL_SAVED[@]}"; do sysctl -q -w "$kv" >/dev/null || true; done
  now=$(kl_chains)
  while read -r c t ch; do
    [ -n "$ch" ] || continue
    grep -qx "$c $t $ch" <<<"$KL_CHAINS_BEFORE" && continue
    rules=$("$c" -w -t "$t" -S | grep -- "-j $ch\( \|$\)" | sed 's/^-A /-D /')
    while read -r rule; do [ -z "$rule" ] || eval "$c -w -t $t $rule" 2>/dev/null; done <<<"$rules"
    "$c" -w -t "$t" -F "$ch" 2>/dev/null; "$c" -w -t "$t" -X "$ch" 2>/dev/null
  done <<<"$now"
  # The kubelet makes /var/lib/kubelet/device-plugins whatever --root-dir says.
  [ -n "$KL_HAD_VARLIB" ] || rm -rf /var/lib/kubelet
}

kl_config() {
  local k=$1 endpoint=$2 server qos dns=
  mkdir -p "$k/manifests" "$k/root" "$k/logs"
  if [ -n "${KL_SERVE:-}" ]; then
    # Joined as a node is: its API served to the API server, pods in QoS cgroups under a root.
    server="address: $KL_SERVE
port: 10250
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $KL_CLIENT_CA}}
authorization: {mode: Webhook}"
    qos="cgroupRoot: $KL_CGROUP_ROOT"
  else
    # Standalone: no kubelet server, pods from the manifest dir (and the API server if joined).
    server="enableServer: false
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}"
    qos="cgroupsPerQOS: false
enforceNodeAllocatable: []"
  fi
  [ -z "${KL_CLUSTER_DNS:-}" ] || dns="clusterDNS: [$KL_CLUSTER_DNS]
clusterDomain: cluster.local"
  cat >"$k/config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $k/manifests
fileCheckFrequency: 1s
syncFrequency: 5s
containerRuntimeEndpoint: $endpoint
imageServiceEndpoint: $endpoint
cgroupDriver: cgroupfs
# This machine has cgroup v1; kubelets from 1.35 on refuse it unless told.
failCgroupV1: false
$server
healthzPort: 0
readOnlyPort: 0
$qos
$dns
failSwapOn: false
podLogsDir: $k/logs
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
}

kl_start() {
  local k=$1 node=$2
  shift 2
  # --node-ip: without it the standalone kubelet resolves its node name in DNS on every sync.
  "$KL_KUBELET" --config "$k/config.yaml" --root-dir "$k/root" --cert-dir "$k/pki" \
    --hostname-override "$node" --node-ip 127.0.0.1 "$@" --v=2 >"$k/kubelet.log" 2>&1 &
  NL_PIDS+=($!)
  KL_PID=$!
}
