#!/usr/bin/env bash
# Installs what kiln needs on a fresh machine and builds kiln._C in place (incremental, ccache).
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
[ -e /usr/lib/x86_64-linux-gnu/libgtest.a ] || [ -e /usr/lib/aarch64-linux-gnu/libgtest.a ] || [ -e /usr/local/lib/libgtest.a ] || need_apt+=(libgtest-dev)
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null 2>&1 || echo "setup: could not apt-get ${need_apt[*]}; continuing"
fi
# Chromium and its WebDriver, for the HTML compile report's browser test (tests/python/test_report.py).
if ! command -v chromedriver >/dev/null && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || echo "setup: could not apt-get chromium; the report's browser test will be skipped"
fi
"$PY" - <<'PYEOF' || "$PY" -m pip install -q "torch==2.13.0"
import torch  # noqa: F401
PYEOF
"$PY" -c "import pybind11, pytest" 2>/dev/null || "$PY" -m pip install -q pybind11 pytest
"$PY" -c "import selenium" 2>/dev/null || "$PY" -m pip install -q selenium || echo "setup: selenium unavailable (the report's browser test will be skipped)"
"$PY" -c "import transformers" 2>/dev/null || "$PY" -m pip install -q transformers || echo "setup: transformers unavailable (GPT-2 tests will be skipped)"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B build "${GEN[@]}" -DKILN_INPLACE=ON -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v "$PY")" >/dev/null
cmake --build build -j "$(nproc)"
