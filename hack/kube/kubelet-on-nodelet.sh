#!/usr/bin/env bash
# Runs the upstream kubelet (built by hack/kube/build.sh) in standalone mode on a CRI runtime it
# starts — nodelet's by default, or a private containerd for comparison — and checks, through
# crictl, that static pods behave:
#   1. a pod with an init container and two containers reaches Running (init ran first, its
#      output visible to the app containers through an emptyDir),
#   2. a container that keeps crashing is restarted,
#   3. deleting the manifest stops the pod.
# With --cluster it also starts a loopback control plane (hack/kube/control-plane.sh) and joins
# the kubelet to it as a node: the node registers and turns Ready, a pod created through the API
# is scheduled onto it and runs, the static pod shows as a mirror pod, and deleting the API pod
# removes it.
# Prints one line per check and "kubelet: N passed, N failed". The pod images are stand-ins served
# by hack/images through the runtime's registry mirrors.
#
#   sudo hack/kube/kubelet-on-nodelet.sh [--runtime nodelet|containerd] [--cluster] [--keep]
# Env: KUBE_VERSION (v1.34.4), NODELET_CACHE, KUBELET_TIMEOUT (seconds per wait, 120).
#
# What the kubelet changes on the host (kernel tunables, KUBE-* iptables chains) is undone at exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=kubelet-lib.sh
. "$here/kubelet-lib.sh"

runtime=nodelet cluster=''
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) runtime=$2; shift 2 ;;
    --runtime=*) runtime=${1#*=}; shift ;;
    --keep) export NL_KEEP=1; shift ;;
    --cluster) cluster=1; shift ;;
    *) nl_die "unknown argument $1" ;;
  esac
done
timeout=${KUBELET_TIMEOUT:-120}
node=nodelet-kubelet-test
image=registry.k8s.io/e2e-test-images/busybox:1.29-2

nl_init kubelet
command -v crictl >/dev/null || nl_die "crictl missing: run hack/install.sh"

kl_guard_host
kl_build
bin=$KL_BIN
kubelet=$KL_KUBELET
"$kubelet" --version

nl_registry
case "$runtime" in
  nodelet) nl_nodelet nodelet; endpoint=$NL_NODELET_SOCK ;;
  containerd) nl_containerd kubelet; endpoint=$NL_CONTAINERD_SOCK ;;
  *) nl_die "--runtime $runtime: want nodelet or containerd" ;;
esac
cri() { crictl --runtime-endpoint "$endpoint" --image-endpoint "$endpoint" "$@"; }

k=$NL_WORK/kubelet
kl_config "$k" "$endpoint"

join=()
if [ -n "$cluster" ]; then
  cp_dir=$NL_WORK/control-plane
  "$here/control-plane.sh" start "$cp_dir" "$node"
  # Stopped with everything else this script started, after the kubelet (killed first).
  mapfile -t cp_pids <"$cp_dir/pids"
  NL_PIDS+=("${cp_pids[@]}")
  join=(--kubeconfig "$cp_dir/node.kubeconfig")
  kubectl() { "$bin/kubectl" --kubeconfig "$cp_dir/admin.kubeconfig" "$@"; }
fi

nl_say "starting kubelet $(basename "$(dirname "$bin")") on $runtime${cluster:+, joined to the control plane}"
kl_start "$k" "$node" "${join[@]}"
kubelet_pid=$KL_PID

pass=0 fail=0
check() { # check NAME CMD...: wait up to $timeout s for CMD to succeed
  local name=$1 t0; shift
  t0=$(date +%s%N)
  if nl_wait "$timeout" "$@"; then
    pass=$((pass + 1)); echo "ok   $name ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
  else
    fail=$((fail + 1)); echo "FAIL $name"
  fi
}
running() { # running CONTAINER-NAME: a running container of that name in the pod
  [ -n "$(cri ps --state running --name "^$1\$" --label "io.kubernetes.pod.name=$2" -q)" ]
}
exited_ok() { # exited_ok CONTAINER POD: an exited container with exit code 0
  local id
  id=$(cri ps -a --state exited --name "^$1\$" --label "io.kubernetes.pod.name=$2" -q | head -1)
  [ -n "$id" ] && [ "$(cri inspect -o go-template --template '{{.status.exitCode}}' "$id")" = 0 ]
}
restarted() { # restarted CONTAINER POD: a container of that name with attempt >= 1 exists
  cri ps -a --name "^$1\$" --label "io.kubernetes.pod.name=$2" -o json |
    grep -Eq '"attempt": *[1-9]'
}
pod_stopped() { # pod_stopped POD: no ready sandbox and no running container left
  [ -z "$(cri pods --state ready --label "io.kubernetes.pod.name=$1" -q)" ] &&
    [ -z "$(cri ps --state running --label "io.kubernetes.pod.name=$1" -q)" ]
}
alive() { kill -0 "$kubelet_pid" 2>/dev/null; }

cat >"$k/manifests/web.yaml" <<EOP
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: shared, emptyDir: {}}]
  initContainers:
  - name: init
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo initialized > /shared/init"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: app
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "cat /shared/init; exec sleep 3600"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  - name: sidecar
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "exec sleep 3600"]
EOP
cat >"$k/manifests/crasher.yaml" <<EOP
apiVersion: v1
kind: Pod
metadata: {name: crasher, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Always
  containers:
  - name: crash
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "echo crashing; exit 3"]
EOP
web=web-$node crasher=crasher-$node

check "kubelet keeps running" alive
check "init container ran to completion" exited_ok init "$web"
check "app container running" running app "$web"
check "sidecar container running" running sidecar "$web"
app=$(cri ps --name '^app$' --label "io.kubernetes.pod.name=$web" -q | head -1)
if [ -n "$app" ] && cri logs "$app" 2>&1 | grep -q initialized; then
  pass=$((pass + 1)); echo "ok   app sees what the init container wrote"
else
  fail=$((fail + 1)); echo "FAIL app sees what the init container wrote"
fi
check "crashing container restarted" restarted crash "$crasher"

if [ -n "$cluster" ]; then
  node_ready() {
    [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
  }
  mirror_pod() { kubectl get pod "$web" -o jsonpath='{.metadata.annotations.kubernetes\.io/config\.mirror}' | grep -q .; }
  api_pod_running() { [ "$(kubectl get pod api-pod -o jsonpath='{.status.phase}')" = Running ]; }
  api_pod_gone() { ! kubectl get pod api-pod >/dev/null 2>&1; }
  check "node registered and Ready" node_ready
  check "static pod mirrored in the API" mirror_pod
  kubectl apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: api-pod, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  automountServiceAccountToken: false
  containers:
  - name: main
    image: $image
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "exec sleep 3600"]
EOP
  check "API pod scheduled here and Running" api_pod_running
  check "API pod container running (crictl)" running main api-pod
  kubectl delete pod api-pod --wait=false >/dev/null
  check "deleted API pod gone from the API" api_pod_gone
  check "deleted API pod stopped (crictl)" pod_stopped api-pod
fi

rm "$k/manifests/web.yaml" "$k/manifests/crasher.yaml"
check "deleted pod stopped" pod_stopped "$web"
check "deleted crashing pod stopped" pod_stopped "$crasher"
check "kubelet still running" alive

if [ "$fail" -gt 0 ]; then
  echo "--- kubelet log (last 40 lines)"; tail -40 "$k/kubelet.log"
fi
echo "kubelet ($("$kubelet" --version | awk '{print $2}')) on $runtime: $pass passed, $fail failed"
echo "kubelet: $pass passed, $fail failed"
[ "$fail" = 0 ]
