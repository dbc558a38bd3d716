#!/usr/bin/env bash
# Run HERE (a machine with PyPI), before a device call: fetches into .whl/ (git-ignored) the pure-Python
# wheels the project needs beyond what the lent H200 image holds (it has jax 0.11.2 with CUDA 13 and no
# network; its flax and orbax versions are not recorded). Then call the device with carry [".whl"] and
# the command `bash benchmarks/gpu_check.sh`, which installs them with --no-deps into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl flax==0.12.12 orbax-checkpoint==0.12.8 optax==0.2.8
ls -la .whl
