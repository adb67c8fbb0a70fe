#!/bin/sh
# CI in one command, on a fresh Debian 12 machine as root, from any folder: installs the Debian packages, builds,
# runs the tests, prints the CPU suite's table, then the stages no test names (docs/testing.md says what each
# does). .ci/run calls this script; the README's quick start names it.
set -e
# Every step below runs from the repository root, wherever the script was started.
cd "$(dirname "$0")/.."
# The Debian packages the build and the tests need (Clang/LLVM 16, Boost, SQLite, PyTorch, ...; the script lists them).
./scripts/install-deps.sh
# The plain build, in build/ with Ninja: the configuration that the tests and the suite table below use.
cmake -S . -B build -G Ninja
# Every target: the library, the command-line tool, the worker, the tests and the examples.
cmake --build build
# Every test, two at a time (the development VM has two cores); a failure prints the test's output.
ctest --test-dir build --output-on-failure -j 2
# The CPU suite's table that the suite_cpu_smoke test made (4 evaluations per problem), so CI's log shows where
# the suite stands.
cat build/tests/suite_cpu/cpu_suite.md
# What no test names: clang-tidy and clang-format on what changed, fuzzing, the repeat tests, the sanitizer build.
./scripts/ci-extra.sh
