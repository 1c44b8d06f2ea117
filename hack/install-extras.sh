#!/usr/bin/env bash
# Extra host pieces the interop scripts need (critest stand-in images, the HostIpc specs), as root.
# Idempotent; hack/install.sh calls it.
#   - Debian's dynamic busybox (package `busybox`), which conflicts with busybox-static, so it is
#     extracted rather than installed: its applets run as separate processes, which critest's
#     MaskedPaths and pidof-based specs look at. Put at $NODELET_DYNAMIC_BUSYBOX
#     (default /usr/local/libexec/nodelet/busybox-dynamic), where test/harness/testimage finds it.
#   - ipcmk (util-linux), for critest's HostIpc specs; ipcs (util-linux) and pgrep (procps), which the
#     stand-in of registry.k8s.io/e2e-test-images/busybox copies in (busybox has neither).
set -euo pipefail
dest=${NODELET_DYNAMIC_BUSYBOX:-/usr/local/libexec/nodelet/busybox-dynamic}

[ "$(id -u)" = 0 ] || { echo "install-extras.sh: run as root" >&2; exit 1; }

if [ ! -x "$dest" ]; then
  echo "==> extracting Debian's dynamic busybox to $dest" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download busybox >/dev/null 2>&1); then
    apt-get update -qq
    (cd "$tmp" && apt-get download busybox >/dev/null)
  fi
  dpkg -x "$tmp"/busybox_*.deb "$tmp/x"
  install -D -m 0755 "$tmp/x/bin/busybox" "$dest"
fi

missing=()
command -v ipcmk >/dev/null && command -v ipcs >/dev/null || missing+=(util-linux)
command -v pgrep >/dev/null || missing+=(procps)
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
