#!/usr/bin/env bash
# kiln's main job on a bundled example: compile a model, print eager vs compiled results,
# timings and capture statistics.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${PYTHON:-python3}" examples/demo.py "$@"
