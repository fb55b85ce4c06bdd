#!/usr/bin/env bash
# One command for a lent GPU machine (no package registry): builds kiln from source against the
# PyTorch there, runs the C++ unit tests (when GoogleTest is installed) and the CUDA tests
# (tests/python/test_cuda.py), then the side-by-side bench on CUDA for a few cases. Logs go
# under $OUT (else ./gpu_check_out); the summary is printed last. Fits well inside 10 minutes.
#
#   bash scripts/gpu_check.sh                      # default bench cases
#   KILN_BENCH_CASES=pointwise_ln,softmax,mlp bash scripts/gpu_check.sh
#   KILN_BENCH=/path/to/run.py bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export KILN_CACHE_DIR=$(mktemp -d /tmp/kiln_gpu_cache.XXXX)  # cold: NVRTC compiles every kernel
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s]"; }

# ---- environment --------------------------------------------------------------------------
{
  nvidia-smi -L 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
  "$PY" -c 'import pybind11; print("pybind11", pybind11.__version__)' 2>&1
  "$PY" -c 'import pytest; print("pytest", pytest.__version__)' 2>&1
  ls /usr/lib/x86_64-linux-gnu/libgtest.a /usr/local/lib/libgtest.a 2>/dev/null | head -1 | grep . || echo "no GoogleTest"
  "$PY" -c 'import glob, os, torch; t = os.path.dirname(torch.__file__); print("nvrtc:", *sorted(glob.glob(t + "/include/ATen/cuda/**/*NVRTC*", recursive=True) + glob.glob(t + "/../nvidia/*/lib/libnvrtc.so*") + glob.glob(t + "/../nvidia/*/include/nvrtc.h")))' 
  command -v ninja ccache cmake nvcc
} > "$OUT/env.txt" 2>&1
note "$(stamp) environment:"; sed 's/^/  /' "$OUT/env.txt" | tee -a "$SUMMARY"

# ---- build --------------------------------------------------------------------------------
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
BUILD=build-gpu
if cmake -S . -B "$BUILD" "${GEN[@]}" -DKILN_INPLACE=ON -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v "$PY")" > "$OUT/build.log" 2>&1 &&
   cmake --build "$BUILD" -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
  note "$(stamp) build: ok ($(grep -o 'kiln: CUDA code generation [^(]*' "$OUT/build.log" | head -1))"
else
  note "$(stamp) build: FAILED"; grep -E 'error|Error' "$OUT/build.log" | head -40 | tee -a "$SUMMARY"; tail -20 "$OUT/build.log"
  exit 1
fi

# ---- C++ unit tests -----------------------------------------------------------------------
if [ -x "$BUILD/kiln_cpp_tests" ]; then
  timeout 120 "$BUILD/kiln_cpp_tests" --gtest_brief=1 > "$OUT/cpp_tests.log" 2>&1
  note "$(stamp) C++ tests: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/cpp_tests.log" | tr '\n' ' '))"
else
  note "$(stamp) C++ tests: not built (no GoogleTest here)"
fi

# ---- CUDA tests ---------------------------------------------------------------------------
PER_TEST=(); "$PY" -c 'import pytest_timeout' 2>/dev/null && PER_TEST=(--timeout=60)
timeout 300 "$PY" -m pytest -q -rfE "${PER_TEST[@]}" -p no:cacheprovider tests/python/test_cuda.py > "$OUT/test_cuda.log" 2>&1
rc=$?
note "$(stamp) CUDA tests: exit $rc: $(tail -1 "$OUT/test_cuda.log")"
grep -E '^(FAILED|ERROR)' "$OUT/test_cuda.log" | head -20 | tee -a "$SUMMARY"

# ---- what kiln does with the bench cases (status, kernels, launches, timings) ----------------
timeout 120 "$PY" - > "$OUT/kiln_cases.log" 2>&1 <<'EOF'
import sys, time, torch
sys.path.insert(0, "../shared/bench"); sys.path.insert(0, "shared/bench")
import kiln
from kiln import _codegen
try:
    from suite import CASES
except ImportError:
    CASES = {}
for name in ["pointwise_ln", "softmax"]:
    if name not in CASES:
        continue
    kiln.reset()
    model, args, _ = CASES[name]("cuda")
    cm = kiln.compile(model)
    with torch.no_grad():
        t = time.perf_counter(); out = cm(*args); torch.cuda.synchronize(); first = time.perf_counter() - t
        ref = model(*args)
        for _ in range(3):
            cm(*args)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            cm(*args)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t) / 20 * 1e3
    err = ((out - ref).double().norm() / ref.double().norm()).item()
    print(f"{name}: first call {first:.3f}s, {ms:.4f} ms/call, relerr {err:.2e}")
    for g in _codegen.GRAPHS:
        print(f"  graph: {g.status}; {g.num_kernels} kernels, {g.num_externs} externs; timings {dict(g.timings)}")
        for line in g.source.splitlines()[:8]:
            if line.startswith("//   kernel"):
                print("  " + line[5:])
EOF
note "$(stamp) kiln on the bench cases:"; sed 's/^/  /' "$OUT/kiln_cases.log" | tail -20 | tee -a "$SUMMARY"

# ---- bench ----------------------------------------------------------------------------------
BENCH=${KILN_BENCH:-}
for c in ../shared/bench/run.py shared/bench/run.py ../../shared/bench/run.py; do
  [ -z "$BENCH" ] && [ -f "$c" ] && BENCH=$c
done
if [ -n "$BENCH" ]; then
  CASES=${KILN_BENCH_CASES:-pointwise_ln,softmax}
  timeout ${KILN_BENCH_TIMEOUT:-330} "$PY" "$BENCH" --device cuda --compilers eager,inductor,kiln --no-warm --no-prime \
    --cases "$CASES" --timeout 150 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
  note "$(stamp) bench ($BENCH, cases $CASES): exit $?"
  sed -n '/^case | compiler/,$p' "$OUT/bench.log" | tee -a "$SUMMARY"
else
  note "$(stamp) bench: run.py not found (set KILN_BENCH)"
fi
note "$(stamp) done"
