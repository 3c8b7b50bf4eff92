#!/usr/bin/env bash
# Run a command inside a small soft-RoCE VM (see shared/RXE-VM.md): Debian's kernel under qemu
# TCG, the host's root over 9p (read-only), a writable 9p share as the guest's /tmp, rdma_rxe on
# a dummy netdev (rxe0, 10.99.0.1). Prints the command's output and exits with its exit code.
#
#   usertools/gw-rxe-vm.sh [--install] [--timeout S] [--mem MiB] [--smp N] -- CMD [ARGS...]
#
# Exit codes: the command's; 77 when qemu, the kernel or busybox are missing (run with
# --install or GW_RXE_INSTALL=1 to apt-get them); 124 when the VM ran past --timeout; 125 when
# the VM came up but never reported the command's exit code (the boot log is printed).
# Environment: GW_* variables, PATH and LD_LIBRARY_PATH are passed to the command; the working
# directory is kept. GW_RXE_WORK (default /tmp/gw-rxe-vm-$UID) caches the initramfs.
set -euo pipefail

timeout_s=540
mem=2048
smp=2
install=${GW_RXE_INSTALL:-0}
vm_pkgs=(qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-utils
         ibverbs-providers perftest cpio kmod iproute2)
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1 ;;
    --timeout) timeout_s=$2; shift ;;
    --mem) mem=$2; shift ;;
    --smp) smp=$2; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gw-rxe-vm: unknown option $1 (use -- before the command)" >&2; exit 2 ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "gw-rxe-vm: no command given (usage: $0 -- CMD ARGS...)" >&2; exit 2; }

find_kernel() { ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1; }
missing() {
  local m=()
  command -v qemu-system-x86_64 >/dev/null || m+=(qemu-system-x86)
  [ -n "$(find_kernel)" ] || m+=(linux-image-amd64)
  [ -x /bin/busybox ] && file_is_static /bin/busybox || m+=(busybox-static)
  command -v ibv_devices >/dev/null || m+=(ibverbs-utils)
  command -v rdma >/dev/null || m+=(iproute2)
  command -v modprobe >/dev/null || m+=(kmod)
  command -v cpio >/dev/null || m+=(cpio)
  echo "${m[*]:-}"
}
file_is_static() { ! ldd "$1" >/dev/null 2>&1; }

miss=$(missing)
if [ -n "$miss" ] && [ "$install" = 1 ]; then
  echo "gw-rxe-vm: installing ${vm_pkgs[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${vm_pkgs[@]}" >/dev/null
  miss=$(missing)
fi
if [ -n "$miss" ]; then
  echo "gw-rxe-vm: SKIP: missing $miss (apt-get install ${vm_pkgs[*]}, or run with --install)"
  exit 77
fi

