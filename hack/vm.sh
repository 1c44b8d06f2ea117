#!/usr/bin/env bash
# hack/vm.sh -- COMMAND [ARG...]: runs a command as root on a Debian 12 host booted in a VM under
# QEMU with KVM, systemd as PID 1 and only the unified cgroup v2 hierarchy (the machines here run a
# hybrid v1 hierarchy without systemd), with this checkout shared at the same path, and exits with
# the command's status after printing its output.
#
# The root filesystem is built once per machine with mmdebstrap from Debian's packages (nothing is
# downloaded from elsewhere) into an ext4 image made without a loop mount (mkfs.ext4 -d), cached in
# $NODELET_CACHE/vm (default /var/cache/nodelet/vm) under a hash of this script's package list and
# setup (images of other hashes are removed); the VM boots Debian's kernel (linux-image-amd64: the
# cloud kernel has no 9p) from that image's /boot. Each run boots a copy-on-write overlay of the
# cached image (qcow2 backed by it), so runs never change it, and deletes the overlay.
#
# The checkout reaches the guest by virtio-9p; a systemd unit in the guest runs the command from a
# run folder in the share, writes its output and exit status there, and powers the VM off. The host
# waits for QEMU to exit; VM_TIMEOUT seconds (default 1800) only end a guest that never does.
#
# Env: VM_MEMORY (MiB, 2048), VM_CPUS (2), VM_TIMEOUT (s, 1800), NODELET_CACHE.
# hack/vm.sh --build-only builds (or finds) the image and prints its path.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${NODELET_CACHE:-/var/cache/nodelet}/vm
memory=${VM_MEMORY:-2048}
cpus=${VM_CPUS:-2}
timeout=${VM_TIMEOUT:-1800}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'vm.sh: %s\n' "$*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and uses /dev/kvm): sudo $0 $*"
[ $# -gt 0 ] || die "usage: $0 -- COMMAND [ARG...] | $0 --build-only"

# What the guest has: systemd, the kernel, and what tests of nodelet on a real systemd host use.
guest_packages=(systemd-sysv udev dbus kmod iproute2 iptables procps util-linux mount e2fsprogs
  linux-image-amd64 runc crun conmon catatonit containernetworking-plugins busybox-static
  ca-certificates)
host_packages=(qemu-system-x86 qemu-utils mmdebstrap e2fsprogs)

missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The guest's setup, hashed with the package list: a change to either builds a new image.
read -r -d '' guest_unit <<'EOF' || true
[Unit]
Description=Run the command the host put in the share, then power off
After=local-fs.target network.target
Wants=network.target

[Service]
Type=oneshot
StandardOutput=journal+console
ExecStart=/usr/local/sbin/vm-run
ExecStopPost=/bin/systemctl --no-block poweroff

[Install]
WantedBy=multi-user.target
EOF
read -r -d '' guest_runner <<'EOF' || true
#!/bin/sh
# Mounts the host's share at the path the host gave, runs the command there, and leaves its
# output and status in the run folder.
set -u
src=$(sed -n 's/.*vm.src=\([^ ]*\).*/\1/p' /proc/cmdline)
run=$(sed -n 's/.*vm.run=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p "$src"
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576,cache=none src "$src"; then
  echo "vm-run: cannot mount the share" >/dev/console
  exit 1
fi
cd "$src"
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  /bin/bash "$run/cmd" >"$run/out" 2>&1 </dev/null
echo $? >"$run/rc"
sync
EOF
hash=$(printf '%s\n%s\n%s\n' "${guest_packages[*]}" "$guest_unit" "$guest_runner" | sha256sum | cut -c1-16)
image=$cache/debian12-$hash.raw

build_image() {
  mkdir -p "$cache"
  local tmp
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  say "building the VM image (mmdebstrap bookworm, once per machine)"
  local inc
  inc=$(IFS=,; echo "${guest_packages[*]}")
  # The host's own Debian sources and apt options: the guest's packages come from where the
  # host's do.
  local mirror=()
  [ -f /etc/apt/sources.list.d/debian.sources ] && mirror=(/etc/apt/sources.list.d/debian.sources)
  mmdebstrap --quiet --variant=minbase --include="$inc" --aptopt='Acquire::Check-Valid-Until "false"' \
    bookworm "$tmp/root" "${mirror[@]}" >&2
  printf '%s\n' "$guest_unit" >"$tmp/root/etc/systemd/system/vm-run.service"
  printf '%s\n' "$guest_runner" >"$tmp/root/usr/local/sbin/vm-run"
  chmod 755 "$tmp/root/usr/local/sbin/vm-run"
  ln -sf /etc/systemd/system/vm-run.service "$tmp/root/etc/systemd/system/multi-user.target.wants/vm-run.service"
  printf 'nodelet-vm\n' >"$tmp/root/etc/hostname"
  printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$tmp/root/etc/fstab"
  # No login prompt waits on the console; root has no password (the VM has no network to log in from).
  ln -sf /dev/null "$tmp/root/etc/systemd/system/serial-getty@ttyS0.service"
  ln -sf /dev/null "$tmp/root/etc/systemd/system/getty@tty1.service"
  # The guest's own network: loopback only (tests make their own namespaces).
  local kernel initrd
  kernel=$(ls "$tmp"/root/boot/vmlinuz-* | head -1)
  initrd=$(ls "$tmp"/root/boot/initrd.img-* | head -1)
  [ -f "$kernel" ] && [ -f "$initrd" ] || die "the image has no kernel or initrd in /boot"
  cp "$kernel" "$tmp/vmlinuz"
  cp "$initrd" "$tmp/initrd.img"
  mkfs.ext4 -q -F -L nodelet-vm -d "$tmp/root" "$tmp/image.raw" 8G
  rm -f "$cache"/debian12-*.raw "$cache"/debian12-*.vmlinuz "$cache"/debian12-*.initrd
  mv "$tmp/vmlinuz" "${image%.raw}.vmlinuz"
  mv "$tmp/initrd.img" "${image%.raw}.initrd"
  mv "$tmp/image.raw" "$image"
}

[ -f "$image" ] || build_image
if [ "$1" = --build-only ]; then
  echo "$image"
  exit 0
fi
[ "$1" = -- ] && shift
[ $# -gt 0 ] || die "no command given"

run=$(mktemp -d "$here/.vm-run.XXXXXX")
overlay=$(mktemp "$cache/overlay.XXXXXX.qcow2")
cleanup() { rm -rf "$run" "$overlay"; }
trap cleanup EXIT

# The command as one shell line, each argument quoted.
printf '%q ' "$@" >"$run/cmd"
echo >>"$run/cmd"
qemu-img create -q -f qcow2 -F raw -b "$image" "$overlay"

# /dev/kvm here is kvm_pvm (a pagetable-based hypervisor for nested guests): it runs only guest
# kernels built for PVM, which Debian ships none of, and Debian's kernel hangs in its decompressor
# under it. QEMU's TCG emulation then boots the same kernel, slower; KVM is used where it is real.
accel=(-enable-kvm -cpu host)
if [ -d /sys/module/kvm_pvm ] || [ ! -d /sys/module/kvm_intel ] && [ ! -d /sys/module/kvm_amd ]; then
  echo "vm.sh: /dev/kvm cannot run Debian's kernel on this machine (no kvm_intel or kvm_amd): emulating (TCG)" >&2
  accel=(-accel tcg,thread=multi -cpu max)
fi

start=$(date +%s)
# timeout ends a guest that never powers off (its console tells why); nothing else waits on time.
rc=0
timeout -k 10 "$timeout" qemu-system-x86_64 "${accel[@]}" -m "$memory" -smp "$cpus" -nodefaults -no-reboot \
  -kernel "${image%.raw}.vmlinuz" -initrd "${image%.raw}.initrd" \
  -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet vm.src=$here vm.run=$run" \
  -drive "file=$overlay,if=virtio,format=qcow2" \
  -virtfs "local,path=$here,mount_tag=src,security_model=none,id=src" \
  -display none -serial "file:$run/console" || rc=$?
echo "vm.sh: the VM ran for $(($(date +%s) - start))s" >&2
if [ "$rc" = 124 ]; then
  echo "vm.sh: the VM did not power off within ${timeout}s; console:" >&2
  tail -n 40 "$run/console" >&2 || true
  exit 124
fi
if [ ! -f "$run/rc" ]; then
  echo "vm.sh: the command never finished in the VM (QEMU exited $rc); console:" >&2
  tail -n 40 "$run/console" >&2 || true
  exit 125
fi
cat "$run/out"
exit "$(cat "$run/rc")"
