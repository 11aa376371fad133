#!/usr/bin/env bash
# What a binding costs per call: the same tiny call (three 1x1x16x16 float32 inputs, keyword
# options, a new output) through pybind11 and through nanobind, from numpy and from torch,
# alternating, in one run. Needs build/venv (scripts/bootstrap --python); installs nanobind
# into it. Figures and the choice: docs/design.md ("Python packaging and PyTorch").
#   bench/binding_overhead/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
python=build/venv/bin/python
"$python" -c "import nanobind" 2>/dev/null ||
  build/venv/bin/pip install --quiet --disable-pip-version-check "nanobind==3.1.0" 2>&1 |
  grep -v "is ignored: it is neither a file nor a directory" || true
cmake -S bench/binding_overhead -B build/binding_overhead -DPython_EXECUTABLE="$python" \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" \
  -Dnanobind_DIR="$("$python" -m nanobind --cmake_dir)" >/dev/null
cmake --build build/binding_overhead -j "$(nproc)" >/dev/null
PYTHONPATH=build/binding_overhead "$python" bench/binding_overhead/measure.py
