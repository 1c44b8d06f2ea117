#!/usr/bin/env bash
# A throwaway Kubernetes control plane on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler from hack/kube/build.sh) for tests that join a node agent — nodelet's agent or the
# upstream kubelet — to a real API server. Ready in about 10 s; ~470 MB RSS.
#
#   hack/kube/control-plane.sh start DIR [NODE [ADDR]]   start in the background; DIR must not exist.
#       Writes DIR/admin.kubeconfig (system:masters) and DIR/node.kubeconfig (system:node:NODE in
#       system:nodes, for the Node authorizer; NODE defaults to nodelet-test-node), DIR/pids, DIR/*.log.
#       NODE may be a comma-separated list: each node then also gets DIR/node-NAME.kubeconfig
#       (DIR/node.kubeconfig is the first's). CP_APISERVER_ARGS adds flags to kube-apiserver.
#       The API server reaches nodes' APIs (logs, exec, port-forward, the node proxy) at their
#       InternalIP first, as kube-apiserver-kubelet-client (bound to system:kubelet-api-admin) with
#       DIR/kubelet-client.crt, issued by DIR/kubelet-ca.crt: give nodes --client-ca-file DIR/kubelet-ca.crt.
#       The API server listens on ADDR (default 127.0.0.1) and advertises it as the kubernetes
#       Service's endpoint: pods reach it there once a proxy maps the Service (hack/conformance.sh
#       gives the node's non-loopback address and runs kube-proxy). Its self-signed certificate
#       (DIR/pki/apiserver.crt, with its CA) is the root CA that service account volumes carry.
#       CP_CLUSTER_CIDR (a /16) has the controller-manager give each node a /24 of it
#       (spec.podCIDR, the nodeipam controller), as kubeadm's --pod-network-cidr does.
#   hack/kube/control-plane.sh stop DIR            stop exactly the processes start recorded, remove DIR.
#   hack/kube/control-plane.sh check               start, wait for /readyz, create and read an object, stop.
# Privileged pods are allowed (--allow-privileged), as kubeadm's and kind's control planes allow them.
# Authentication is by static tokens and TLS is the API server's self-signed certificate, which the
# kubeconfigs do not verify: for loopback tests only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

die() { printf 'control-plane.sh: %s\n' "$*" >&2; exit 1; }
say() { printf '==> %s\n' "$*" >&2; }

free_port() { # a loopback TCP port nobody listens on
  local p
  for p in $(shuf -i 20000-40000 -n 100); do
    ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
  done
  die "no free port"
}

# listening PID PORT: wait until PID listens on PORT. A port picked in advance can be taken by another
# process before the component binds it; the component then exits, and the caller picks new ports:
# 1 when PID exited first, 2 when it did not listen within 60 s.
listening() {
  local pid=$1 port=$2 deadline=$(( $(date +%s) + 60 ))
  while kill -0 "$pid" 2>/dev/null; do
    ss -Hltnp "sport = :$port" | grep -q "pid=$pid," && return 0
    [ "$(date +%s)" -lt "$deadline" ] || return 2
    sleep 0.1
  done
  return 1
}

kubeconfig() { # kubeconfig FILE ADDR PORT USER TOKEN
  cat >"$1" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$2:$3", insecure-skip-tls-verify: true}
users:
- name: $4
  user: {token: "$5"}
contexts:
- name: local
  context: {cluster: local, user: $4}
current-context: local
EOK
}

kubelet_client_cert() { # kubelet_client_cert DIR: a CA for nodes to trust and the API server's client cert
  local d=$1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=nodelet-test-kubelet-ca -keyout "$d/kubelet-ca.key" -out "$d/kubelet-ca.crt" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj /CN=kube-apiserver-kubelet-client -keyout "$d/kubelet-client.key" -out "$d/kubelet-client.csr" 2>/dev/null
  printf 'keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$d/kubelet-client.ext"
  openssl x509 -req -in "$d/kubelet-client.csr" -CA "$d/kubelet-ca.crt" -CAkey "$d/kubelet-ca.key" \
    -CAcreateserial -days 2 -extfile "$d/kubelet-client.ext" -out "$d/kubelet-client.crt" 2>/dev/null
  chmod 600 "$d/kubelet-ca.key" "$d/kubelet-client.key"
}

