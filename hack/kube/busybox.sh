#!/usr/bin/env bash
# Builds upstream busybox (the version the Kubernetes e2e busybox image is made of) as a static
# binary for the conformance stand-in images, and prints its path on the last line. Built once per
# machine and cached in $NODELET_CACHE (default /var/cache/nodelet); a second run takes no time.
#
# Why not the host's: Debian reverts busybox's change that lets ash pass environment variables whose
# names are not identifiers (data-1, as envFrom makes them) on to the commands it runs, so the
# suite's envFrom specs would fail on the stand-in, not on the node. The source is Debian's copy of
# the upstream release (the .orig tarball of the trixie source package, checked by apt against
# Debian's signed index) with none of Debian's patches, built from `make defconfig` as the official
# busybox image is, with gcc and glibc's static libraries (hack/install.sh installs them).
#
# Env: BUSYBOX_VERSION (1.37.0), NODELET_CACHE (/var/cache/nodelet).
set -euo pipefail
BUSYBOX_VERSION=${BUSYBOX_VERSION:-1.37.0}
cache=${NODELET_CACHE:-/var/cache/nodelet}
dir=$cache/busybox-$BUSYBOX_VERSION
out=$dir/busybox

die() { printf 'kube/busybox.sh: %s\n' "$*" >&2; exit 1; }
say() { printf '==> %s\n' "$*" >&2; }

if [ -x "$out" ]; then echo "$out"; exit 0; fi
for t in gcc make bzip2 apt-get; do
  command -v "$t" >/dev/null || die "$t is missing: run hack/install.sh (apt-get install -y gcc make libc6-dev bzip2)"
done
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/libc.a ] || die "glibc's static library is missing: apt-get install -y libc6-dev"

t0=$(date +%s)
work=$dir/work
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/archives/partial"
# A private apt state: the machine's own sources and lists stay as they are.
printf 'deb-src http://deb.debian.org/debian trixie main\n' >"$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=- \
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives" -o APT::Get::List-Cleanup=0 \
  -o APT::Sandbox::User=root)
say "fetching busybox $BUSYBOX_VERSION's source (Debian trixie)"
apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log" >&2; die "apt-get update of the trixie sources failed"; }
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only busybox >>"$work/apt.log" 2>&1) ||
  { tail -5 "$work/apt.log" >&2; die "apt-get source busybox failed"; }
orig=$work/busybox_$BUSYBOX_VERSION.orig.tar.bz2
[ -f "$orig" ] || die "Debian's source no longer holds busybox $BUSYBOX_VERSION (found: $(cd "$work" && ls busybox_*.orig.* 2>/dev/null))"
tar -xjf "$orig" -C "$work"
src=$work/busybox-$BUSYBOX_VERSION
say "building busybox $BUSYBOX_VERSION (static, defconfig)"
(
  cd "$src"
  make defconfig >/dev/null
  # Static, as the official image's binary; tc is left out: newer kernel headers lack its CBQ parts.
  sed -i -e 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' -e 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' .config
  make -j"$(nproc)" busybox >"$work/build.log" 2>&1
) || { tail -20 "$work/build.log" >&2; die "building busybox failed"; }
"$src/busybox" --list-full | grep -qx bin/sh || die "the built busybox has no sh"
install -m 0755 "$src/busybox" "$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$work"
say "busybox $BUSYBOX_VERSION built in $(( $(date +%s) - t0 )) s"
echo "$out"
