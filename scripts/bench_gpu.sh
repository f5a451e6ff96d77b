#!/usr/bin/env bash
# The streaming bench on a machine with an NVIDIA GPU, in one command and about fifteen minutes:
# set-up (scripts/setup.sh installs vLLM's GPU build there), then
#   1. spine against stream at budgets 8, 20 and 64, auto (the shared policy, speculating all three
#      ways, the default; and the next block's extension only), cost:auto (one chain's own width) and
#      fill:64, on 4 shipped prompts;
#   2. under load: the sequential chains batched against stream auto and cost:auto at 1, 8, 32 and 64
#      chains on one engine (prompts per minute, transitions per second, critical paths);
#   3. the same chain in blocks (n=128, B=32, K=6 per block), extensions included;
# each printed as the tool prints it, with its critical path per row (where the time went, by
# cause) and per session (stats --critical-path), and saved beside the trace (OUT, default sessions/).
# float32, as on the CPU: the equality with the sequential chain needs batch-independent log-probs.
#   bash scripts/bench_gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench_gpu: no NVIDIA GPU answers nvidia-smi; run it on a GPU machine" >&2
    exit 2
fi
nvidia-smi -L >&2
bash scripts/setup.sh
out="${OUT:-sessions}"
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
tui=.venv/bin/presto-tui
common=(--dtype float32 --limit 4 --seeds 1)
echo "== 1. one block: n=128, K=24; budgets up to 64" >&2
"$tui" bench "${common[@]}" -n 128 -K 24 --rules spine,stream \
    --budgets 8,20,64,auto,auto/block,cost:auto,fill:64 --throughput '' -o "$out/$stamp-gpu-bench.json" \
    --trace "$out/$stamp-gpu-bench.jsonl"
"$tui" stats --critical-path "$out/$stamp-gpu-bench.jsonl"
echo "== 2. under load: the sequential chains batched against stream, up to 64 chains on one engine" >&2
"$tui" bench "${common[@]}" -n 128 -K 24 --rules stream --budgets auto,cost:auto --throughput 1,8,32,64 \
    --throughput-rule stream -o "$out/$stamp-gpu-load.json" --trace "$out/$stamp-gpu-load.jsonl"
echo "== 3. blocks: n=128, B=32, K=6 per block, extensions included (see +ext)" >&2
"$tui" bench "${common[@]}" -n 128 -B 32 -K 6 --rules stream --budgets 20,auto,auto/block --throughput '' \
    -o "$out/$stamp-gpu-blocks.json" --trace "$out/$stamp-gpu-blocks.jsonl"
"$tui" stats --critical-path "$out/$stamp-gpu-blocks.jsonl"
