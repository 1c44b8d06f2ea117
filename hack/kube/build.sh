#!/usr/bin/env bash
# Builds the upstream Kubernetes node and control-plane binaries (kubelet, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) and etcd/etcdctl from the Go module proxy, for the
# interop tests that run them against nodelet. Nothing upstream is reachable except the module proxy, so
# each is built from source in a throwaway wrapper module generated under the cache dir (never inside
# this repository, so `go test ./...` of nodelet never sees it).
#
# k8s.io/kubernetes cannot be required as is: its go.mod points every staging module (k8s.io/api,
# k8s.io/client-go, ...) at ./staging/src/..., which a module download lacks. The wrapper replaces each
# with its published v0.X.Y twin. Binaries that exist already are kept, so a second run takes seconds.
#
#   hack/kube/build.sh [BINARY...]       default: all of them
# BINARY may also be one of the conformance runner's (hack/conformance.sh), built only when named:
#   e2e-node.test  the node and storage specs of test/e2e as one test binary (hack/kube/_e2e)
#   agnhost        test/images/agnhost, the program of the suite's main test image
#   ginkgo         the ginkgo CLI at the version the suite requires (runs e2e-node.test in parallel)
#   kube-proxy     maps Services (the kubernetes Service included) for the suite's pods
#   sample-device-plugin  test/images/sample-device-plugin: two devices of example.com/resource,
#                  registered at the hard-coded /var/lib/kubelet/device-plugins/kubelet.sock
#   metrics-server sigs.k8s.io/metrics-server (kubectl top's source of figures)
#   prometheus     github.com/prometheus/prometheus's server, with only its file, HTTP and
#                  Kubernetes service discovery (build tags remove_all_sd,enable_kubernetes_sd)
#   local-path-provisioner  github.com/rancher/local-path-provisioner, a dynamic provisioner of
#                  local and hostPath PVs whose helper pods make the volumes' folders on the node
#   coredns        github.com/coredns/coredns with the plugins of a cluster's DNS (hack/kube/_coredns),
#                  hack/cluster.sh's kube-dns
# Env: KUBE_VERSION (v1.34.4), ETCD_VERSION (v3.6.5), METRICS_SERVER_VERSION (v0.8.0),
# PROMETHEUS_VERSION (v0.316.0, the Go module of Prometheus 3.16), LOCAL_PATH_VERSION (v0.0.30),
# COREDNS_VERSION (v1.14.3),
# NODELET_CACHE (/var/cache/nodelet).
# Prints the bin dir on its last line.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.8.0}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.3}
cache=${NODELET_CACHE:-/var/cache/nodelet}
base=$cache/kube-$KUBE_VERSION
bin=$base/bin
export PATH=$PATH:/usr/local/go/bin
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto} CGO_ENABLED=0
export GOFLAGS=-mod=mod
unset GOWORK || true

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'kube/build.sh: %s\n' "$*" >&2; exit 1; }

kube_bins=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl)
etcd_bins=(etcd etcdctl)
e2e_bins=(e2e-node.test agnhost ginkgo kube-proxy sample-device-plugin metrics-server prometheus local-path-provisioner coredns)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${kube_bins[@]}" "${etcd_bins[@]}")
mkdir -p "$bin"

is_kube() { local b; for b in "${kube_bins[@]}" kube-proxy; do [ "$b" = "$1" ] && return 0; done; return 1; }

# kube_wrapper writes the wrapper module for k8s.io/kubernetes at $KUBE_VERSION into $1.
kube_wrapper() {
  local dir=$1 gomod staging=${KUBE_VERSION/v1./v0.}
  [ -f "$dir/go.mod" ] && return 0
  mkdir -p "$dir"
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
    sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$KUBE_VERSION"
  {
    echo "module nodelet.local/kubewrap"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod"
    sed -n 's/^godebug \(.*\)$/godebug \1/p' "$gomod"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # "	k8s.io/api => ./staging/src/k8s.io/api" → "replace k8s.io/api => k8s.io/api v0.34.4"
    sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*$#replace \1 => \1 '"$staging"'#p' "$gomod"
  } >"$dir/go.mod.tmp"
  grep -q '^replace k8s.io/api ' "$dir/go.mod.tmp" || die "no staging replace lines found in $gomod"
  # No go.sum yet: GOFLAGS=-mod=mod lets each build fill it with what that binary needs.
  mv "$dir/go.mod.tmp" "$dir/go.mod"
}

etcd_wrapper() {
  local dir=$1
  [ -f "$dir/go.mod" ] && return 0
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOM
module nodelet.local/etcdwrap

go 1.24

require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdctl/v3 $ETCD_VERSION
)
EOM
}

# tool_wrapper DIR MODULE VERSION writes a wrapper module requiring one tool's module, so each tool
# resolves its own dependencies, apart from the others'.
tool_wrapper() {
  local dir=$1 mod=$2 version=$3
  [ -f "$dir/go.mod" ] && return 0
  mkdir -p "$dir"
  printf 'module nodelet.local/toolwrap\n\ngo 1.24\n\nrequire %s %s\n' "$mod" "$version" >"$dir/go.mod"
}

