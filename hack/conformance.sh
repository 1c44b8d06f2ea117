#!/usr/bin/env bash
# The upstream Kubernetes e2e specs that exercise a node, run against `nodelet agent` as the only
# node of a loopback control plane, on nodelet's runtime or on containerd.
#
#   hack/conformance.sh [--runtime nodelet|containerd] [--node-suite | --subset]
#                       [--focus REGEX] [--skip REGEX] [--procs N] [--keep] [--skipped-to FILE]
#
# Builds (once, cached with the other Kubernetes binaries by hack/kube/build.sh) the node and
# storage specs of test/e2e as one test binary, agnhost and the ginkgo CLI from the module proxy
# at the version of hack/kube/build.sh; serves the suite's images from the loopback registry under
# their upstream names through registry mirrors (hack/images, on upstream busybox built by
# hack/kube/busybox.sh: agnhost built from source in an image laid out as upstream's, busybox,
# nginx, httpd, nonewprivs and nonroot stand-ins); starts kube-proxy too, so that pods reach the
# API server through the kubernetes Service;
# starts the runtime, the control plane and the agent; runs the specs with ginkgo in parallel and
# prints `conformance: N passed, N failed, N skipped`, then each failure's first line and the
# reasons the suite gave for the specs it skipped itself.
#
# What runs:
#   (default)      every [Conformance] spec of sig-node and sig-storage;
#   --node-suite   every [sig-node] and [sig-storage] spec of the binary, less those
#                  hack/node-suite-skips.txt lists, each with its reason (serial, disruptive,
#                  slow, flaky, feature-gated, or needing what one machine lacks);
#   --subset       what hack/test.sh runs: a slice of the conformance set
#                  (hack/conformance-subset.txt) and one of the rest of the node suite
#                  (hack/node-suite-subset.txt);
#   --focus REGEX  replaces the selection's focus; --skip REGEX adds to its skips.
# Where PID 1 keeps its mount namespace closed to root, every mode but --subset runs the node in a
# PID and mount namespace of its own (this script its PID 1), so that the suite's host-exec pods
# can enter the node's mount namespace.
# Specs of the conformance set that cannot run on one machine are skipped with the reason from
# hack/conformance-skips.txt in every mode. A selection that runs no spec fails. --keep keeps the
# work dir (reports, every component's log). --skipped-to appends to FILE (Markdown) every spec
# the suite skipped itself, under its reason. Exit 0 only when nothing failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kube/lib.sh
. "$here/kube/lib.sh"

usage="usage: $0 [--runtime nodelet|containerd] [--node-suite|--subset] [--focus REGEX] [--skip REGEX] [--procs N] [--keep] [--skipped-to FILE]"
args=("$@")
runtime=nodelet procs=3 mode=conformance user_focus= user_skip= skipped_to=
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) runtime=$2; shift 2 ;;
    --focus) user_focus=$2; shift 2 ;;
    --skip) user_skip=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --subset) mode=subset; shift ;;
    --node-suite) mode=node-suite; shift ;;
    --keep) export NL_KEEP=1; shift ;;
    --skipped-to) skipped_to=$(realpath -m -- "$2"); shift 2 ;;
    *) nl_die "unknown argument $1 ($usage)" ;;
  esac
done
case "$runtime" in nodelet|containerd) ;; *) nl_die "--runtime is nodelet or containerd, not $runtime" ;; esac

# The e2e suite reaches into the node through host-exec pods that enter the mount namespace of
# the node's PID 1 (nsenter --mount=/rootfs/proc/1/ns/mnt): how the storage specs make local
# volumes, loop devices and tmpfs mounts on the node. Where this machine's init refuses that even
# to root, the run (beyond the --subset slice hack/test.sh runs as it always has) takes a PID and
# mount namespace of its own, as a node in a container (kind's) does: this script is the node's
# PID 1, the node's mounts are shared among its pods and none reaches the host's namespace, and
# what is left running when the script ends dies with it.
if [ "$mode" != subset ] && [ -z "${NL_NODE_NS:-}" ] && ! nsenter --mount=/proc/1/ns/mnt -- true 2>/dev/null; then
  export NL_NODE_NS=1
  nl_say "PID 1 keeps its mount namespace closed: the node runs in a PID and mount namespace of its own"
  exec unshare --pid --fork --mount --propagation slave --mount-proc -- \
    bash -c 'mount --make-rshared / && exec bash "$0" "$@"' "$0" ${args[@]+"${args[@]}"}
