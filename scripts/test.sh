#!/usr/bin/env bash
# Builds kiln (scripts/setup.sh) and runs every test: C++ unit tests, then pytest end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
scripts/setup.sh
if [ -x build/kiln_cpp_tests ]; then
  build/kiln_cpp_tests --gtest_brief=1
else
  echo "test: GoogleTest not available here; C++ unit tests not built"
fi
"$PY" -m pytest -q tests/python "$@"
