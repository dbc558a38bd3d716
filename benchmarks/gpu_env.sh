# Sourced (not run) by the scripts that use a GPU: sets PY to a Python whose jax sees the GPU, from the
# repository's root. Which one: .venv if its jax sees a GPU; else the machine's python3 if its jax does (the
# lent H200 image: jax 0.11.2 + CUDA 13, no network), running the project from source (PYTHONPATH) with
# the wheels of benchmarks/gpu_wheels.sh from .whl/ when they were carried; else a new .venv-gpu with the
# cuda extra (needs PyPI). A PY already set is used as it is (to try a script on a CPU).
sees_gpu() { "$1" -c 'import jax,sys; sys.exit(0 if jax.default_backend()=="gpu" else 1)' 2>/dev/null; }
if [ -n "${PY:-}" ]; then
  :
elif [ -x .venv/bin/python ] && sees_gpu .venv/bin/python; then
  PY=.venv/bin/python
elif command -v python3 >/dev/null && sees_gpu python3; then
  PY=python3
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  if [ ! -x .venv-gpu/bin/python ]; then
    python3 -m venv .venv-gpu
    .venv-gpu/bin/pip install -q -e '.[cuda]'
  fi
  PY=.venv-gpu/bin/python
fi
"$PY" -c 'import jax, flax, optax; print(jax.__version__, flax.__version__, optax.__version__, jax.devices())'
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv || true
