#!/usr/bin/env bash
# Installs everything nodelet and its tests need on Debian 12, as root. Idempotent: a second run
# changes nothing and takes seconds.
#   apt packages: the OCI runtimes, conmon, catatonit, CNI plugins, busybox, iptables, iproute2
#   Go tools:     crictl and critest from sigs.k8s.io/cri-tools (the module proxy serves exactly v1.36.0)
#   nodelet:      built into ./bin/nodelet and installed as /usr/local/bin/nodelet
set -euo pipefail

CRI_TOOLS_VERSION=v1.36.0
here=$(cd "$(dirname "$0")/.." && pwd)
bindir=/usr/local/bin

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages): sudo $0"

apt_packages=(runc crun conmon catatonit containernetworking-plugins busybox-static iptables iproute2
  util-linux mount e2fsprogs procps runsc containerd ca-certificates git curl
  gcc make libc6-dev bzip2)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian installs containerd as a service on systemd machines; nodelet's tests start their own.

# Pieces the interop tests need that apt cannot install side by side (Debian's dynamic busybox).
bash "$here/hack/install-extras.sh"

# Go: the module needs Go >= 1.26. Debian 12's golang-go is 1.19, too old even to switch toolchains
# itself, so when no Go >= 1.21 is on the machine the Go toolchain is fetched as what it also is, a
# module (golang.org/toolchain) from the Go module proxy, and linked into /usr/local/bin. A Go >= 1.21
# fetches the exact toolchain go.mod asks for by itself (GOTOOLCHAIN=auto).
GO_TOOLCHAIN=go1.26.8
export PATH=$PATH:/usr/local/go/bin:/root/go/bin
go_minor() { go version 2>/dev/null | sed -n 's/.*go1\.\([0-9]*\).*/\1/p'; }
if [ "$(go_minor || true)" = "" ] || [ "$(go_minor)" -lt 21 ]; then
  dest=/usr/local/lib/nodelet-go/$GO_TOOLCHAIN
  if [ ! -x "$dest/bin/go" ]; then
    command -v unzip >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip >/dev/null; }
    say "fetching the Go toolchain $GO_TOOLCHAIN from the Go module proxy"
    tmp=$(mktemp -d)
    proxy=${GOPROXY:-https://proxy.golang.org}; proxy=${proxy%%,*}
    curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-amd64.zip"
    unzip -q "$tmp/go.zip" -d "$tmp/x"
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest"
    mv "$tmp/x/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" "$dest"
    chmod +x "$dest"/bin/* "$dest"/pkg/tool/*/* 2>/dev/null || true
    rm -rf "$tmp"
  fi
  ln -sf "$dest/bin/go" /usr/local/bin/go
  ln -sf "$dest/bin/gofmt" /usr/local/bin/gofmt
  hash -r
fi
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

# crictl and critest from cri-tools, built once per version.
have_version() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "${CRI_TOOLS_VERSION#v}"; }
if ! have_version "$bindir/crictl" || [ ! -x "$bindir/critest" ]; then
  say "building crictl and critest ${CRI_TOOLS_VERSION} from the Go module proxy"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cri-tools@${CRI_TOOLS_VERSION}" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || die "could not download sigs.k8s.io/cri-tools@${CRI_TOOLS_VERSION}"
  ldflags="-X sigs.k8s.io/cri-tools/pkg/version.Version=${CRI_TOOLS_VERSION#v}"
  (cd "$dir" && CGO_ENABLED=0 go build -mod=mod -ldflags "$ldflags" -o "$tmp/crictl" ./cmd/crictl)
  (cd "$dir" && CGO_ENABLED=0 go test -mod=mod -c -ldflags "$ldflags" -o "$tmp/critest" ./cmd/critest)
  install -m 0755 "$tmp/crictl" "$tmp/critest" "$bindir/"
fi

say "building nodelet"
# grpcnotrace leaves out golang.org/x/net/trace (grpc's optional request tracing, unused here):
# its init makes html/template reachable, which keeps every exported method of every linked type
# (7.7 MB of binary; ~3.5 MB more resident in every nodelet process). See bench/README.md.
(cd "$here" && CGO_ENABLED=0 go build -tags grpcnotrace -o bin/nodelet ./cmd/nodelet)
# Beside it, then renamed: a nodelet running from that path (ETXTBSY) does not stop the install.
install -m 0755 "$here/bin/nodelet" "$bindir/.nodelet.new"
mv -f "$bindir/.nodelet.new" "$bindir/nodelet"
say "installed: $(nodelet --help >/dev/null && echo nodelet) $(crictl --version)"
