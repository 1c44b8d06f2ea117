# shellcheck shell=bash
# Shared by hack/critest.sh, hack/kube/*.sh and bench/cri.sh (source it; it is not run alone).
# Starts the pieces the interop scripts need on a private work dir and stops exactly what it
# started: the loopback image registry (hack/images), a private containerd, nodelet's runtime.
#   nl_init NAME           make $NL_WORK (a temp dir) and set the EXIT trap that cleans up
#   nl_registry            build and start hack/images; sets NL_REGISTRY=127.0.0.1:PORT
#   nl_containerd NAME     start containerd with its own root/state/socket; sets NL_CONTAINERD_SOCK
#   nl_nodelet NAME        build and start `nodelet runtime`; sets NL_NODELET_SOCK
#   nl_alternatives FILE, nl_join_alt PART...   regular expressions joined into one
# Every runtime gets registry mirrors that send the upstream registries the stand-ins are named
# after to NL_REGISTRY over plain HTTP.

NL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NL_MIRRORED=(registry.k8s.io k8s.gcr.io gcr.io public.ecr.aws docker.io)
NL_PIDS=()          # processes this script started, killed in reverse order
declare -A NL_PID_SOCK  # runtime daemon PID → its CRI endpoint, whose pods go before it stops
NL_BRIDGES=()       # bridges created by the CNI configs written here
NL_NETWORKS=()      # their network names (host-local keeps its leases under /var/lib/cni/networks)
NL_NODELET_ARGS=()  # extra `nodelet runtime` flags a caller adds after sourcing
NL_REGISTRY_ARGS=() # extra `images serve` flags (the conformance images)
NL_AFTER=()         # commands nl_cleanup runs once every process is stopped
NL_UP_DRAIN=()      # "MANIFESTS SOCKET" of each `nodelet up`, drained first at cleanup
NL_NETNS=           # a network namespace (ip netns) nl_containerd and nl_nodelet start the runtime in
NL_CNI_LATER=       # set: nl_containerd and nl_nodelet leave the CNI folder empty (the caller fills it)
NL_REGISTRY_ADDR=127.0.0.1:0  # where nl_registry listens (a host-only bridge's address: --host-only)
export PATH=$PATH:/usr/local/go/bin:/usr/local/bin:/usr/sbin:/sbin
export GOFLAGS=${GOFLAGS:--buildvcs=false}

