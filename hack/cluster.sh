#!/usr/bin/env bash
# A cluster of several nodes on this machine: one loopback control plane and N nodes, each in a
# network namespace of its own with its own runtime, agent and kube-proxy.
#
#   hack/cluster.sh up [--nodes N] [--runtime nodelet|containerd] [--agent nodelet|kubelet] [--dir DIR]
#       starts it in the background and ends with a line KUBECONFIG=<file> (an admin's).
#   hack/cluster.sh down [--dir DIR]     stops everything up started and removes it.
#   hack/cluster.sh check [--nodes N] [--runtime ...] [--agent ...]
#       up, then: a pod pinned to each node reaches the other's pod IP, the cluster DNS answers
#       kubernetes.default.svc.cluster.local in a pod; then down, and nothing of it left behind.
#
# DIR (default /run/nodelet-cluster) holds the admin kubeconfig, the log of the cluster's own
# process and the work dir (every component's log). The layout, as a kubeadm cluster with a
# host-gw network plugin has it:
#   - the host gets bridge nlc-br0 at 10.200.0.1/24; the API server listens there (its etcd on
#     loopback), and node i is the network namespace nlc-i, its eth0 at 10.200.0.(10+i) on the
#     bridge (a veth), its default route via the host;
#   - the controller-manager gives each node a /24 of 10.244.0.0/16 (spec.podCIDR); once it has,
#     the node's CNI configuration (bridge + host-local on that /24, portmap) is written, and
#     every node and the host route each node's /24 via its address;
#   - each node runs its runtime (nodelet's, or containerd), its agent (nodelet's, or the upstream
#     kubelet v1.34.4 with --agent kubelet) and kube-proxy (iptables, in its namespace), each with
#     its own socket, root, state and cgroup root; the host routes the Service range 10.96.0.0/16
#     to node 1, whose kube-proxy forwards (and masquerades) what the API server sends to Services;
#   - CoreDNS (built from its Go module, hack/kube/build.sh coredns) runs as the kube-dns
#     Deployment at 10.96.0.10, each agent's --cluster-dns;
#   - images come from the loopback registry (hack/images) under their upstream names: the
#     stand-ins critest and the e2e suite pull (busybox 1.37.0-1, agnhost 2.56, ...) and CoreDNS.
# Nothing goes to the host's iptables; what up adds to the host (the bridge, its routes, the
# namespaces, cgroups, the registry's and components' processes) down removes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }
usage="usage: $0 up|down|check [--nodes N] [--runtime nodelet|containerd] [--agent nodelet|kubelet] [--dir DIR]"

cmd=${1:-}
[ $# -gt 0 ] && shift
dir=/run/nodelet-cluster nodes=2 runtime=nodelet agent=nodelet
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    --agent) agent=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) die "unknown argument $1 ($usage)" ;;
  esac
done
case "$nodes" in [1-9]) ;; *) die "--nodes is 1 to 9, not $nodes" ;; esac
case "$runtime" in nodelet|containerd) ;; *) die "--runtime is nodelet or containerd, not $runtime" ;; esac
case "$agent" in nodelet|kubelet) ;; *) die "--agent is nodelet or kubelet, not $agent" ;; esac
[ "$(id -u)" = 0 ] || die "run as root (it makes network namespaces and starts runtimes): sudo $0 $cmd"
dir=$(realpath -m -- "$dir")

bridge=nlc-br0 host_ip=10.200.0.1 cluster_cidr=10.244.0.0/16 service_cidr=10.96.0.0/16 dns_ip=10.96.0.10
node_ip() { echo "10.200.0.$(( 10 + $1 ))"; }
node_ns() { echo "nlc-$1"; }
node_name() { echo "$agent-$1"; }

