#!/usr/bin/env bash
# What a node costs the API server, nodelet beside the upstream kubelet in one cluster: a loopback
# control plane (hack/kube/control-plane.sh) with an audit log of every request made by a node
# (users system:node:*), two nodes joined to it — `nodelet up` (agent and runtime in one process)
# and the upstream kubelet v1.34.4 on nodelet's runtime — each with the defaults of its kind
# (sync every minute, status every 10 s, Lease every 10 s, Secrets and ConfigMaps watched), and
# two windows counted from the audit log: idle (no pods), then with N pods on each node, every pod
# reading a ConfigMap (env) and a Secret (volume) of its own. Prints, per node, the requests per
# minute by verb and resource, and the watches opened, the figures SIG Scalability counts.
#
#   sudo bench/apiserver.sh [--pods N] [--minutes M] [--log-level debug] [--keep]
# Defaults: 30 pods a node, 3 minutes a window. --log-level is nodelet's (debug says why each
# node status update was posted).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../hack/kube/lib.sh
. "$here/../hack/kube/lib.sh"
# shellcheck source=../hack/kube/kubelet-lib.sh
. "$here/../hack/kube/kubelet-lib.sh"

pods=30 minutes=3 level=info
while [ $# -gt 0 ]; do
  case "$1" in
    --log-level) level=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --keep) export NL_KEEP=1; shift ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
image=registry.k8s.io/e2e-test-images/busybox:1.29-2
nodelet_node=bench-nodelet kubelet_node=bench-kubelet

nl_init apiserver-bench
command -v crictl >/dev/null || nl_die "crictl missing: run hack/install.sh"
kl_guard_host
kl_build
bin=$KL_BIN
nl_registry

# Every request of a node, at Metadata level (no bodies); nothing else is logged.
cp_dir=$NL_WORK/control-plane
mkdir -p "$NL_WORK/audit"
cat >"$NL_WORK/audit/policy.yaml" <<'EOP'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
EOP
audit=$NL_WORK/audit/audit.log
CP_APISERVER_ARGS="--audit-policy-file $NL_WORK/audit/policy.yaml --audit-log-path $audit --audit-log-format json" \
  "$here/../hack/kube/control-plane.sh" start "$cp_dir" "$nodelet_node,$kubelet_node"
# Stopped with everything else this script started, after the nodes (killed first).
mapfile -t cp_pids <"$cp_dir/pids"
NL_PIDS+=("${cp_pids[@]}")
kubectl() { "$bin/kubectl" --kubeconfig "$cp_dir/admin.kubeconfig" "$@"; }

# The upstream kubelet on a nodelet runtime of its own, with the kubelet's defaults but what
# this host needs (cgroup v1, no QoS cgroups beside the other node's, no server port).
NL_NODELET_SUBNET=10.93.0.0/16 nl_nodelet kubelet-rt
k=$NL_WORK/kubelet
mkdir -p "$k/root" "$k/logs"
cat >"$k/config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: $NL_NODELET_SOCK
imageServiceEndpoint: $NL_NODELET_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
enableServer: false
healthzPort: 0
readOnlyPort: 0
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
podLogsDir: $k/logs
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
kl_start "$k" "$kubelet_node" --kubeconfig "$cp_dir/node-$kubelet_node.kubeconfig"

# nodelet up, joined: its defaults are the kubelet's.
cat >"$NL_WORK/nodelet-config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
enableServer: false
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
nl_nodelet_up up 10.94.0.0/16 --kubeconfig "$cp_dir/node-$nodelet_node.kubeconfig" \
  --config "$NL_WORK/nodelet-config.yaml" --hostname-override "$nodelet_node" --node-ip 127.0.0.1 --log-level "$level"

