#!/usr/bin/env bash
# Runs every test of nodelet, as root: unit tests and the integration tests that drive the real
# daemon over CRI with runc, crun, conmon and the CNI plugins. Installs what is missing first.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

[ "$(id -u)" = 0 ] || { echo "test.sh: the tests mount, make namespaces and cgroups: run as root (sudo $0)" >&2; exit 1; }
bash hack/install.sh
export PATH=$PATH:/usr/local/go/bin:/usr/local/bin
export GOFLAGS=${GOFLAGS:--buildvcs=false}

echo "==> go vet ./..."
go vet ./...
echo "==> go test ./..."
go test -count=1 -timeout 30m ./... "$@"
