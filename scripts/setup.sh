#!/usr/bin/env bash
# Creates .venv and installs quickdraft with its test tools. torch is pinned to 2.13.0, the CPU
# wheel on this project's machines (an unpinned torch would pull gigabytes of CUDA packages).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
