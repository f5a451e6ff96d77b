"""The vLLM backend: vLLM's offline engine, in-process, with per-token log q_tau, log p0 and entropy.

vLLM returns one kind of log-probability engine-wide.  We keep
`logprobs_mode="raw_logprobs"` (log p0 of each sampled token) and register a
read-only V1 logits processor, `LogitStats`, that sees the same float32 logits
z before temperature and records, for requests tagged through
`SamplingParams.extra_args`, logsumexp(z), logsumexp(z / tau) and the full
entropy of p0 at each position.  Then log q_tau = (log p0 + lse_1)/tau - lse_tau
exactly, with no top-k approximation and no second scoring pass.

The engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so the
processor hands its records back in memory.  On GPUs vLLM 0.32 may choose its
Model Runner V2, whose processor interface differs; we set
`VLLM_USE_V2_MODEL_RUNNER=0` to keep V1 (documented in the README).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

from presto_tui.errors import EngineError
from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.engines.tokenizer import ChatTokenizer, TextMixin

TAG = "presto_tag"
SELF_CHECK_TOL = 1e-3

# tag -> {position: (lse_1, lse_tau, entropy, top_token, top_logit, (lse at each score tau))}
_RECORDS: dict[str, dict[int, tuple]] = {}
SCORE_TAUS = "presto_score_taus"


def _processor_class():
    import torch
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    class LogitStats(LogitsProcessor):
        """Records normalisers and entropy of the raw logits; changes nothing."""

        def __init__(self, vllm_config, device, is_pin_memory):
            self.rows: dict[int, tuple[str, float, list[int], tuple[float, ...]]] = {}

        def is_argmax_invariant(self) -> bool:
            return False  # so that vLLM calls it on every step, greedy or not

        def update_state(self, batch_update) -> None:
            process_dict_updates(
                self.rows, batch_update,
                lambda params, _prompt, out: (params.extra_args[TAG], float(params.temperature), out,
                                              tuple(params.extra_args.get(SCORE_TAUS, ())))
                if params.extra_args and TAG in params.extra_args else None)

        def apply(self, logits):
            if not self.rows:
                return logits
            idx = sorted(i for i in self.rows if i < logits.shape[0])
            if not idx:
                return logits
            z = logits[idx].to(torch.float64)
            taus = torch.tensor([self.rows[i][1] for i in idx], dtype=torch.float64).unsqueeze(1)
            lse1 = torch.logsumexp(z, dim=-1)
            lse_tau = torch.logsumexp(z / taus, dim=-1)
            logp = z - lse1.unsqueeze(1)
            ent = -torch.special.xlogy(logp.exp(), logp.exp()).sum(dim=-1)
            top_logit, top = z.max(dim=-1)
            for k, i in enumerate(idx):
                tag, _, out, score_taus = self.rows[i]
                extra = tuple(float(torch.logsumexp(z[k] / t, dim=-1)) for t in score_taus)
                _RECORDS.setdefault(tag, {})[len(out)] = (
                    float(lse1[k]), float(lse_tau[k]), float(ent[k]), int(top[k]), float(top_logit[k]), extra)
            return logits

    return LogitStats


class VLLMEngine(TextMixin):
    name = "vllm"

    def __init__(self, model_dir: Path, *, model_name: str | None = None, chat_template: bool = True,
                 dtype: str | None = None, max_model_len: int | None = None,
                 gpu_memory_utilization: float | None = None, tensor_parallel_size: int = 1,
                 enforce_eager: bool | None = None, kv_cache_gib: float | None = None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        import torch
        from vllm import LLM

        on_gpu = torch.cuda.is_available()
        self.text = ChatTokenizer(model_dir, chat_template)
        self.eos_id = self.text.eos_id
        self.model = model_name or Path(model_dir).name
        args = dict(
            model=str(model_dir),
            # fp32 on CPU: bf16 log-probs move by ~0.1 per token with batch composition
            dtype=dtype or ("auto" if on_gpu else "float32"),
            enable_prefix_caching=True,
            logprobs_mode="raw_logprobs",
            logits_processors=[_processor_class()],
            seed=0,
            disable_log_stats=False,  # keeps the prefix-cache counters that `bench` reports
            tensor_parallel_size=tensor_parallel_size,
            enforce_eager=(not on_gpu) if enforce_eager is None else enforce_eager,
        )
        if not on_gpu:
            # the CPU attention backend needs a multiple of 32 for prefix caching
            args.update(block_size=32, distributed_executor_backend="uni",
                        kv_cache_memory_bytes=int((kv_cache_gib or 1.0) * 2**30))
        elif gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len:
            args["max_model_len"] = max_model_len
        try:
            self.llm = LLM(**args)
        except Exception as e:
            raise EngineError(f"vLLM could not start on {self.model}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from None
        cfg = self.llm.llm_engine.model_config
        self.max_len = int(cfg.max_model_len)
        self.device = "cuda" if on_gpu else "cpu"
        self._dtype = str(cfg.dtype).replace("torch.", "")
        self._tags = itertools.count()

    @property
    def info(self) -> dict:
        return {"engine": "vllm", "eos_id": self.eos_id, "device": self.device, "dtype": self._dtype,
                "max_model_len": self.max_len}

    def prefix_cache_stats(self) -> dict:
        """Cumulative prefix-cache token queries and hits (paper D.2's hit rate)."""
        try:
            metrics = self.llm.get_metrics()
        except Exception:
            return {}
        get = lambda name: sum(float(getattr(m, "value", 0) or 0) for m in metrics if m.name == name)
        return {"queries": get("vllm:prefix_cache_queries"), "hits": get("vllm:prefix_cache_hits")}

    def _params(self, req: Request, tag: str, logprobs: int = 0):
        from vllm import SamplingParams

        return SamplingParams(
            n=1, temperature=req.tau, top_p=1.0, top_k=0, seed=int(req.seed),
            # Fixed horizon (app. B.1): ignore_eos keeps going past EOS.  Never min_tokens:
            # it masks EOS out of the logits, so the suffix would not come from q_tau.
            max_tokens=req.n_new, ignore_eos=True,
            logprobs=logprobs, detokenize=False,
            extra_args={TAG: tag, SCORE_TAUS: list(req.score_taus)})

    def _run(self, requests: Sequence[Request], logprobs: int = 0):
        from vllm.inputs import TokensPrompt

        for r in requests:
            if len(r.prefix) + r.n_new > self.max_len:
                raise EngineError(f"prompt plus horizon ({len(r.prefix) + r.n_new} tokens) exceeds the "
                                  f"model's context of {self.max_len}")
        tags = [f"{next(self._tags)}" for _ in requests]
        prompts = [TokensPrompt(prompt_token_ids=list(r.prefix)) for r in requests]
        params = [self._params(r, t, logprobs) for r, t in zip(requests, tags)]
        try:
            outs = self.llm.generate(prompts, params, use_tqdm=False)
            return [(r, t, o.outputs[0]) for r, t, o in zip(requests, tags, outs)]
        except Exception:
            for t in tags:
                _RECORDS.pop(t, None)
            raise

    def generate(self, requests: Sequence[Request]) -> list[Proposal]:
        out = []
        for req, tag, comp in self._run(requests):
            rec = _RECORDS.pop(tag)
            toks = tuple(int(t) for t in comp.token_ids)
            if len(toks) != req.n_new or len(rec) < req.n_new:
                raise EngineError(f"vLLM returned {len(toks)} tokens and {len(rec)} records for "
                                  f"{req.n_new} requested")
            lp, lq, h = [], [], []
            extra: list[list[float]] = [[] for _ in req.score_taus]
            for i, tok in enumerate(toks):
                lse1, lse_tau, ent, _, _, lse_extra = rec[i]
                logp = float(comp.logprobs[i][tok].logprob)
                lp.append(logp)
                lq.append((logp + lse1) / req.tau - lse_tau)
                h.append(ent)
                for t2, lse2, acc in zip(req.score_taus, lse_extra, extra):
                    acc.append((logp + lse1) / t2 - lse2)
            out.append(Proposal(toks, tuple(lq), tuple(lp), tuple(h), tuple(tuple(e) for e in extra)))
        return out

    def self_check(self, prefix: Sequence[int], tau: float) -> float:
        """Check that the recorded normalisers belong to the logits vLLM sampled from.

        For each position of a short request, vLLM's own raw log-prob of the most
        likely token must equal top_logit - lse_1 from the processor, and
        log q_tau computed by our formula must equal top_logit/tau - lse_tau.
        Returns the largest disagreement; raises EngineError above 1e-3.
        """
        req = Request(tuple(prefix), 8, 12345, tau)
        (_, tag, comp), = self._run([req], logprobs=1)
        rec = _RECORDS.pop(tag)
        worst = 0.0
        for i in range(len(comp.token_ids)):
            lse1, lse_tau, _, top, top_logit, _ = rec[i]
            if top not in comp.logprobs[i]:
                raise EngineError("self-check: vLLM's top token differs from the processor's")
            logp_top = float(comp.logprobs[i][top].logprob)
            worst = max(worst, abs(logp_top - (top_logit - lse1)),
                        abs(((logp_top + lse1) / tau - lse_tau) - (top_logit / tau - lse_tau)))
        if worst > SELF_CHECK_TOL:
            raise EngineError(f"self-check failed: log q_tau and log p0/tau - logsumexp differ by {worst:.2e} "
                              f"(> {SELF_CHECK_TOL}); refusing to sample")
        return worst
