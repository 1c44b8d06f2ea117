#!/usr/bin/env bash
# Runs every test of nodelet, as root, and fails when any fails:
#   1. go vet and go test ./...: unit tests, and integration tests that drive the real daemon over
#      CRI with runc, crun, runsc, conmon and the CNI plugins;
#   2. critest (cri-tools v1.36.0's conformance suite) against `nodelet runtime`;
#   3. the upstream kubelet v1.34.4 on nodelet's runtime, standalone and joined to a loopback
#      control plane (the Kubernetes binaries are built once from the Go module proxy and cached in
#      /var/cache/nodelet: ~7–12 minutes the first time on a machine, seconds afterwards);
#   4. nodelet agent joined to that control plane (Node, Lease, mirror pod, Deployment, graceful
#      delete, scale to 0, pressure, resize, the upstream sample device plugin, metrics-server and
#      Prometheus as clients, a CSI driver, local block devices, rancher's local-path provisioner
#      under a StatefulSet), on nodelet's runtime and on containerd;
#   5. a subset of the upstream Kubernetes conformance specs (hack/conformance-subset.txt) with
#      nodelet agent as the node (hack/conformance.sh runs the whole node set by hand);
#   6. a cluster of two nodelet nodes in network namespaces of their own (hack/cluster.sh check):
#      a pod on each node reaches the other, the cluster DNS answers, nothing is left after.
# go test replays every fuzz target's seed corpus (testdata/fuzz/) as plain tests; it never searches
# for new inputs, whose outcome would depend on what a random search finds that day (that is
# hack/fuzz.sh DURATION, run by hand). At the end, no cgroup of the tests (named nodelet-*) may be left.
# Installs what is missing first (hack/install.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

[ "$(id -u)" = 0 ] || { echo "test.sh: the tests mount, make namespaces and cgroups: run as root (sudo $0)" >&2; exit 1; }
bash hack/install.sh
export PATH=$PATH:/usr/local/go/bin:/usr/local/bin
export GOFLAGS=${GOFLAGS:--buildvcs=false}

step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "go vet ./..."
go vet ./...
step "go test ./..."
go test -count=1 -timeout 30m ./... "$@"
step "critest against nodelet runtime"
bash hack/critest.sh
step "building the upstream Kubernetes binaries (cached)"
bash hack/kube/build.sh >/dev/null
bash hack/kube/build.sh sample-device-plugin metrics-server prometheus local-path-provisioner coredns >/dev/null
step "the upstream kubelet on nodelet's runtime, standalone and in a cluster"
bash hack/kube/kubelet-on-nodelet.sh --cluster
step "nodelet agent joined to a real control plane, on nodelet's runtime and on containerd"
go test -tags cluster -count=1 -timeout 15m -run '^TestCluster' ./agent/integration/
step "Kubernetes conformance specs, a subset, nodelet agent on nodelet's runtime"
bash hack/conformance.sh --subset
step "two nodelet nodes, one control plane: pod to pod across nodes, cluster DNS"
bash hack/cluster.sh check
step "nothing left behind: the tests' cgroups (all named nodelet-*)"
left=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name 'nodelet-*' 2>/dev/null | sort || true)
[ -z "$left" ] || { echo "test.sh: cgroups left behind by the tests:" >&2; echo "$left" >&2; exit 1; }
step "all tests passed"
