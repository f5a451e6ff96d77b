"""Check the vLLM engine split over processes: tensor or pipeline parallel, records from every worker.

Builds a tiny Llama-architecture model with random weights (4 attention heads of
64, so it splits in two; the embedded SmolLM2's 9 heads do not), loads it in
vLLM with the given split, and checks that the chain's proposals come back with
their records through `collective_rpc` from the worker processes: the streaming
and the spine rule end in the sequential chain's state, and no records are left
behind in the workers.  Prints one line per check and exits non-zero on the first
failure.

  python scripts/check_parallel.py --tp 2          # CPU (CI) or GPU
  python scripts/check_parallel.py --pp 2          # GPU only (see README)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time


def tiny_llama(directory: str) -> str:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from presto_tui.runtime.engines.models import resolve

    tok = AutoTokenizer.from_pretrained(str(resolve(None, quiet=True)))  # the embedded model's tokenizer
    tok.save_pretrained(directory)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.float32).save_pretrained(directory)
    return directory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    ap.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    ap.add_argument("--executor", default=None, help="vLLM executor: mp (default for a split) or ray")
    args = ap.parse_args()
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.registry import EngineOptions, start_engine
    from presto_tui.runtime.session.events import SessionEnd
    from presto_tui.runtime.session.runner import run_session

    d = tempfile.mkdtemp(prefix="presto-tiny-llama-")
    try:
        t0 = time.perf_counter()
        e = start_engine("vllm", EngineOptions(model=tiny_llama(d), max_model_len=256, tensor_parallel_size=args.tp,
                                               pipeline_parallel_size=args.pp,
                                               distributed_executor_backend=args.executor))
        print(f"started tp={args.tp} pp={args.pp} in {time.perf_counter() - t0:.1f} s: {e.info}", flush=True)
        # InprocClient: the engine core in this process; SyncMPClient: in its own
        # (VLLM_ENABLE_V1_MULTIPROCESSING=1), the records then pass through one more process.
        print(f"engine core: {type(e.engine.engine_core).__name__}", flush=True)
        ids = e.encode_prompt("Name a prime number.")
        ends = {}
        for rule in ("none", "spine", "stream"):
            events = run_session(e, SamplerParams(prefetch=rule, max_new_tokens=16, steps=8, budget=4, seed=3), ids)
            ends[rule] = [ev.tokens for ev in events if isinstance(ev, SessionEnd)][0]
            ok = ends[rule] == ends["none"]
            print(f"{rule:<7} {'same state as sequential' if ok else 'DIFFERS from sequential'}", flush=True)
            if not ok:
                return 1
        left = e.pending_records()
        print(f"records left in the workers: {left}")
        return 0 if left == 0 else 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