fi

alternatives() { nl_alternatives "$@"; }
join_alt() { nl_join_alt "$@"; }

skip_files=("$here/conformance-skips.txt")
case "$mode" in
  conformance) focus='\[sig-node\].*\[Conformance\]|\[sig-storage\].*\[Conformance\]' ;;
  subset)
    focus=$(join_alt "$(alternatives "$here/conformance-subset.txt")" "$(alternatives "$here/node-suite-subset.txt")")
    skip_files+=("$here/node-suite-skips.txt") ;;
  node-suite)
    focus='\[sig-node\] |\[sig-storage\] '
    skip_files+=("$here/node-suite-skips.txt") ;;
esac
[ -z "$user_focus" ] || focus=$user_focus
# What this machine cannot do, found out here ("REGEX  # reason" as in the files): the e2e
# suite's host-exec pods enter the host's mount namespace through PID 1 (nsenter
# --mount=/proc/1/ns/mnt), which an init may refuse even to root (as a microVM's does); a
# microVM's kernel may also lack the dummy network driver.
machine_skips=()
if [ "$mode" != conformance ]; then
  if ! nsenter --mount=/proc/1/ns/mnt -- true 2>/dev/null; then
    machine_skips+=("\\[sig-node\\] Mount propagation  # its host-exec pod enters PID 1's mount namespace, which PID 1 refuses on this machine (nsenter --mount=/proc/1/ns/mnt: Permission denied)")
  fi
  # The privileged pod's proof of privilege is adding a dummy link, which needs the kernel's
  # dummy driver: tried here in a network namespace of our own, gone with the command.
  if ! unshare --net ip link add nl-dummy0 type dummy 2>/dev/null; then
    machine_skips+=("\\[sig-node\\] PrivilegedPod \\[NodeConformance\\] should enable privileged commands  # it adds a dummy network link, and this machine's kernel has no dummy driver (unshare --net ip link add nl-dummy0 type dummy: not supported)")
  fi
fi
skip=$user_skip
for f in "${skip_files[@]}"; do skip=$(join_alt "$skip" "$(alternatives "$f")"); done
for l in ${machine_skips[@]+"${machine_skips[@]}"}; do skip=$(join_alt "$skip" "${l%%  #*}"); done
[ -n "$focus" ] || nl_die "the focus is empty: it would select every spec of the binary"

NL_NAME=conformance
# Subnets of its own, so that a conformance run and hack/critest.sh (10.92/10.89) can share a machine.
export NL_NODELET_SUBNET=10.93.0.0/16 NL_CONTAINERD_SUBNET=10.94.0.0/16
nl_init conformance
t_start=$(date +%s)

bin=$("$here/kube/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl \
  kube-proxy e2e-node.test agnhost ginkgo | tail -1)
kube_dir=$(cd "$(dirname "$bin")/wrap-kube" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)

# The selection, as ginkgo's dry run counts it: a run that would select nothing stops here.
selected=$("$bin/e2e-node.test" --ginkgo.dry-run --ginkgo.no-color --ginkgo.focus="$focus" ${skip:+--ginkgo.skip="$skip"} 2>&1 |
  sed -n 's/^Will run \([0-9]*\) of \([0-9]*\) specs.*/\1 of \2/p')
case "$selected" in
  ''|0\ *) nl_die "the selection runs no spec (focus: $focus; skip: ${skip:-none}): nothing would be tested" ;;
esac
nl_say "selected $selected specs of the binary ($mode)"
busybox=$("$here/kube/busybox.sh" | tail -1)
NL_REGISTRY_ARGS=(--busybox "$busybox" --agnhost "$bin/agnhost" --agnhost-certs "$kube_dir/test/images/agnhost/porter")
nl_registry

# The runtime, and nodelet's binary for the agent either way.
if [ "$runtime" = containerd ]; then
  nl_containerd conformance
  endpoint=$NL_CONTAINERD_SOCK
  nl_say "building nodelet"
  (cd "$NL_ROOT" && CGO_ENABLED=0 go build -o "$NL_WORK/bin/nodelet" ./cmd/nodelet) || nl_die "go build ./cmd/nodelet failed"
  NL_NODELET_BIN=$NL_WORK/bin/nodelet
