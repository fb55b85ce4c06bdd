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
# Hypothesis (preinstalled on some images) loads every package's plugin entry point when pytest
# imports it; trio's (a dependency of selenium) fails to load there. kiln's tests use no plugins.
export HYPOTHESIS_NO_PLUGINS=1
"$PY" -m pytest -q tests/python "$@"