ready() { [ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
nl_wait 180 ready "$kubelet_node" || nl_die "the kubelet's node is not Ready (see $k/kubelet.log)"
nl_wait 180 ready "$nodelet_node" || nl_die "nodelet's node is not Ready"
nl_say "both nodes Ready"

# count FROM TO MINUTES: the audit events between the two RFC 3339 times, per node, verb and
# resource, as rates over MINUTES.
count() {
  python3 - "$audit" "$1" "$2" "$3" <<'EOPY'
import json, sys, collections
path, start, end, minutes = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
by = collections.Counter(); total = collections.Counter(); watches = collections.Counter()
with open(path) as f:
    for line in f:
        e = json.loads(line)
        t = e.get("stageTimestamp", "")
        # A watch counts when it starts (it completes only when it ends); the rest when answered.
        stage = "ResponseStarted" if e.get("verb") == "watch" else "ResponseComplete"
        if not (start <= t < end) or e.get("stage") != stage:
            continue
        user = e["user"]["username"].removeprefix("system:node:")
        res = (e.get("objectRef") or {}).get("resource", e.get("requestURI", "?"))
        sub = (e.get("objectRef") or {}).get("subresource")
        if sub:
            res += "/" + sub
        by[(user, e["verb"], res)] += 1
        total[user] += 1
        if e["verb"] == "watch":
            watches[user] += 1
for user in sorted(total):
    print(f"  {user}: {total[user] / minutes:.1f} requests/min ({watches[user]} watches opened)")
    for (u, verb, res), n in sorted(by.items(), key=lambda kv: -kv[1]):
        if u == user:
            print(f"    {verb:8} {res:40} {n / minutes:7.1f}/min")
EOPY
}
now() { date -u +%Y-%m-%dT%H:%M:%S.000000Z; }

# Settle (registration, first lists), then the idle window.
sleep 30
t0=$(now)
nl_say "idle window: ${minutes} min"
sleep $((minutes * 60))
t1=$(now)

nl_say "starting $pods pods on each node, each with a ConfigMap (env) and a Secret (volume) of its own"
for n in "$nodelet_node" "$kubelet_node"; do
  for i in $(seq "$pods"); do
    cat <<EOY
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-$n-$i, namespace: default}
data: {mode: bench}
---
apiVersion: v1
kind: Secret
metadata: {name: sec-$n-$i, namespace: default}
stringData: {token: bench}
---
apiVersion: v1
kind: Pod
metadata: {name: p-$n-$i, namespace: default}
spec:
  nodeName: $n
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $image
    command: [sleep, "100000"]
    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: cm-$n-$i, key: mode}}}]
    volumeMounts: [{name: s, mountPath: /s}]
  volumes: [{name: s, secret: {secretName: sec-$n-$i}}]
---
EOY
  done
done >"$NL_WORK/pods.yaml"
ta=$(now)
kubectl apply -f "$NL_WORK/pods.yaml" >/dev/null
running() { [ "$(kubectl get pods --field-selector spec.nodeName="$1",status.phase=Running -o name | wc -l)" -eq "$pods" ]; }
nl_wait 600 running "$nodelet_node" || nl_die "nodelet's pods did not all run"
nl_wait 600 running "$kubelet_node" || nl_die "the kubelet's pods did not all run"
sleep 30
t2=$(now)
starting=$(python3 -c "import datetime as d; f='%Y-%m-%dT%H:%M:%S.%fZ'; print((d.datetime.strptime('$t2', f) - d.datetime.strptime('$ta', f)).total_seconds() / 60)")
nl_say "window with $pods pods a node: ${minutes} min"
sleep $((minutes * 60))
t3=$(now)

echo "API server requests of each node ($minutes-minute windows, $(date -u +%F))"
echo "idle:"
count "$t0" "$t1" "$minutes"
echo "starting $pods pods a node, until all ran and 30 s more ($(printf %.1f "$starting") min; rates per minute of it):"
count "$ta" "$t2" "$starting"
echo "$pods pods a node, each with a ConfigMap and a Secret:"
count "$t2" "$t3" "$minutes"
kubectl delete -f "$NL_WORK/pods.yaml" --wait=false >/dev/null 2>&1 || true