start() {
  local dir=$1 node=${2:-nodelet-test-node} addr=${3:-127.0.0.1} bin ep pp api admin nodetok
  [ ! -e "$dir" ] || die "$dir exists"
  bin=$("$here/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl | tail -1)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  admin=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf '%s,admin,admin,system:masters\n' "$admin" >"$dir/tokens.csv"
  local n i nodes=() nodetoks=()
  IFS=, read -r -a nodes <<<"$node"
  for n in "${nodes[@]}"; do
    nodetok=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    nodetoks+=("$nodetok")
    printf '%s,system:node:%s,node-%s,system:nodes\n' "$nodetok" "$n" "$n" >>"$dir/tokens.csv"
  done
  node=${nodes[0]} nodetok=${nodetoks[0]}
  chmod 600 "$dir/tokens.csv"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  kubelet_client_cert "$dir"
  echo "$bin" >"$dir/bin"
  : >"$dir/pids"

  local try pid rc
  for try in 1 2 3; do
    ep=$(free_port) pp=$(free_port)
    say "etcd on 127.0.0.1:$ep"
    "$bin/etcd" --name nodelet-test --data-dir "$dir/etcd" \
      --listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
      --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
      --initial-cluster "nodelet-test=http://127.0.0.1:$pp" --log-level warn >>"$dir/etcd.log" 2>&1 &
    pid=$! rc=0
    listening "$pid" "$ep" || rc=$?
    [ "$rc" -ne 2 ] || { kill -KILL "$pid"; stop "$dir"; die "etcd did not listen in 60 s (see its log)"; }
    [ "$rc" -ne 0 ] || break
    say "etcd exited at start (attempt $try): $(tail -1 "$dir/etcd.log")"
    rm -rf "$dir/etcd"
  done
  [ "$rc" -eq 0 ] || { stop "$dir"; die "etcd exited at start three times"; }
  echo "$pid" >>"$dir/pids"

  for try in 1 2 3; do
    api=$(free_port)
    kubeconfig "$dir/admin.kubeconfig" "$addr" "$api" admin "$admin"
    kubeconfig "$dir/node.kubeconfig" "$addr" "$api" "system:node:$node" "$nodetok"
    if [ ${#nodes[@]} -gt 1 ]; then
      for i in "${!nodes[@]}"; do
        kubeconfig "$dir/node-${nodes[$i]}.kubeconfig" "$addr" "$api" "system:node:${nodes[$i]}" "${nodetoks[$i]}"
      done
    fi
    say "kube-apiserver on https://$addr:$api"
    "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$ep" --bind-address "$addr" \
      --advertise-address "$addr" --secure-port "$api" --cert-dir "$dir/pki" \
      --token-auth-file "$dir/tokens.csv" --authorization-mode Node,RBAC \
      --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/sa.pub" \
      --service-account-signing-key-file "$dir/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
      --enable-admission-plugins NodeRestriction --allow-privileged=true \
      --kubelet-client-certificate "$dir/kubelet-client.crt" --kubelet-client-key "$dir/kubelet-client.key" \
      --kubelet-preferred-address-types InternalIP,Hostname ${CP_APISERVER_ARGS:-} >>"$dir/apiserver.log" 2>&1 &
    pid=$! rc=0
    listening "$pid" "$api" || rc=$?
    [ "$rc" -ne 2 ] || { kill -KILL "$pid"; tail -20 "$dir/apiserver.log" >&2; stop "$dir"; die "kube-apiserver did not listen in 60 s"; }
    [ "$rc" -ne 0 ] || break
    say "kube-apiserver exited at start (attempt $try): $(tail -1 "$dir/apiserver.log")"
  done
  [ "$rc" -eq 0 ] || { tail -20 "$dir/apiserver.log" >&2; stop "$dir"; die "kube-apiserver exited at start three times"; }
  echo "$pid" >>"$dir/pids"

  # The API server writes its self-signed certificate at start; service account volumes carry it.
  local deadline=$(( $(date +%s) + 60 ))
  until [ -s "$dir/pki/apiserver.crt" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { tail -20 "$dir/apiserver.log" >&2; stop "$dir"; die "kube-apiserver wrote no certificate in 60 s"; }
    sleep 0.1
  done
  # Neither serves anything a test reads, so neither listens (--secure-port 0): no port to lose.
  say "kube-controller-manager and kube-scheduler"
  local ipam=(--controllers '*,-nodeipam')
  [ -z "${CP_CLUSTER_CIDR:-}" ] ||
    ipam=(--controllers '*' --allocate-node-cidrs --cluster-cidr "$CP_CLUSTER_CIDR" --node-cidr-mask-size 24)
  "$bin/kube-controller-manager" --kubeconfig "$dir/admin.kubeconfig" --bind-address 127.0.0.1 \
    --secure-port 0 --service-account-private-key-file "$dir/sa.key" --use-service-account-credentials \
    --root-ca-file "$dir/pki/apiserver.crt" \
    --leader-elect=false "${ipam[@]}" >"$dir/controller-manager.log" 2>&1 &
  echo $! >>"$dir/pids"
  "$bin/kube-scheduler" --kubeconfig "$dir/admin.kubeconfig" --bind-address 127.0.0.1 \
    --secure-port 0 --leader-elect=false >"$dir/scheduler.log" 2>&1 &
  echo $! >>"$dir/pids"

  deadline=$(( $(date +%s) + 60 ))
  # Ready means pods can be created: /readyz, and the default service account that admission
  # looks up, which the controller-manager makes a moment later.
  until "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 &&
    "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" -n default get serviceaccount default >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -20 "$dir/apiserver.log" >&2
      stop "$dir"
      die "control plane not ready after 60 s"
    fi
    sleep 0.3
  done
  for pid in $(tail -2 "$dir/pids"); do
    kill -0 "$pid" 2>/dev/null || { tail -5 "$dir/controller-manager.log" "$dir/scheduler.log" >&2; stop "$dir"; die "kube-controller-manager or kube-scheduler exited at start"; }
  done
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding kube-apiserver-kubelet-client \
    --clusterrole system:kubelet-api-admin --user kube-apiserver-kubelet-client >/dev/null
  say "ready: export KUBECONFIG=$dir/admin.kubeconfig"
}

stop() {
  local dir=$1 p
  [ -f "$dir/pids" ] || die "$dir/pids missing: not started by this script"
  for p in $(tac "$dir/pids"); do kill -TERM "$p" 2>/dev/null || true; done
  for p in $(tac "$dir/pids"); do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$dir"
}

check() {
  local dir t0 bin
  dir=$(mktemp -d /tmp/nodelet-cp.XXXXXX) && rmdir "$dir"
  CHECK_DIR=$dir
  trap '[ ! -d "$CHECK_DIR" ] || stop "$CHECK_DIR"' EXIT
  t0=$(date +%s%N)
  start "$dir"
  echo "control plane ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  bin=$(cat "$dir/bin")
  k() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
  k create configmap nodelet-check --from-literal=ok=yes >/dev/null
  [ "$(k get configmap nodelet-check -o jsonpath='{.data.ok}')" = yes ] || die "configmap round trip failed"
  # The node identity may read only what the Node authorizer allows: its own Node is creatable.
  "$bin/kubectl" --kubeconfig "$dir/node.kubeconfig" auth can-i create nodes >/dev/null 2>&1 ||
    die "node token cannot create nodes"
  openssl verify -CAfile "$dir/kubelet-ca.crt" -purpose sslclient "$dir/kubelet-client.crt" >/dev/null ||
    die "the API server's kubelet client certificate does not verify against kubelet-ca.crt"
  echo "rss: $(for p in $(cat "$dir/pids"); do awk '/^VmRSS:/ {print $2}' "/proc/$p/status"; done |
    awk '{s += $1} END {printf "%.0f MB", s / 1024}')"
  echo "control plane: ok"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [NODE [ADDR]]"; start "$2" "${3:-}" "${4:-}" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  check) check ;;
  *) die "usage: $0 start DIR [NODE [ADDR]] | stop DIR | check" ;;
esac