kernel=$(find_kernel)
kver=${kernel#/boot/vmlinuz-}
mods=/lib/modules/$kver/kernel
work=${GW_RXE_WORK:-/tmp/gw-rxe-vm-$(id -u)}
mkdir -p "$work"
initrd=$work/initrd-$kver.cpio.gz

# --- initramfs: busybox, the modules that reach the 9p root, /init (cached per kernel) ---
if [ ! -s "$initrd" ] || [ "$initrd" -ot "$0" ]; then
  root=$(mktemp -d "$work/initrd.XXXXXX")
  mkdir -p "$root"/{bin,dev,proc,sys,newroot,mods}
  cp /bin/busybox "$root/bin/busybox"
  for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_modern_dev \
           virtio/virtio_pci_legacy_dev virtio/virtio_pci; do
    cp "$mods/drivers/$m.ko" "$root/mods/"
  done
  for m in fs/netfs/netfs fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p; do
    cp "$mods/$m.ko" "$root/mods/"
  done
  cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs \
         fscache 9pnet 9pnet_virtio 9p; do
  insmod /mods/$m.ko 2>/dev/null || [ -d /sys/module/$m ] || echo "gw-vm: insmod $m failed"
done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro hostroot /newroot || {
  echo "gw-vm: cannot mount the host root"; echo o >/proc/sysrq-trigger; }
mkdir -p /oldtmp
mount --bind /newroot/tmp /oldtmp  # the host's /tmp, before the results share hides it
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results /newroot/tmp || {
  echo "gw-vm: cannot mount the results share"; echo o >/proc/sysrq-trigger; }
# A checkout under the host's /tmp (CI clones there) stays visible at its own path.
if [ -s /newroot/tmp/gw-vm-bind ]; then
  d=$(cat /newroot/tmp/gw-vm-bind)
  mkdir -p "/newroot/tmp/$d" && mount --bind "/oldtmp/$d" "/newroot/tmp/$d"
fi
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec chroot /newroot /bin/sh /tmp/gw-vm-guest.sh
EOF
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$root"
fi

# --- the share that becomes the guest's /tmp: the command, its environment, its results ---
share=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$share"' EXIT
chmod 1777 "$share"
{
  printf 'cd %q || exit 126\n' "$PWD"
  while IFS='=' read -r k _; do
    case "$k" in GW_*|PATH|LD_LIBRARY_PATH|ASAN_OPTIONS|UBSAN_OPTIONS|GTEST_*)
      printf 'export %s=%q\n' "$k" "${!k}" ;;
    esac
  done < <(env)
  printf 'exec'; printf ' %q' "$@"; printf '\n'
} >"$share/gw-vm-cmd.sh"
case "$PWD" in
  /tmp/?*) rel=${PWD#/tmp/}; printf '%s\n' "${rel%%/*}" >"$share/gw-vm-bind" ;;
esac
cat >"$share/gw-vm-guest.sh" <<'EOF'
# Runs as PID 1 in the host's root (read-only), /tmp = the results share.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
mount -t tmpfs tmpfs /run 2>/dev/null
mount -t tmpfs tmpfs /var/tmp 2>/dev/null
# POSIX semaphores and shared memory (Python's multiprocessing, torch's spawn) live there.
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm 2>/dev/null
ulimit -l unlimited
ip link set lo up
modprobe rdma_rxe && modprobe dummy numdummies=0 &&
  { ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy; } &&
  ip link set dummy0 mtu 4200 up && ip addr add 10.99.0.1/24 dev dummy0 &&
  rdma link add rxe0 type rxe netdev dummy0 2>/tmp/gw-vm-setup-err
echo "gw-vm: setup rc=$? ($(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' '))" >/tmp/gw-vm-setup
bash /tmp/gw-vm-cmd.sh >/tmp/gw-vm-out 2>&1 </dev/null
echo $? >/tmp/gw-vm-rc
sync
echo o >/proc/sysrq-trigger
sleep 30
EOF

cpu_opt=max
accel=tcg,thread=multi
# Under TCG the guest marks the TSC unstable and falls back to HPET, where every clock read is
# a system call plus an emulated MMIO read (~0.9 us against ~0.08 us): use the TSC, as a real
# host does. GW_RXE_APPEND replaces these kernel parameters.
kargs=${GW_RXE_APPEND-tsc=reliable clocksource=tsc}
log=$share/console.log
rc=0
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
  -accel "$accel" -cpu "$cpu_opt" -m "$mem" -smp "$smp" -nographic -no-reboot -nic none \
  -kernel "$kernel" -initrd "$initrd" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init $kargs" \
  -fsdev local,id=r,path=/,security_model=passthrough,readonly=on \
  -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
  -fsdev local,id=w,path="$share",security_model=none \
  -device virtio-9p-pci,fsdev=w,mount_tag=results \
  </dev/null >"$log" 2>&1 || rc=$?

[ -f "$share/gw-vm-out" ] && cat "$share/gw-vm-out"
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "gw-rxe-vm: the VM ran past ${timeout_s}s; console:" >&2
  tail -30 "$log" >&2
  exit 124
fi
if [ ! -s "$share/gw-vm-rc" ]; then
  echo "gw-rxe-vm: the VM exited (qemu rc=$rc) without the command's exit code; console:" >&2
  tail -40 "$log" >&2
  exit 125
fi
if ! grep -q 'setup rc=0' "$share/gw-vm-setup" 2>/dev/null; then
  echo "gw-rxe-vm: warning: rxe0 setup failed: $(cat "$share/gw-vm-setup" 2>/dev/null)" >&2
fi
exit "$(cat "$share/gw-vm-rc")"
