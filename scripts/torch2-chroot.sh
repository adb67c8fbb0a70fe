#!/usr/bin/env bash
# A PyTorch 2.x on a Debian 12 machine, for testing what needs torch.compile, Inductor or torch.export on the
# CPU (Debian 12's python3-torch is 1.13, and PyPI may be out of reach): a Debian 13 chroot with its
# python3-torch (2.6, CPU), g++, PyTorch's headers and cmake (ctest), in which this checkout's own build runs.
#
#   scripts/torch2-chroot.sh setup               once, as root (about 2 GB, a few minutes)
#   scripts/torch2-chroot.sh run CMD [ARGS...]   CMD in the chroot, in the current directory, with the build's
#                                                libraries and KE_PYTHON=/usr/bin/python3 (torch 2.6)
#
#   e.g. scripts/torch2-chroot.sh run build/kernelevolve run problems/pytorch/gelu_tanh/cpu.json --max-evals 3
#        scripts/torch2-chroot.sh run ctest --test-dir build -R test_inductor_first_cpu
#
# The build (build/, made on Debian 12) runs there as it is: the Debian 12 libraries it links are copied into the
# chroot (/opt/bookworm-libs, LD_LIBRARY_PATH), and Clang's resource directory, /tmp and the checkout's top folder
# are bind-mounted at their own paths. Inside a chroot the kernel refuses user namespaces, so the workers' sandbox
# runs without its namespaces there (it says so); seccomp and the rest still apply.
set -euo pipefail
root=${TORCH2_CHROOT:-/opt/trixie}
repo=$(cd "$(dirname "$0")/.." && pwd)
top=/$(echo "$repo" | cut -d/ -f2)  # the checkout's top folder (/work for /work/main), mounted whole

mounts() {
  for dir in /proc /sys /dev /dev/shm /tmp "$top" /usr/lib/llvm-16; do
    [ -d "$dir" ] || continue
    mkdir -p "$root$dir"
    mountpoint -q "$root$dir" || mount --bind "$dir" "$root$dir"
  done
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

# The libraries of this checkout's build that Debian 13 lacks or has in other versions; never the C and C++
# runtimes, which Debian 13 has newer, nor the build's own (a copy would outlive the next build and shadow it).
copy_libraries() {
  local libs=$root/opt/bookworm-libs
  mkdir -p "$libs"
  for bin in "$repo"/build/kernelevolve "$repo"/build/kernelevolve-worker "$repo"/build/lib*.so*; do
    [ -f "$bin" ] && ldd "$bin" 2>/dev/null
  done | awk '/=>/ {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux)[.-]' |
    grep -v -F "$repo/build/" |
    while read -r lib; do
      [ -f "$libs/$(basename "$lib")" ] || cp -L "$lib" "$libs/"
    done
}

case ${1:-} in
  setup)
    [ "$(id -u)" = 0 ] || { echo "torch2-chroot.sh setup: run it as root (debootstrap and mount)" >&2; exit 2; }
    if [ ! -x "$root/usr/bin/python3" ]; then
      command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
      debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
    fi
    mounts
    chroot "$root" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends python3-torch python3-setuptools python3-dev libtorch-dev g++ libgomp1 cmake'
    copy_libraries
    chroot "$root" python3 -c 'import torch; print("torch", torch.__version__, "in", "'"$root"'")'
    ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: torch2-chroot.sh run CMD [ARGS...]" >&2; exit 2; }
    [ -x "$root/usr/bin/python3" ] || { echo "torch2-chroot.sh: no chroot at $root: run 'setup' first" >&2; exit 2; }
    mounts
    copy_libraries
    # shellcheck disable=SC2016  # expanded by the chroot's shell, not this one
    exec chroot "$root" /usr/bin/env LD_LIBRARY_PATH=/opt/bookworm-libs KE_PYTHON=/usr/bin/python3 \
      /bin/sh -c 'cd "$0" && exec "$@"' "$PWD" "$@"
    ;;
  *)
    sed -n '2,15p' "$0" >&2
    exit 2
    ;;
esac
