#!/usr/bin/env bash
# Builds kiln with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ (kiln's C++ and,
# through KILN_SANITIZE_KERNELS, every kernel it generates) and runs a command under it:
#   scripts/sanitize.sh                          # the pytest suite
#   scripts/sanitize.sh python -m tests.fuzz --seeds 0:300
# Python itself is not instrumented, so the sanitizer runtimes are preloaded; leak checking is off
# (CPython and PyTorch keep allocations alive until exit by design). Any ASan or UBSan report
# aborts the process, so a clean exit means a clean run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
scripts/setup.sh >/dev/null
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B build-asan "${GEN[@]}" -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$(command -v "$PY")" >/dev/null
cmake --build build-asan -j "$(nproc)"
build-asan/kiln_cpp_tests --gtest_brief=1 2>/dev/null || [ ! -x build-asan/kiln_cpp_tests ]
# The sanitized extension beside a copy of the Python package, ahead of the in-place one.
rm -rf build-asan/py && mkdir -p build-asan/py/kiln
cp kiln/*.py build-asan/py/kiln/ && cp build-asan/_C*.so build-asan/py/kiln/
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0:protect_shadow_gap=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Run from the sanitized package's folder so `python -m` finds it before the in-place build;
# the checkout stays importable for `tests.fuzz`.
ROOT=$PWD
export PYTHONPATH="$ROOT/build-asan/py:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$ROOT/build-asan/kernel-cache}"
if [ $# -eq 0 ]; then set -- "$PY" -m pytest -q -x "$ROOT/tests/python" -p no:cacheprovider; fi
cd build-asan/py
"$@"
