#!/usr/bin/env bash
# Builds KernelEvolve for the lent GPU machine and makes the build folder stand alone there.
#
#   scripts/bundle-gpu.sh [BUILD_DIR]        (default: build-gpu; JOBS=N for parallel jobs, default 2)
#
# The GPU machine (Ubuntu 24.04) has libLLVM-16, libclang-cpp 16, libcurl and libsqlite3, but no Boost
# and no simdjson. So: a Release build whose binaries look for libraries beside themselves first
# (RUNPATH $ORIGIN, and $ORIGIN/.. for tests/), and a copy there of every library they need that the
# GPU machine lacks. The CUDA driver and NVRTC are not linked at all (dlopen at run time). The folder
# must stay under the device tool's 64 MiB carry limit; the script prints its size. Carry it with
# `carry: ["build-gpu"]` and run ./build-gpu/kernelevolve there. Without MPI: the GPU machine has no Open MPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
jobs=${JOBS:-2}

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKE_WITH_CUDA=ON -DKE_WITH_HIP=ON -DKE_WITH_MPI=OFF \
  -DKE_BUILD_TESTS=ON -DKE_BUILD_BENCH=ON "-DCMAKE_BUILD_RPATH=\$ORIGIN;\$ORIGIN/.." >/dev/null
# TARGETS: a shorter list where only some are needed (the tool alone: kernelevolve-cli kernelevolve-worker
# kernelevolve_confine ke_python); what it leaves unbuilt is skipped below.
targets=${TARGETS:-kernelevolve-cli kernelevolve-worker test_cuda_device test_cuda_isolation test_multi_gpu test_hip_device \
  bench_isolation test_pytorch bench_pytorch_reference test_gpu_core kernelevolve_confine test_triton bench_triton \
  test_memory test_baseline test_gpu_program test_vendor_libraries test_program bench_program kernelevolve ke_python \
  test_program_c test_callable}
# shellcheck disable=SC2086  # a list of targets
ninja -C "$build" -j"$jobs" $targets

binaries=("$build/kernelevolve" "$build/kernelevolve-worker" "$build"/lib*.so.*.*.* "$build/libkernelevolve_confine.so" "$build"/tests/test_triton "$build"/bench/bench_triton "$build"/tests/test_cuda_* "$build"/tests/test_multi_gpu "$build"/tests/test_hip_* "$build"/tests/test_pytorch "$build"/tests/test_memory "$build"/tests/test_baseline "$build"/tests/test_gpu_core "$build"/tests/test_gpu_program "$build"/tests/test_vendor_libraries "$build"/tests/test_program "$build"/tests/test_program_c "$build"/tests/test_callable "$build"/bench/bench_isolation "$build"/bench/bench_pytorch_reference "$build"/bench/bench_program)
# shellcheck source=scripts/bundle-libraries.sh
. "$root/scripts/bundle-libraries.sh"
bundle_libraries bundle-gpu "$build" "${binaries[@]}" || exit 1
# Copied libraries find each other beside themselves too (a RUNPATH serves only its own object's needs: the
# worker found libxgboost beside it, but libxgboost found no libdmlc, and the worker exited with 127).
if [ ${#copied[@]} -gt 0 ]; then
  command -v patchelf >/dev/null || { echo "bundle-gpu: patchelf is needed (scripts/install-deps.sh installs it)" >&2; exit 1; }
  for name in "${copied[@]}"; do patchelf --set-rpath '$ORIGIN' "$build/$name"; done
fi
strip --strip-unneeded "$build/kernelevolve" "$build/kernelevolve-worker" "$build"/lib*.so.*.*.* \
  "$build"/tests/test_cuda_* "$build"/tests/test_hip_* 2>/dev/null || true
echo "bundle-gpu: copied ${copied[*]:-nothing} into $build"
echo "bundle-gpu: what travels (build outputs, not object files):"
du -sh --exclude='*.o' --exclude=CMakeFiles --exclude='.ninja*' "$build"