else
  nl_nodelet conformance
  endpoint=$NL_NODELET_SOCK
fi

# The node's address: the API server reaches the agent's API (logs, exec, port-forward) at the
# node's InternalIP, and refuses loopback ones; a TEST-NET-1 address on lo is never routed.
node=nodelet-conformance
node_ip=
for i in $(seq 0 249); do
  cand=192.0.2.$(( 2 + ($$ + i) % 250 ))
  ip -4 -o addr show | grep -q " $cand/" && continue
  ip addr add "$cand/32" dev lo && node_ip=$cand && break
done
[ -n "$node_ip" ] || nl_die "no free address in 192.0.2.0/24 for lo"
NL_AFTER+=("ip addr del $node_ip/32 dev lo")

# The API server listens on the node's address too, so that pods reach it through the kubernetes
# Service (in-cluster clients such as agnhost's nettest server read KUBERNETES_SERVICE_HOST).
cp_dir=$NL_WORK/control-plane
"$here/kube/control-plane.sh" start "$cp_dir" "$node" "$node_ip"
mapfile -t cp_pids <"$cp_dir/pids"
NL_PIDS+=("${cp_pids[@]}")
kubectl() { "$bin/kubectl" --kubeconfig "$cp_dir/admin.kubeconfig" "$@"; }

# kube-proxy maps Service IPs to endpoints with iptables. It is told to leave the conntrack and
# route_localnet sysctls alone; what it adds to iptables its --cleanup removes once it stopped.
# kube-proxy also makes the kubelet's KUBE-FIREWALL chain, which its --cleanup keeps: removed here
# unless it was there before (a kubelet of the host's own).
declare -A had_firewall
for t in iptables ip6tables; do
  if "$t" -S KUBE-FIREWALL >/dev/null 2>&1; then had_firewall[$t]=1; fi
done
free_port() { local p; for p in $(shuf -i 20000-40000 -n 100); do ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }; done; }
"$bin/kube-proxy" --kubeconfig "$cp_dir/admin.kubeconfig" --hostname-override "$node" --proxy-mode iptables \
  --bind-address "$node_ip" --healthz-bind-address "127.0.0.1:$(free_port)" --metrics-bind-address "127.0.0.1:$(free_port)" \
  --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
  --iptables-localhost-nodeports=false >"$NL_WORK/kube-proxy.log" 2>&1 &
NL_PIDS+=($!)
proxy_cleanup() {
  local t c
  "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  for t in iptables ip6tables; do
    [ -z "${had_firewall[$t]:-}" ] || continue
    for c in INPUT OUTPUT; do while "$t" -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done; done
    "$t" -F KUBE-FIREWALL 2>/dev/null; "$t" -X KUBE-FIREWALL 2>/dev/null
  done
  return 0
}
NL_AFTER+=(proxy_cleanup)

# Pods' cgroups under a root of this run's own, removed once the runtime removed the pods.
cg_root=/nodelet-conformance-$$
NL_AFTER+=("nl_remove_cgroup $cg_root")

# The kubelet's port, as on any node: specs reach the node's API through the API server's node
# proxy at port 10250 whatever the Node's daemonEndpoints say. Another port only when something
# else (a kubelet of the host's own) holds it; those specs then fail and say why.
agent_port=10250
if ss -Hltn "sport = :$agent_port" | grep -q .; then
  agent_port=$(free_port)
  nl_say "port 10250 is taken on this machine: the agent serves on $agent_port, specs that reach the node through the API server at 10250 will fail"
fi
mkdir -p "$NL_WORK/agent/manifests" "$NL_WORK/node-bin"
# The agent runs as `kubelet`, as a node installed the way kubeadm installs one: specs that look for
# the node's kubelet by name (`pidof kubelet`, to enter its mount namespace) find it.
ln -sf "$NL_NODELET_BIN" "$NL_WORK/node-bin/kubelet"
nl_say "starting nodelet agent as node $node ($node_ip:$agent_port) on $runtime"
"$NL_WORK/node-bin/kubelet" --kubeconfig "$cp_dir/node.kubeconfig" --container-runtime-endpoint "$endpoint" \
  --root-dir "$NL_WORK/agent/root" --pod-logs-dir "$NL_WORK/agent/logs" --pod-manifest-path "$NL_WORK/agent/manifests" \
  --hostname-override "$node" --node-ip "$node_ip" --address "$node_ip" --port "$agent_port" \
  --client-ca-file "$cp_dir/kubelet-ca.crt" --cgroup-root "$cg_root" --healthz-port 0 --api-socket "" \
  >"$NL_WORK/agent.log" 2>&1 &
