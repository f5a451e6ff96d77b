#!/usr/bin/env bash
# A MATH-500 file through `presto-tui eval` on a machine with an NVIDIA GPU, graded as the benchmark
# grades (--preset math: the last \boxed{} against `answer`, read by math-verify), with
#   powermh          PowerMH, sequential (the reference the others are compared with)
#   powermh+stream   PowerMH with PreSTO's streaming rule (decision inputs: the same tokens, faster)
#   ppt+stream       parallel power tempering (R replicas, PreSTO stream on each)
#   smc:P            PowerSMC with P particles
# every item with its own seed, one prompt at a time (the paper's timing), the per-item answers with
# what the grader read, accuracy, the paired TOST, and with CHAINS > 1 pass@k and maj@k.
#
# Resumable: the results file is written as the run goes; run the same command again after a crash, a
# preemption or Ctrl-C and `eval --resume RESULTS` runs only the (item, method, chain) left, with the same
# seeds, appending to the same trace (it refuses, in one line, settings that differ from the first run's).
#
#   bash scripts/bench_eval_gpu.sh                                      # the dozen example items
#   bash scripts/bench_eval_gpu.sh math500.jsonl                        # MATH-500 as published (JSONL)
#   MODEL=Qwen/Qwen2.5-Math-7B N=3072 bash scripts/bench_eval_gpu.sh hf:HuggingFaceH4/MATH-500:test
#
# TASKS (first argument): a file in MATH-500's layout (problem, answer[, solution, subject, level,
# unique_id]; JSONL, CSV or Parquet) or a hub dataset hf:ORG/NAME[:SPLIT], read from the Hugging Face
# cache (downloaded there where a network allows; HF_HUB_OFFLINE=1: the cache only).
# Settings (environment): MODEL (a hub id, a local folder or the embedded default), N new tokens, B
# block size, K MH transitions per block, ALPHA, SMC particles P, PPT replicas R, CHAINS per item,
# LIMIT items, DTYPE (float32: PowerMH and PreSTO stream give the same tokens; bfloat16 is faster and
# breaks that equality), RESULTS (default sessions/math500-gpu.json; the trace beside it, .jsonl).
# BACKEND=synthetic runs the same command on the synthetic engine, without a GPU (a check of the script).
set -euo pipefail
cd "$(dirname "$0")/.."
tasks="${1:-docs/eval/tasks/math500-layout.jsonl}"
backend="${BACKEND:-}"
if [ "$backend" != synthetic ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "bench_eval_gpu: no NVIDIA GPU answers nvidia-smi; run it on a GPU machine (or BACKEND=synthetic)" >&2
        exit 2
    fi
    nvidia-smi -L >&2
    [ -x .venv/bin/presto-tui ] || bash scripts/setup.sh
fi
results="${RESULTS:-sessions/math500-gpu.json}"
trace="${results%.json}.jsonl"
log="${results%.json}.runlog"  # written as the run goes (the results JSON only at its end)
mkdir -p "$(dirname "$results")"
n="${N:-1024}"
settings=(--preset math --methods "powermh,powermh+stream,ppt+stream:r=${R:-4},smc:${P:-8}"
          -n "$n" -B "${B:-$((n / 8))}" -K "${K:-4}" --alpha "${ALPHA:-4}" --concurrency 1 --figures png)
if [ "$backend" = synthetic ]; then
    settings+=(--backend synthetic)
else
    settings+=(--model "${MODEL:-smollm2-135m}" --dtype "${DTYPE:-float32}")
fi
[ -z "${LIMIT:-}" ] || settings+=(--limit "$LIMIT")
[ "${CHAINS:-1}" = 1 ] || settings+=(--chains "$CHAINS")
if [ -e "$log" ]; then
    echo "bench_eval_gpu: $log exists: resuming it (only what is missing runs)" >&2
    where=(--resume "$log" --trace "$trace")
else
    where=(-o "$results" --trace "$trace")
fi
status=0
.venv/bin/presto-tui eval "$tasks" "${settings[@]}" "${where[@]}" || status=$?
if [ "$status" -gt 128 ]; then  # killed or interrupted (a signal): what finished is kept
    echo "bench_eval_gpu: eval stopped (exit $status); run the same command again to resume $results" >&2
elif [ "$status" -ne 0 ]; then  # a usage or input error: running it again gives the same
    echo "bench_eval_gpu: eval failed (exit $status); fix what it names above, then run again" >&2
fi
exit "$status"