nl_say() { printf '==> %s\n' "$*" >&2; }
# nl_alternatives FILE: its lines without comments and blank lines, joined by |
nl_alternatives() { sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d' "$1" | paste -sd'|'; }
# nl_join_alt PART...: the non-empty parts joined by |. An empty part would make an alternative
# that matches every spec: as a skip, one that runs nothing.
nl_join_alt() { local out= a; for a in "$@"; do [ -z "$a" ] || out=${out:+$out|}$a; done; printf '%s' "$out"; }
nl_die() { printf '%s: %s\n' "${NL_NAME:-nodelet}" "$*" >&2; exit 1; }

nl_init() {
  NL_NAME=$1
  [ "$(id -u)" = 0 ] || nl_die "run as root (it starts container runtimes): sudo $0"
  NL_WORK=$(mktemp -d "/tmp/nodelet-$NL_NAME.XXXXXX")
  # A user-namespaced pod's mapped root must be able to reach its rootfs below this dir.
  chmod 0711 "$NL_WORK"
  # crictl otherwise warns on every call that /etc/crictl.yaml is missing.
  printf 'timeout: 60\n' >"$NL_WORK/crictl.yaml"
  export CRI_CONFIG_FILE=$NL_WORK/crictl.yaml
  trap nl_cleanup EXIT
  trap 'exit 130' INT TERM
}

nl_wait() { # nl_wait SECONDS CMD... : retry CMD until it succeeds
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

nl_cleanup() {
  local rc=$? s p i d
  set +e
  # A `nodelet up`'s pods go first through its own agent: with its manifests removed it stops them,
  # and the runtime's removal below does not race an agent starting them again.
  for d in "${NL_UP_DRAIN[@]}"; do
    rm -f "${d%% *}"/*.yaml
    for _ in $(seq 600); do
      [ -z "$(crictl --runtime-endpoint "${d#* }" pods -q 2>/dev/null)" ] && break
      sleep 0.1
    done
  done
  # Reverse start order: clients (a kubelet) stop before the runtime they use, and a runtime's
  # pods are removed (its shims or conmons outlive it otherwise) before the runtime stops.
  for (( i=${#NL_PIDS[@]}-1; i>=0; i-- )); do
    p=${NL_PIDS[$i]}
    s=${NL_PID_SOCK[$p]:-}
    [ -z "$s" ] || crictl --runtime-endpoint "$s" --timeout 30s rmp -fa >/dev/null 2>&1
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ -n "${NL_WORK:-}" ] && [ -d "$NL_WORK" ]; then
    # Mounts left by a runtime under its root (overlay rootfs, shm, pinned namespaces).
    awk -v w="$NL_WORK" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
      while read -r m; do umount -l "$m" 2>/dev/null; done
    if [ -n "${NL_KEEP:-}" ]; then nl_say "kept $NL_WORK"; else rm -rf "$NL_WORK"; fi
  fi
  for b in "${NL_BRIDGES[@]}"; do ip link del "$b" 2>/dev/null; done
  for b in "${NL_NETWORKS[@]}"; do rm -rf "/var/lib/cni/networks/$b"; done
  for s in "${NL_AFTER[@]}"; do $s; done
  exit "$rc"
}

# nl_remove_cgroup PATH removes the cgroup PATH (and every cgroup below it) from every hierarchy,
# once the processes in it are gone.
nl_remove_cgroup() {
  local d
  for d in /sys/fs/cgroup/*"$1" /sys/fs/cgroup"$1"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

nl_registry() {
  nl_say "building and starting the image registry (hack/images)"
  (cd "$NL_ROOT" && go build -o "$NL_WORK/bin/images" ./hack/images) || nl_die "go build ./hack/images failed"
  (cd "$NL_ROOT" && exec "$NL_WORK/bin/images" serve --addr "$NL_REGISTRY_ADDR" --ready-file "$NL_WORK/registry.addr" "${NL_REGISTRY_ARGS[@]}") \
    >"$NL_WORK/registry.log" 2>&1 &
  NL_PIDS+=($!)
  nl_wait 120 test -s "$NL_WORK/registry.addr" || { cat "$NL_WORK/registry.log" >&2; nl_die "registry did not start"; }
  NL_REGISTRY=$(cat "$NL_WORK/registry.addr")
  nl_say "registry on http://$NL_REGISTRY"
}

# nl_cni_conf DIR NAME BRIDGE SUBNET: a bridge + host-local + portmap network (no masquerade:
# nothing leaves the machine, and no host NAT rule is left behind).
nl_cni_conf() {
  mkdir -p "$1"
  cat >"$1/10-$2.conflist" <<EOC
{
  "cniVersion": "1.0.0",
  "name": "$2",
  "plugins": [
    {"type": "bridge", "bridge": "$3", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$4"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOC
  NL_BRIDGES+=("$3")
  NL_NETWORKS+=("$2")
}

# nl_in_netns CMD...: CMD in NL_NETNS when set (nsenter enters only the network namespace: the
# mount namespace, with its cgroup and sysfs mounts, stays the host's).
nl_in_netns() {
  if [ -n "$NL_NETNS" ]; then exec nsenter --net="/run/netns/$NL_NETNS" -- "$@"; else exec "$@"; fi
}

# nl_runtime_cni DIR NAME BRIDGE SUBNET: the runtime's CNI folder, empty when NL_CNI_LATER says so.
nl_runtime_cni() {
  if [ -n "$NL_CNI_LATER" ]; then mkdir -p "$1"; else nl_cni_conf "$@"; fi
}

nl_containerd() {
  local name=$1 dir=$NL_WORK/$1 h
  command -v containerd >/dev/null || nl_die "containerd missing: apt-get install -y containerd"
  mkdir -p "$dir/certs.d"
  for h in "${NL_MIRRORED[@]}"; do
    mkdir -p "$dir/certs.d/$h"
    # The loopback registry as the mirror and as the server behind it, so containerd never falls
    # back to the real registry (nothing outside is reachable; containerd 1.6 wants a [host] table).
    printf '# %s\nserver = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
      "$h" "$NL_REGISTRY" "$NL_REGISTRY" >"$dir/certs.d/$h/hosts.toml"
  done
  nl_runtime_cni "$dir/net.d" "ctrd-$name" "ctrd${name:0:6}0" "${NL_CONTAINERD_SUBNET:-10.89.0.0/16}"
  cat >"$dir/config.toml" <<EOC
version = 2
root = "$dir/root"
state = "$dir/state"
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  # Root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj would make runc fail.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/certs.d"
EOC
  nl_say "starting containerd ($dir)"
  (nl_in_netns containerd --config "$dir/config.toml") >"$dir/containerd.log" 2>&1 &
  NL_PIDS+=($!)
  NL_CONTAINERD_PID=$!
  NL_CONTAINERD_SOCK=unix://$dir/containerd.sock
  nl_wait 60 crictl --runtime-endpoint "$NL_CONTAINERD_SOCK" info ||
    { tail -20 "$dir/containerd.log" >&2; nl_die "containerd did not come up"; }
  NL_PID_SOCK[$NL_CONTAINERD_PID]=$NL_CONTAINERD_SOCK
}

nl_nodelet_bin() { # builds nodelet into NL_NODELET_BIN unless a caller set one
  [ -z "${NL_NODELET_BIN:-}" ] || return 0
  nl_say "building nodelet"
  (cd "$NL_ROOT" && CGO_ENABLED=0 go build -tags grpcnotrace -o "$NL_WORK/bin/nodelet" ./cmd/nodelet) || nl_die "go build ./cmd/nodelet failed"
  NL_NODELET_BIN=$NL_WORK/bin/nodelet
}

# nl_nodelet_up NAME CIDR [ARGS...]: `nodelet up`, agent and runtime in one process, on
# NL_WORK/NAME: static pods from its manifests/ folder, its own socket, cgroup root (killed and
# removed at exit) and CNI bridge on CIDR. Sets NL_UP_PID, NL_UP_SOCK, NL_UP_MANIFESTS.
nl_nodelet_up() {
  local name=$1 cidr=$2 dir=$NL_WORK/$1 h mirrors=() cg
  shift 2
  mkdir -p "$dir/manifests"
  nl_nodelet_bin
  for h in "${NL_MIRRORED[@]}"; do mirrors+=(--registry-mirror "$h=http://$NL_REGISTRY"); done
  nl_cni_conf "$dir/net.d" "nodelet-$name" "nl${name:0:8}0" "$cidr"
  cg=nodelet-$name-$$
  NL_AFTER+=("nl_kill_cgroup /$cg")
  nl_say "starting nodelet up ($dir)"
  "$NL_NODELET_BIN" up --root "$dir/root" --state "$dir/state" --listen "unix://$dir/cri.sock" \
    --root-dir "$dir/root/agent" --manifests "$dir/manifests" --api-socket "$dir/state/agent.sock" \
    --healthz-port 0 --pod-logs-dir "$dir/logs" --cgroup-root "/$cg" --cgroup-parent "/$cg/pods" \
    --cni-conf-dir "$dir/net.d" --no-default-network "${mirrors[@]}" "$@" >"$dir/nodelet.log" 2>&1 &
  NL_PIDS+=($!)
  NL_UP_PID=$!
  NL_UP_SOCK=unix://$dir/cri.sock
  NL_UP_MANIFESTS=$dir/manifests
  NL_PID_SOCK[$NL_UP_PID]=$NL_UP_SOCK
  NL_UP_DRAIN+=("$NL_UP_MANIFESTS $NL_UP_SOCK")
  nl_wait 60 crictl --runtime-endpoint "$NL_UP_SOCK" version ||
    { tail -20 "$dir/nodelet.log" >&2; nl_die "nodelet up did not come up"; }
}

# nl_kill_cgroup PATH: what still runs in a cgroup tree of ours (containers whose removal did not
# finish before their daemon stopped) is killed, then the tree removed.
nl_kill_cgroup() {
  local p
  local p procs
  for _ in $(seq 50); do
    procs=$(find /sys/fs/cgroup/*"$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
    [ -n "$procs" ] || break
    for p in $procs; do kill -KILL "$p" 2>/dev/null; done
    sleep 0.1
  done
  nl_remove_cgroup "$1"
}

nl_nodelet() {
  local name=$1 dir=$NL_WORK/$1 h mirrors=()
  mkdir -p "$dir"
  nl_nodelet_bin
  [[ "$("$NL_NODELET_BIN" runtime --help 2>&1)" == *--registry-mirror* ]] ||
    nl_die "this nodelet's runtime has no --registry-mirror flag yet: it cannot pull the stand-in images"
  for h in "${NL_MIRRORED[@]}"; do mirrors+=(--registry-mirror "$h=http://$NL_REGISTRY"); done
  # The same bridge + portmap network as the containerd here, on its own bridge and subnet.
  nl_runtime_cni "$dir/net.d" "nodelet-$name" "nl${name:0:8}0" "${NL_NODELET_SUBNET:-10.92.0.0/16}"
  nl_say "starting nodelet runtime ($dir)"
  # Sandboxes that name no cgroup parent (critest's) go under one of this run's own, not the
  # runtime's default /nodelet, and it goes with the run.
  NL_NODELET_CGROUP=/nodelet-$name-runtime-$$
  NL_AFTER+=("nl_remove_cgroup $NL_NODELET_CGROUP")
  (nl_in_netns "$NL_NODELET_BIN" runtime --root "$dir/root" --state "$dir/state" --listen "unix://$dir/nodelet.sock" \
    --cni-conf-dir "$dir/net.d" --cgroup-parent "$NL_NODELET_CGROUP" "${mirrors[@]}" "${NL_NODELET_ARGS[@]}") \
    >"$dir/nodelet.log" 2>&1 &
  NL_PIDS+=($!)
  NL_NODELET_PID=$!
  NL_NODELET_SOCK=unix://$dir/nodelet.sock
  nl_wait 60 crictl --runtime-endpoint "$NL_NODELET_SOCK" version ||
    { tail -20 "$dir/nodelet.log" >&2; nl_die "nodelet runtime did not come up"; }
  NL_PID_SOCK[$NL_NODELET_PID]=$NL_NODELET_SOCK
}
