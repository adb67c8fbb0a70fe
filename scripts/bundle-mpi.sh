#!/usr/bin/env bash
# Builds an MPI-enabled kernelevolve for the lent GPU machine, and carries Debian 12's Open MPI with it.
#
#   scripts/bundle-mpi.sh [BUILD_DIR]        (default: build-gpu-mpi; JOBS=N for parallel jobs, default 2;
#                                             SKIP_BUILD=1 to bundle what is built already)
#
# The GPU machine (Ubuntu 24.04) has no Open MPI, and scripts/bundle-gpu.sh builds without it. This makes a second
# folder, as bundle-gpu.sh makes its own (a Release build whose binaries look for libraries beside themselves first,
# and a copy there of what the GPU machine lacks), with KE_WITH_MPI=ON and only the tool's targets, and puts Open
# MPI's runtime in it, relocated (every binary's search path is a DT_RPATH relative to itself):
#
#   BUILD_DIR/kernelevolve, kernelevolve-worker, lib*.so*    the tool, libmpi, libopen-rte, libopen-pal, libpmix,
#                                                            libevent, libhwloc ... beside it (RUNPATH $ORIGIN)
#   BUILD_DIR/openmpi/bin/orterun, orted, ompi_info          Open MPI 4.1's launcher (RUNPATH $ORIGIN/../..)
#   BUILD_DIR/openmpi/lib/openmpi3/mca_*.so                  its components, less those needing a fabric library
#                                                            the GPU machine lacks (UCX, libfabric, verbs, PSM) and
#                                                            OpenSHMEM's (RUNPATH $ORIGIN/../../..)
#   BUILD_DIR/openmpi/share/openmpi, openmpi/etc             its help files and Debian's MCA defaults
#   BUILD_DIR/openmpi/pmix/lib/pmix, openmpi/pmix/share/pmix PMIx's components and help files
#   BUILD_DIR/mpirun                                         the wrapper: Open MPI's and PMIx's directories set to
#                                                            these (OPAL_PREFIX and the OPAL_*DIR, PMIX_*), then
#                                                            orterun with the arguments given
#
# On the GPU machine, from the checkout's root (carry: ["build-gpu-mpi"]):
#   ./build-gpu-mpi/mpirun --allow-run-as-root -np 2 ./build-gpu-mpi/kernelevolve optimize MODEL.py --mpi \
#       --devices cuda:all ...
#   KE_BUILD=$PWD/build-gpu-mpi bench/optimize_devices.sh MODEL.py     (its MPIRUN defaults to this folder's mpirun)
# The script prints the folder's size: with build-gpu beside it, both must stay under the device tool's 64 MiB (it
# removes the object files and CMake's state once built, unless KEEP_OBJECTS=1: a later run builds it all again).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu-mpi}
jobs=${JOBS:-2}
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib
pmix_root=/usr/lib/x86_64-linux-gnu/pmix2
command -v orterun >/dev/null && [ -d "$ompi_lib/openmpi3" ] ||
  { echo "bundle-mpi: Debian 12's Open MPI 4.1 is needed here (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
command -v patchelf >/dev/null || { echo "bundle-mpi: patchelf is needed (scripts/install-deps.sh installs it)" >&2; exit 1; }

if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKE_WITH_CUDA=ON -DKE_WITH_HIP=ON -DKE_WITH_MPI=ON \
    -DKE_BUILD_TESTS=OFF -DKE_BUILD_BENCH=OFF "-DCMAKE_BUILD_RPATH=\$ORIGIN;\$ORIGIN/.." >/dev/null
  grep -q '^KE_WITH_MPI:BOOL=ON' "$build/CMakeCache.txt" ||
    { echo "bundle-mpi: CMake found no MPI here (KE_WITH_MPI is off in $build)" >&2; exit 1; }
  ninja -C "$build" -j"$jobs" kernelevolve-cli kernelevolve-worker kernelevolve_confine ke_python kernelevolve
fi

mpi=$build/openmpi
rm -rf "$mpi"
mkdir -p "$mpi/bin" "$mpi/lib/openmpi3" "$mpi/share" "$mpi/etc" "$mpi/pmix/lib" "$mpi/pmix/share"
for tool in orterun orted ompi_info; do cp -L "$(command -v $tool)" "$mpi/bin/$tool"; done
# Components whose libraries the GPU machine lacks (and that a single host's ranks never need) stay behind, as do
# OpenSHMEM's: Open MPI would say, at each start, that it could not open them.
unwanted='^(libucs|libucp|libuct|libmca_common_ucx|libfabric|libmca_common_ofi|libibverbs|librdmacm|libmca_common_verbs|libpsm|libnl-|liboshmem|libmca_common_monitoring)'
for component in "$ompi_lib"/openmpi3/mca_*.so; do
  if readelf -d "$component" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -Eq "$unwanted"; then continue; fi
  cp -L "$component" "$mpi/lib/openmpi3/"
done
cp -r /usr/share/openmpi "$mpi/share/openmpi"
cp /etc/openmpi/openmpi-mca-params.conf "$mpi/etc/"
: >"$mpi/etc/openmpi-default-hostfile"
cp -r "$pmix_root/lib/pmix" "$mpi/pmix/lib/pmix"
cp -r "$pmix_root/share/pmix" "$mpi/pmix/share/pmix"
[ -f "$pmix_root/share/pmix-mca-params.conf" ] && cp "$pmix_root/share/pmix-mca-params.conf" "$mpi/pmix/share/"

# Every library these need, beside the tool, less what the GPU machine has (as bundle-gpu.sh).
binaries=("$build/kernelevolve" "$build/kernelevolve-worker" "$build"/lib*.so.*.*.* "$build/libkernelevolve_confine.so"
  "$mpi"/bin/* "$mpi"/lib/openmpi3/*.so "$mpi"/pmix/lib/pmix/*.so)
# shellcheck source=scripts/bundle-libraries.sh
. "$root/scripts/bundle-libraries.sh"
bundle_libraries bundle-mpi "$build" "${binaries[@]}" || exit 1
# DT_RPATH rather than RUNPATH (--force-rpath), on the tool's own binaries too: searched before LD_LIBRARY_PATH, so
# that another Open MPI on the library path (a libmpi.so.40 of Open MPI 5, a Debian 12 copy) never mixes with this
# one in a rank; what is not carried (LLVM, curl) is still found there and in the system's folders.
for name in "${copied[@]}"; do patchelf --set-rpath '$ORIGIN' "$build/$name"; done
for object in "$build/kernelevolve" "$build/kernelevolve-worker" "$build"/lib*.so*; do
  [ -f "$object" ] && [ ! -L "$object" ] || continue
  patchelf --force-rpath --set-rpath '$ORIGIN:$ORIGIN/..' "$object"
done
for tool in "$mpi"/bin/*; do patchelf --force-rpath --set-rpath '$ORIGIN/../..' "$tool"; done
for component in "$mpi"/lib/openmpi3/*.so; do patchelf --force-rpath --set-rpath '$ORIGIN/../../..' "$component"; done
for component in "$mpi"/pmix/lib/pmix/*.so; do patchelf --force-rpath --set-rpath '$ORIGIN/../../../..' "$component"; done
strip --strip-unneeded "$build/kernelevolve" "$build/kernelevolve-worker" "$build"/lib*.so.*.*.* \
  "$mpi"/bin/* "$mpi"/lib/openmpi3/*.so "$mpi"/pmix/lib/pmix/*.so 2>/dev/null || true

cat >"$build/mpirun" <<'EOF'
#!/bin/sh
# Open MPI 4.1 (Debian 12's), carried beside kernelevolve by scripts/bundle-mpi.sh: its directories set to this
# folder's copies, then its launcher. The ranks inherit these, and find libmpi beside kernelevolve (its RUNPATH).
here=$(cd "$(dirname "$0")" && pwd)
mpi=$here/openmpi
export OPAL_PREFIX="$mpi" OPAL_EXEC_PREFIX="$mpi" OPAL_BINDIR="$mpi/bin" OPAL_LIBDIR="$here" \
  OPAL_PKGLIBDIR="$mpi/lib/openmpi3" OPAL_DATAROOTDIR="$mpi/share" OPAL_DATADIR="$mpi/share" \
  OPAL_PKGDATADIR="$mpi/share/openmpi" OPAL_SYSCONFDIR="$mpi/etc" OPAL_LIBEXECDIR="$mpi/bin"
export PMIX_INSTALL_PREFIX="$mpi/pmix" PMIX_MCA_mca_base_component_path="$mpi/pmix/lib/pmix"
export OMPI_MCA_mca_base_component_path="$mpi/lib/openmpi3"
# Ranks on this host alone need no ssh, but Open MPI 4's launcher refuses to start without one to name: where there is
# none (a container), a stand-in that is never called.
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent="${OMPI_MCA_plm_rsh_agent:-false}"
# No binding: Open MPI 4 binds each of two ranks to one core, and a rank's whole tree (the optimizer's Python, each
# region's run, its workers and compilers) inherits it; a rank of optimize is a process tree, not one thread.
export OMPI_MCA_hwloc_base_binding_policy="${OMPI_MCA_hwloc_base_binding_policy:-none}"
# No LD_LIBRARY_PATH: every binary here finds its libraries by its RUNPATH, and the ranks' children (Python, PyTorch)
# must not find this folder's copies (its libgomp, Debian 12's) before their own.
export PATH="$mpi/bin:$PATH"
exec "$mpi/bin/orterun" "$@"
EOF
chmod +x "$build/mpirun"
# What only the build needs (object files, CMake's and ninja's state) stays behind, so that the folder can be carried
# as it is; KEEP_OBJECTS=1 keeps it (for a quicker rebuild here, but then the folder is too big to carry).
if [ -z "${KEEP_OBJECTS:-}" ]; then
  find "$build" -name CMakeFiles -type d -prune -exec rm -rf {} +
  rm -f "$build"/.ninja_log "$build"/.ninja_deps
fi
echo "bundle-mpi: copied ${copied[*]:-nothing} into $build; Open MPI's launcher and components into $mpi"
echo "bundle-mpi: what travels (carry it whole):"
du -sh "$build"
