#!/usr/bin/env bash
# On a machine with two or more NVIDIA GPUs, after `bash scripts/setup.sh --test`: check the vLLM
# engine with tensor parallelism 2 and pipeline parallelism 2 (records from every worker, the
# chains exact).  Takes about three minutes; prints one line per check.
set -euo pipefail
cd "$(dirname "$0")/.."
n=$(nvidia-smi -L | wc -l)
[ "$n" -ge 2 ] || { echo "needs 2 GPUs, found $n" >&2; exit 2; }
timeout 300 .venv/bin/python scripts/check_parallel.py --tp 2
timeout 300 .venv/bin/python scripts/check_parallel.py --pp 2
echo "tensor and pipeline parallel: ok"