# up: the cluster's own process (serve) runs apart from this shell, in a session of its own;
# up waits until it says the cluster is ready, or until it exits.
up() {
  [ ! -e "$dir" ] || die "$dir exists: a cluster is up (hack/cluster.sh down${dir:+ --dir $dir})"
  mkdir -p "$dir"
  setsid bash "$0" _serve --nodes "$nodes" --runtime "$runtime" --agent "$agent" --dir "$dir" \
    </dev/null >"$dir/cluster.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/serve.pid"
  printf '==> starting %d %s node(s) on %s (log: %s)\n' "$nodes" "$agent" "$runtime" "$dir/cluster.log" >&2
  while [ ! -e "$dir/ready" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -30 "$dir/cluster.log" >&2
      rm -rf "$dir"
      die "the cluster did not come up (its log is above)"
    fi
    sleep 0.5
  done
  grep '^==> ' "$dir/cluster.log" | tail -3 >&2
  echo "KUBECONFIG=$dir/admin.kubeconfig"
}

down() {
  [ -f "$dir/serve.pid" ] || die "$dir/serve.pid missing: no cluster of this script's there"
  local pid
  pid=$(cat "$dir/serve.pid")
  # Only the process up started: its command line says so.
  if kill -0 "$pid" 2>/dev/null && [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" == *"cluster.sh _serve "*"--dir $dir " ]]; then
    kill -TERM "$pid"
    local deadline=$(( $(date +%s) + 300 ))
    while kill -0 "$pid" 2>/dev/null; do
      [ "$(date +%s)" -lt "$deadline" ] || die "the cluster's process $pid did not stop in 300 s (see $dir/cluster.log)"
      sleep 0.2
    done
  fi
  tail -1 "$dir/cluster.log" >&2 || true
  rm -rf "$dir"
}

# shellcheck disable=SC2317  # run through the EXIT trap
serve() {
  # shellcheck source=hack/kube/lib.sh
  . "$here/kube/lib.sh"
  NL_NAME=cluster
  nl_init cluster
  local t_start i
  t_start=$(date +%s)
  ln -s "$NL_WORK" "$dir/work"
  for (( i = 1; i <= nodes; i++ )); do
    ! ip netns list | grep -qw "$(node_ns "$i")" || nl_die "network namespace $(node_ns "$i") exists: another cluster is up"
  done
  ! ip link show "$bridge" >/dev/null 2>&1 || nl_die "$bridge exists: another cluster is up"
  for net in 10.200.0. 10.244. 10.96.; do
    ! ip -4 route | grep -q "^$net" || nl_die "the host routes $net* already: the cluster's subnets would clash"
  done

  bin=$("$here/kube/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl \
    kube-proxy agnhost coredns | tail -1)
  kube_dir=$(cd "$(dirname "$bin")/wrap-kube" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  busybox=$("$here/kube/busybox.sh" | tail -1)
  kubectl() { "$bin/kubectl" --kubeconfig "$cp_dir/admin.kubeconfig" "$@"; }

  network
  # The registry on the bridge: the nodes' runtimes pull from their namespaces.
  NL_REGISTRY_ADDR=$host_ip:0
  NL_REGISTRY_ARGS=(--host-only --busybox "$busybox" --agnhost "$bin/agnhost" --agnhost-certs "$kube_dir/test/images/agnhost/porter"
    --coredns "$bin/coredns")
  nl_registry
  names=()
  for (( i = 1; i <= nodes; i++ )); do names+=("$(node_name "$i")"); done
  cp_dir=$NL_WORK/control-plane
  CP_CLUSTER_CIDR=$cluster_cidr "$here/kube/control-plane.sh" start "$cp_dir" "$(IFS=,; echo "${names[*]}")" "$host_ip"
  mapfile -t cp_pids <"$cp_dir/pids"
  NL_PIDS+=("${cp_pids[@]}")
  cp "$cp_dir/admin.kubeconfig" "$dir/admin.kubeconfig"

  [ "$agent" = nodelet ] || { . "$here/kube/kubelet-lib.sh"; kl_build; kl_guard_host; }
  for (( i = 1; i <= nodes; i++ )); do start_node "$i"; done
  for (( i = 1; i <= nodes; i++ )); do pod_network "$i"; done
  node_ready() { [ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
  for (( i = 1; i <= nodes; i++ )); do
    nl_wait 180 node_ready "$(node_name "$i")" ||
      { tail -20 "$NL_WORK/$(node_name "$i")/agent.log" >&2; nl_die "node $(node_name "$i") not Ready after 180 s"; }
  done
  nl_say "$nodes node(s) Ready after $(( $(date +%s) - t_start )) s"
  cluster_dns
  nl_say "cluster ready after $(( $(date +%s) - t_start )) s: export KUBECONFIG=$dir/admin.kubeconfig"
  touch "$dir/ready"
  # Until down: TERM makes nl_init's trap stop and remove everything (the sleep too).
  NL_AFTER+=(stop_sleep)
  while :; do sleep 3600 & sleeper=$!; wait "$sleeper"; done
}

sleeper=
stop_sleep() { [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true; }

# network: the host's bridge, and a namespace per node on it.
network() {
  local i ns ip
  ip link add name "$bridge" type bridge
  NL_AFTER+=("ip link del $bridge")
  ip addr add "$host_ip/24" dev "$bridge"
  ip link set "$bridge" up
  for (( i = 1; i <= nodes; i++ )); do
    ns=$(node_ns "$i") ip=$(node_ip "$i")
    ip netns add "$ns"
    NL_AFTER+=("ip netns del $ns")
    ip link add name "nlc-$i-h" type veth peer name "nlc-$i-n"
    ip link set "nlc-$i-n" netns "$ns"
    ip link set "nlc-$i-h" master "$bridge" up
    in_ns "$i" ip link set lo up
    in_ns "$i" ip link set "nlc-$i-n" name eth0
    in_ns "$i" ip addr add "$ip/24" dev eth0
    in_ns "$i" ip link set eth0 up
    in_ns "$i" ip route add default via "$host_ip"
    # The node routes its pods' traffic, as a node does (in its namespace only).
    in_ns "$i" sysctl -q -w net.ipv4.ip_forward=1
  done
  nl_say "bridge $bridge ($host_ip), nodes' namespaces $(node_ns 1)..$(node_ns "$nodes") on 10.200.0.11..$(node_ip "$nodes")"
}

# in_ns I CMD...: CMD in node I's network namespace (nsenter: the mount namespace stays the
# host's, with its cgroup and sysfs mounts, which `ip netns exec` would replace). ns_exec is the
# same in place of the shell, for a daemon started as `(ns_exec I CMD...) &`: $! is then CMD's
# PID, which nl_cleanup stops.
in_ns() { local i=$1; shift; nsenter --net="/run/netns/$(node_ns "$i")" -- "$@"; }
ns_exec() { local i=$1; shift; exec nsenter --net="/run/netns/$(node_ns "$i")" -- "$@"; }

# start_node I: node I's runtime, kube-proxy and agent, in its namespace.
start_node() {
  local i=$1 name ip ns endpoint nd
  name=$(node_name "$i") ip=$(node_ip "$i") ns=$(node_ns "$i")
  nd=$NL_WORK/$name
  mkdir -p "$nd"
  # The runtime's CNI folder stays empty until the node has its pod CIDR (pod_network): the
  # runtime reports its network not ready, and the node is not Ready, until then.
  NL_NETNS=$ns NL_CNI_LATER=1
  if [ "$runtime" = containerd ]; then
    nl_containerd "$name"
    endpoint=$NL_CONTAINERD_SOCK
    nl_nodelet_bin
  else
    NL_NODELET_ARGS=(--no-default-network)
    nl_nodelet "$name"
    endpoint=$NL_NODELET_SOCK
  fi
  NL_NETNS= NL_CNI_LATER=

  # kube-proxy: its iptables rules and sysctls are the namespace's, gone with it.
  (ns_exec "$i" "$bin/kube-proxy" --kubeconfig "$cp_dir/admin.kubeconfig" --hostname-override "$name" --proxy-mode iptables \
    --bind-address "$ip" --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249 \
    --cluster-cidr "$cluster_cidr" --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
    --conntrack-tcp-timeout-close-wait 0) >"$nd/kube-proxy.log" 2>&1 &
  NL_PIDS+=($!)

  local cg=/nodelet-cluster-$$-$i
  NL_AFTER+=("nl_kill_cgroup $cg")
  nl_say "starting $agent as node $name ($ip:10250) on $runtime"
  local kc=$cp_dir/node-$name.kubeconfig
  [ -f "$kc" ] || kc=$cp_dir/node.kubeconfig # one node: control-plane.sh names it so
  if [ "$agent" = nodelet ]; then
    mkdir -p "$nd/agent/manifests" "$nd/bin"
    # Named kubelet, as a node installed the way kubeadm installs one (specs look for it by name).
    ln -sf "$NL_NODELET_BIN" "$nd/bin/kubelet"
    (ns_exec "$i" "$nd/bin/kubelet" --kubeconfig "$kc" --container-runtime-endpoint "$endpoint" \
      --root-dir "$nd/agent/root" --pod-logs-dir "$nd/agent/logs" --pod-manifest-path "$nd/agent/manifests" \
      --hostname-override "$name" --node-ip "$ip" --address "$ip" --port 10250 \
      --client-ca-file "$cp_dir/kubelet-ca.crt" --cgroup-root "$cg" --healthz-port 0 --api-socket "" \
      --cluster-dns "$dns_ip" --cluster-domain cluster.local) >"$nd/agent.log" 2>&1 &
  else
    make_cgroup "$cg" # the kubelet wants its cgroup root there
    KL_SERVE=$ip KL_CLIENT_CA=$cp_dir/kubelet-ca.crt KL_CGROUP_ROOT=$cg KL_CLUSTER_DNS=$dns_ip kl_config "$nd/agent" "$endpoint"
    (ns_exec "$i" "$KL_KUBELET" --config "$nd/agent/config.yaml" --kubeconfig "$kc" \
      --root-dir "$nd/agent/root" --cert-dir "$nd/agent/pki" --hostname-override "$name" --node-ip "$ip" \
      --v=2) >"$nd/agent.log" 2>&1 &
  fi
  NL_PIDS+=($!)
}

# make_cgroup PATH: the cgroup PATH in every hierarchy (v1's cpuset given its parent's CPUs and
# memory nodes, which a new cpuset lacks).
make_cgroup() {
  local d
  for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -e "$d/cgroup.procs" ] || continue
    mkdir -p "$d${1#/}"
    if [ -e "$d/cpuset.cpus" ] && [ -z "$(cat "$d${1#/}/cpuset.cpus")" ]; then
      cat "$d/cpuset.cpus" >"$d${1#/}/cpuset.cpus"
      cat "$d/cpuset.mems" >"$d${1#/}/cpuset.mems"
    fi
  done
}

# del_route CIDR: the host's route, unless it went with the bridge already.
del_route() { ip route del "$1" 2>/dev/null || true; }

# pod_network I: once the controller-manager gave node I its pod CIDR, the node's CNI
# configuration on it, and routes to it from the host and every other node.
pod_network() {
  local i=$1 name cidr j nd
  name=$(node_name "$i") nd=$NL_WORK/$name
  pod_cidr() { cidr=$(kubectl get node "$1" -o jsonpath='{.spec.podCIDR}' 2>/dev/null) && [ -n "$cidr" ]; }
  nl_wait 120 pod_cidr "$name" || { tail -20 "$nd/agent.log" >&2; nl_die "node $name got no pod CIDR in 120 s"; }
  pod_cidr "$name"
  mkdir -p "$nd/net.d" "$nd/cni-ipam"
  # No masquerade: pods keep their addresses across nodes, as a cluster's network plugin keeps them.
  cat >"$nd/net.d/.10-cluster.conflist" <<EOC
{
  "cniVersion": "1.0.0",
  "name": "cluster",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$nd/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOC
  mv "$nd/net.d/.10-cluster.conflist" "$nd/net.d/10-cluster.conflist"
  ip route add "$cidr" via "$(node_ip "$i")" dev "$bridge"
  NL_AFTER+=("del_route $cidr")
  for (( j = 1; j <= nodes; j++ )); do
    [ "$j" = "$i" ] || in_ns "$j" ip route add "$cidr" via "$(node_ip "$i")"
  done
  if [ "$i" = 1 ]; then
    ip route add "$service_cidr" via "$(node_ip 1)" dev "$bridge"
    NL_AFTER+=("del_route $service_cidr")
  fi
  nl_say "node $name: pods on $cidr"
}

# cluster_dns: CoreDNS as kube-dns, as kubeadm deploys it (without forwarding: nothing outside
# answers here).
cluster_dns() {
  kubectl apply -f - >/dev/null <<EOM
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      containers:
      - name: coredns
        image: registry.k8s.io/coredns/coredns:v1.12.1
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        securityContext:
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
        livenessProbe: {httpGet: {path: /health, port: 8080}, initialDelaySeconds: 10}
        readinessProbe: {httpGet: {path: /ready, port: 8181}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: config
        configMap: {name: coredns, items: [{key: Corefile, path: Corefile}]}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $dns_ip
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOM
  kubectl -n kube-system rollout status deployment/coredns --timeout 180s >&2 ||
    { kubectl -n kube-system describe pods -l k8s-app=kube-dns >&2; nl_die "CoreDNS is not available after 180 s"; }
  nl_say "CoreDNS serves the cluster's names at $dns_ip"
}

# check: up, the checks, down, and nothing left.
check() {
  local before_ipt k t0 a b ip_a out work
  before_ipt=$(iptables-save | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' | sort)
  dir=$(mktemp -d /tmp/nodelet-cluster-check.XXXXXX) && rmdir "$dir"
  t0=$(date +%s)
  trap '[ ! -e "$dir" ] || down' EXIT
  k=$(up | sed -n 's/^KUBECONFIG=//p')
  echo "cluster up in $(( $(date +%s) - t0 )) s"
  bin=$(cat "$dir/work/control-plane/bin")
  kc() { "$bin/kubectl" --kubeconfig "$k" "$@"; }
  a=$(node_name 1) b=$(node_name "$nodes")
  for n in "$a" "$b"; do
    kc apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: check-$n, labels: {app: check}}
spec:
  nodeName: $n
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.56
    args: [netexec, --http-port=8080]
EOP
  done
  kc wait --for=condition=Ready pod/"check-$a" pod/"check-$b" --timeout 120s >/dev/null
  ip_a=$(kc get pod "check-$a" -o jsonpath='{.status.podIP}')
  # netexec's /hostname answers with the pod's name: the reply comes from the other node's pod.
  out=$(kc exec "check-$b" -- curl -s --max-time 10 "http://$ip_a:8080/hostname")
  [ "$out" = "check-$a" ] || die "the pod on $b reached $ip_a (the pod on $a) and got '$out'"
  echo "a pod on $b reaches the pod on $a at $ip_a"
  out=$(kc exec "check-$b" -- nslookup kubernetes.default.svc.cluster.local)
  grep -q 'Address: *10.96.0.1$' <<<"$out" || die "the cluster DNS did not answer kubernetes.default: $out"
  echo "the cluster DNS answers kubernetes.default.svc.cluster.local: 10.96.0.1"
  work=$(readlink "$dir/work")
  down
  trap - EXIT
  ! pgrep -af -- "$work" || die "processes of the cluster left (above)"
  ! ip netns list | grep -q '^nlc-' || die "network namespaces left: $(ip netns list | grep '^nlc-')"
  ! ip link show "$bridge" >/dev/null 2>&1 || die "$bridge left"
  [ "$(iptables-save | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' | sort)" = "$before_ipt" ] || die "the host's iptables rules changed"
  ! ls -d /sys/fs/cgroup/*/nodelet-cluster-* /sys/fs/cgroup/nodelet-cluster-* 2>/dev/null | grep -q . || die "cgroups left"
  ! ip -4 route | grep -qE '^10\.(244|96)\.' || die "routes left"
  echo "cluster: ok"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  check) check ;;
  _serve) serve ;;
  *) die "$usage" ;;
esac