NL_PIDS+=($!)
agent_pid=$!
node_ready() { [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
nl_wait 120 node_ready || { tail -30 "$NL_WORK/agent.log" >&2; nl_die "node $node not Ready after 120 s"; }
nl_say "node $node Ready after $(( $(date +%s) - t_start )) s"

# A line of hack/conformance-subset.txt that also matches a spec outside the conformance set would
# test what a node need not do, and a line of hack/node-suite-subset.txt that matches none of the
# node suite a spec it skips: ginkgo's dry run lists what each selects.
if [ "$mode" = subset ]; then
  dry() { "$bin/e2e-node.test" --ginkgo.dry-run --ginkgo.v --ginkgo.no-color --ginkgo.focus="$1" ${2:+--ginkgo.skip="$2"} 2>&1 | grep -E '^\[sig-' || true; }
  outside=$(dry "$(alternatives "$here/conformance-subset.txt")" | grep -v '\[Conformance\]' || true)
  [ -z "$outside" ] || nl_die "hack/conformance-subset.txt selects specs outside the conformance set: $outside"
  suite=$(dry '\[sig-node\] |\[sig-storage\] ' "$skip")
  while IFS= read -r line; do
    grep -qE -- "$line" <<<"$suite" || nl_die "hack/node-suite-subset.txt: $line selects no spec of the node suite"
  done < <(sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d' "$here/node-suite-subset.txt")
fi

report=$NL_WORK/report
mkdir -p "$report"
nl_say "running e2e-node.test on $procs processes (focus: $focus)"
t_run=$(date +%s)
set +e
# KUBE_TEST_REPO_LIST is not needed: the images keep their upstream names and the runtime's
# registry mirrors send them to the loopback registry, as a node behind a mirror sees them.
(cd "$report" && "$bin/ginkgo" --procs="$procs" --focus="$focus" ${skip:+--skip="$skip"} --timeout=3h \
  --no-color --succinct --silence-skips --json-report=report.json --output-dir="$report" "$bin/e2e-node.test" -- \
  --kubeconfig="$cp_dir/admin.kubeconfig" --provider=local --report-dir="$report" \
  --e2e-output-dir="$report" --dump-logs-on-failure=false) >"$NL_WORK/ginkgo.log" 2>&1
ginkgo_rc=$?
set -e
kill -0 "$agent_pid" 2>/dev/null || nl_say "the agent exited during the run: see $NL_WORK/agent.log"
tail -5 "$NL_WORK/ginkgo.log" >&2
[ -s "$report/report.json" ] || { tail -40 "$NL_WORK/ginkgo.log" >&2; nl_die "ginkgo wrote no report (exit $ginkgo_rc)"; }

(cd "$NL_ROOT" && go run ./hack/kube/e2ereport --focus "$focus" ${skip:+--skip "$skip"} ${skipped_to:+--skipped "$skipped_to"} "$report/report.json") || ginkgo_rc=1
echo "conformance run ($mode): $runtime, $(( $(date +%s) - t_run )) s of specs, $(( $(date +%s) - t_start )) s in all"
if [ ${#machine_skips[@]} -gt 0 ]; then
  echo "not run on this machine:"
  for l in "${machine_skips[@]}"; do printf '  %s: %s\n' "${l%%  #*}" "${l#*  # }"; done
fi
for f in "${skip_files[@]}"; do
  reasons=$(sed -n 's/^\([^#[:space:]].*[^[:space:]]\)[[:space:]]*#[[:space:]]*\(.*\)$/  \1: \2/p' "$f")
  [ -z "$reasons" ] || printf 'not run here (hack/%s):\n%s\n' "$(basename "$f")" "$reasons"
done
[ -z "${NL_KEEP:-}" ] || nl_say "reports and logs in $NL_WORK"
exit "$ginkgo_rc"
