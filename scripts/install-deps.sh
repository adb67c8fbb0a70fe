#!/bin/sh
# Installs the Debian packages KernelEvolve builds and tests with (Debian 12 "bookworm").
# Run as root, or it uses sudo.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  ca-certificates cmake ninja-build g++ pkg-config \
  llvm-16-dev libclang-16-dev clang-16 \
  libsimdjson-dev libboost-dev libboost-program-options-dev \
  libsqlite3-dev libcurl4-openssl-dev doctest-dev libbenchmark-dev libseccomp-dev \
  cargo golang-go >/dev/null
# The model selection policy's surrogate (src/search/model_policy.cpp): XGBoost's C API.
$SUDO apt-get install -y -qq --no-install-recommends libxgboost-dev >/dev/null
# The problem-suite runner (bench/suite.sh): jq reads the runs' JSON, gnuplot draws the plot.
$SUDO apt-get install -y -qq --no-install-recommends jq gnuplot-nox >/dev/null
# scripts/bundle-gpu.sh: the libraries it copies beside the GPU build (XGBoost's libdmlc and libgomp) must find each other.
$SUDO apt-get install -y -qq --no-install-recommends patchelf >/dev/null
# Evaluation across hosts (KE_WITH_MPI) and its loopback test: Open MPI.
$SUDO apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
# CI's fuzzing (scripts/ci-extra.sh fuzz): libFuzzer and the sanitizer runtimes that clang-16 links.
$SUDO apt-get install -y -qq --no-install-recommends libclang-rt-16-dev >/dev/null
# CI's lint stage (scripts/ci-tidy.sh, run by scripts/ci-extra.sh): Debian 12's clang-format and clang-tidy.
$SUDO apt-get install -y -qq --no-install-recommends clang-format-14 clang-tidy-14 >/dev/null
# CI's Python lint stage (scripts/ci-extra.sh pyflakes): the pyflakes3 command (its package pulls in python3-pyflakes).
$SUDO apt-get install -y -qq --no-install-recommends pyflakes3 python3-pyflakes >/dev/null
# PyTorch problems (src/pytorch/): the reference runs in PyTorch; Debian's is 1.13, CPU only, for
# /usr/bin/python3 (KernelEvolve finds it there when the python3 on PATH lacks torch).
$SUDO apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