kube_ldflags() {
  local v=${KUBE_VERSION#v} major minor
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  local p=k8s.io/component-base/version
  echo "-s -w -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor" \
    "-X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z" \
    "-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
}

start=$(date +%s)
kdir=$base/wrap-kube
edir=$cache/etcd-$ETCD_VERSION/wrap
# The suite's source is ours: a binary built from another version of it is rebuilt.
e2e_src=$(cd "$(dirname "$0")" && pwd)/_e2e/node_test.go
e2e_sum=$(sha256sum "$e2e_src" | cut -d' ' -f1)
coredns_src=$(cd "$(dirname "$0")" && pwd)/_coredns/main.go
coredns_sum=$(sha256sum "$coredns_src" | cut -d' ' -f1)
for b in "${want[@]}"; do
  if [ "$b" = e2e-node.test ] && [ "$(cat "$bin/$b.src" 2>/dev/null)" != "$e2e_sum" ]; then rm -f "$bin/$b"; fi
  if [ "$b" = coredns ] && [ "$(cat "$bin/$b.src" 2>/dev/null)" != "$coredns_sum" ]; then rm -f "$bin/$b"; fi
  if [ -x "$bin/$b" ]; then continue; fi
  t0=$(date +%s)
  if is_kube "$b"; then
    kube_wrapper "$kdir"
    say "building $b $KUBE_VERSION"
    (cd "$kdir" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b")
  elif [ "$b" = etcd ]; then
    etcd_wrapper "$edir"
    say "building etcd $ETCD_VERSION"
    (cd "$edir" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" go.etcd.io/etcd/server/v3)
  elif [ "$b" = etcdctl ]; then
    etcd_wrapper "$edir"
    say "building etcdctl $ETCD_VERSION"
    (cd "$edir" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" go.etcd.io/etcd/etcdctl/v3)
  elif [ "$b" = e2e-node.test ]; then
    kube_wrapper "$kdir"
    mkdir -p "$kdir/nodeconformance"
    cp "$e2e_src" "$kdir/nodeconformance/node_test.go"
    say "building $b (node and storage specs of test/e2e $KUBE_VERSION)"
    (cd "$kdir" && go test -c -trimpath -ldflags "$(kube_ldflags)" -o "$bin/$b.tmp" ./nodeconformance)
    echo "$e2e_sum" >"$bin/$b.src"
  elif [ "$b" = agnhost ]; then
    kube_wrapper "$kdir"
    say "building agnhost ($KUBE_VERSION's test/images/agnhost)"
    (cd "$kdir" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" k8s.io/kubernetes/test/images/agnhost)
  elif [ "$b" = sample-device-plugin ]; then
    kube_wrapper "$kdir"
    say "building the sample device plugin ($KUBE_VERSION's test/images/sample-device-plugin)"
    (cd "$kdir" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" k8s.io/kubernetes/test/images/sample-device-plugin)
  elif [ "$b" = metrics-server ]; then
    d=$cache/metrics-server-$METRICS_SERVER_VERSION/wrap
    tool_wrapper "$d" sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION"
    say "building metrics-server $METRICS_SERVER_VERSION"
    (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" sigs.k8s.io/metrics-server/cmd/metrics-server)
  elif [ "$b" = prometheus ]; then
    d=$cache/prometheus-$PROMETHEUS_VERSION/wrap
    tool_wrapper "$d" github.com/prometheus/prometheus "$PROMETHEUS_VERSION"
    say "building prometheus $PROMETHEUS_VERSION"
    (cd "$d" && go build -trimpath -tags remove_all_sd,enable_kubernetes_sd -ldflags "-s -w" -o "$bin/$b.tmp" github.com/prometheus/prometheus/cmd/prometheus)
  elif [ "$b" = local-path-provisioner ]; then
    d=$cache/local-path-provisioner-$LOCAL_PATH_VERSION/wrap
    tool_wrapper "$d" github.com/rancher/local-path-provisioner "$LOCAL_PATH_VERSION"
    say "building local-path-provisioner $LOCAL_PATH_VERSION"
    (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" github.com/rancher/local-path-provisioner)
  elif [ "$b" = coredns ]; then
    d=$cache/coredns-$COREDNS_VERSION/wrap
    tool_wrapper "$d" github.com/coredns/coredns "$COREDNS_VERSION"
    cp "$coredns_src" "$d/main.go"
    say "building coredns $COREDNS_VERSION"
    (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" .)
    echo "$coredns_sum" >"$bin/$b.src"
  elif [ "$b" = ginkgo ]; then
    kube_wrapper "$kdir"
    say "building the ginkgo CLI"
    (cd "$kdir" && go build -trimpath -ldflags "-s -w" -o "$bin/$b.tmp" github.com/onsi/ginkgo/v2/ginkgo)
  else
    die "unknown binary $b (want one of: ${kube_bins[*]} ${etcd_bins[*]} ${e2e_bins[*]})"
  fi
  mv "$bin/$b.tmp" "$bin/$b"
  say "$b built in $(( $(date +%s) - t0 )) s"
done
say "done in $(( $(date +%s) - start )) s"
echo "$bin"
