"""The vLLM engine: vLLM's `LLMEngine`, stepped by presto-tui's engine loop.

Requests are added with `add_request`, advanced one token per `step()` with
continuous batching, and aborted with `abort_request`; every step hands back
the tokens each request decoded in it (`RequestOutputKind.DELTA`, token ids
only, no text), so progress is exact and the streaming rule can request a
later decision cut inside a proposal that is still decoding.  Per token, log p0 comes
from vLLM's raw log-probabilities and logsumexp(z), logsumexp(z/tau) and the
entropy from the `LogitStats` processor (vllm_stats.py), fetched from
whichever process ran the sampler with `collective_rpc`; so the same code
serves the in-process engine (the default on a CPU: fastest start), vLLM's
multiprocess engine core (VLLM_ENABLE_V1_MULTIPROCESSING=1), tensor and
pipeline parallel workers, and the Ray executor.

On GPUs vLLM 0.32 may choose its Model Runner V2, whose processor interface
differs; we set `VLLM_USE_V2_MODEL_RUNNER=0` to keep V1 (documented in the
README).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from presto_tui.errors import EngineError
from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.engines.base import LoopEngine
from presto_tui.runtime.engines.tokenizer import ChatTokenizer, TextMixin

SELF_CHECK_TOL = 1e-3


@dataclass
class _Live:
    request: Request
    tag: str
    tokens: list[int] = field(default_factory=list)  # decoded so far
    logprobs: list = field(default_factory=list)  # vLLM's raw log-prob entries, one per token


def _bind_cpu_workers(n: int) -> None:
    """vLLM's CPU workers bind their threads one NUMA node each and refuse to start with more
    workers than nodes (a laptop or a small VM has one); give each worker its own cores."""
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if len(cpus) < n:
        raise EngineError(f"{n} vLLM CPU workers need {n} cores, this machine has {len(cpus)}")
    per = len(cpus) // n
    parts = [cpus[i * per:(i + 1) * per] for i in range(n)]
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(f"{p[0]}-{p[-1]}" if len(p) > 1 else str(p[0]) for p in parts)


def _whole_prefills(model_dir: Path, max_model_len: int | None) -> dict:
    """vLLM's arguments that keep a request's prefill in one engine step on a CPU: there, a seeded request whose
    prefill is cut across steps (chunked prefill, when a step's token budget runs out) has its generator rewound
    with `set_offset`, which a CPU generator refuses ("CPU Generator does not use offset"), failing every
    session on the engine (seen at -C 6 on the embedded model).  Without chunking the step's budget must hold
    the longest sequence: the model's context (its config's), or `max_model_len` where given."""
    longest = max_model_len
    if not longest:
        try:
            longest = int(json.loads((Path(model_dir) / "config.json").read_text())["max_position_embeddings"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}  # (an unknown context: vLLM's defaults, chunking and all)
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, longest)}


class VLLMEngine(TextMixin, LoopEngine):
    name = "vllm"

    def __init__(self, model_dir: Path, *, model_name: str | None = None, chat_template: bool = True,
                 dtype: str | None = None, max_model_len: int | None = None,
                 gpu_memory_utilization: float | None = None, tensor_parallel_size: int = 1,
                 pipeline_parallel_size: int = 1, distributed_executor_backend: str | None = None,
                 enforce_eager: bool | None = None, kv_cache_gib: float | None = None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        import torch
        from vllm import LLM

        from presto_tui.runtime.engines.vllm_stats import LogitStats, RecordsExtension

        on_gpu = torch.cuda.is_available()
        self.text = ChatTokenizer(model_dir, chat_template)
        self.eos_id = self.text.eos_id
        self.model = model_name or Path(model_dir).name
        parallel = tensor_parallel_size * pipeline_parallel_size > 1
        args = dict(
            model=str(model_dir),
            # fp32 on CPU: bf16 log-probs move by ~0.1 per token with batch composition
            dtype=dtype or ("auto" if on_gpu else "float32"),
            enable_prefix_caching=True,
            logprobs_mode="raw_logprobs",
            logits_processors=[LogitStats],
            worker_extension_cls=f"{RecordsExtension.__module__}.{RecordsExtension.__qualname__}",
            seed=0,
            disable_log_stats=False,  # keeps the prefix-cache counters that `bench` reports
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            enforce_eager=(not on_gpu) if enforce_eager is None else enforce_eager,
            distributed_executor_backend=distributed_executor_backend or ("mp" if parallel else "uni"),
        )
        if not on_gpu:
            # the CPU attention backend needs a multiple of 32 for prefix caching
            args.update(block_size=32, kv_cache_memory_bytes=int((kv_cache_gib or 1.0) * 2**30))
            args.update(_whole_prefills(model_dir, max_model_len))
            if parallel:
                _bind_cpu_workers(tensor_parallel_size * pipeline_parallel_size)
        elif gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len:
            args["max_model_len"] = max_model_len
        try:
            self.llm = LLM(**args)
        except Exception as e:
            raise EngineError(f"vLLM could not start on {self.model}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from None
        self.engine = self.llm.llm_engine
        cfg = self.engine.model_config
        self.max_len = int(cfg.max_model_len)
        self.device = "cuda" if on_gpu else "cpu"
        self.executor = args["distributed_executor_backend"]
        self._dtype = str(cfg.dtype).replace("torch.", "")
        self._tags = itertools.count()
        self._handles = itertools.count()
        self._live: dict[int, _Live] = {}
        self._by_tag: dict[str, int] = {}
        self._discard: list[str] = []  # tags whose records the workers should drop
        self._steps = 0
        self._kv_now: float | None = None  # fraction of the KV pool in use after the last step
        self._kv_peak: float | None = None  # the largest since the last kv_peak() call
        self._kv_watch = False  # read the pool's use after each step only once someone asks (kv_peak)
        # in process (the default) the scheduler is at hand: reading it costs nothing per step
        self._scheduler = getattr(getattr(getattr(self.engine, "engine_core", None), "engine_core", None),
                                  "scheduler", None)

    @property
    def info(self) -> dict:
        return {"engine": "vllm", "eos_id": self.eos_id, "device": self.device, "dtype": self._dtype,
                "max_model_len": self.max_len, "executor": self.executor}

    def prefix_cache_stats(self) -> dict:
        """Cumulative prefix-cache token queries and hits (paper D.2's hit rate)."""
        try:
            metrics = self.llm.get_metrics()
        except Exception:
            return {}
        get = lambda name: sum(float(getattr(m, "value", 0) or 0) for m in metrics if m.name == name)
        return {"queries": get("vllm:prefix_cache_queries"), "hits": get("vllm:prefix_cache_hits")}

    def kv_peak(self) -> float | None:
        self._kv_watch = True
        peak, self._kv_peak = self._kv_peak, self._kv_now
        return peak

    def _kv_usage(self) -> float | None:
        """The fraction of KV blocks in use, as vLLM's scheduler counts it (blocks held by live requests;
        cached blocks no request holds are free), read in process; else vLLM's own gauge."""
        if self._scheduler is not None:
            return float(self._scheduler.get_kv_cache_usage())
        try:  # a multiprocess engine core: the gauge its scheduler's stats set after every step
            return max((float(getattr(m, "value", 0) or 0) for m in self.llm.get_metrics()
                        if m.name == "vllm:kv_cache_usage_perc"), default=None)
        except Exception:  # no gauge to read: stop trying after every step
            self._kv_watch = False
            return None

    # -- the engine loop -----------------------------------------------------------------
    def submit(self, request: Request, logprobs: int = 0) -> int:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        from presto_tui.runtime.engines.vllm_stats import SCORE_TAUS, TAG

        if len(request.prefix) + request.n_new > self.max_len:
            raise EngineError(f"prompt plus horizon ({len(request.prefix) + request.n_new} tokens) exceeds the "
                              f"model's context of {self.max_len}")
        tag = f"p{next(self._tags)}"
        params = SamplingParams(
            n=1, temperature=request.tau, top_p=1.0, top_k=0, seed=int(request.seed),
            # Fixed horizon (app. B.1): ignore_eos keeps going past EOS.  Never min_tokens:
            # it masks EOS out of the logits, so the suffix would not come from q_tau.  The
            # baselines stop at EOS (E.8).
            max_tokens=request.n_new, ignore_eos=not request.stop_eos, logprobs=logprobs, detokenize=False,
            output_kind=RequestOutputKind.DELTA,
            extra_args={TAG: tag, SCORE_TAUS: list(request.score_taus)})
        self.engine.add_request(tag, TokensPrompt(prompt_token_ids=list(request.prefix)), params)
        h = next(self._handles)
        self._live[h] = _Live(request, tag)
        self._by_tag[tag] = h
        return h

    def abort(self, handle: int) -> int:
        live = self._live.pop(handle, None)
        if live is None:
            return 0
        self.engine.abort_request([live.tag])
        del self._by_tag[live.tag]
        self._discard.append(live.tag)
        return len(live.tokens)

    def progress(self, handle: int) -> int:
        live = self._live.get(handle)
        return len(live.tokens) if live else 0

    def partial(self, handle: int) -> tuple[int, ...]:
        live = self._live.get(handle)
        return tuple(live.tokens) if live else ()

    @property
    def live(self) -> int:
        return len(self._live)

    def step(self) -> list[tuple[int, Proposal]]:
        try:
            outputs = self.engine.step()
        except Exception:
            self._discard.extend(self._by_tag)
            raise
        self._steps += 1
        usage = self._kv_usage() if self._kv_watch else None
        if usage is not None:
            self._kv_now = usage
            self._kv_peak = usage if self._kv_peak is None else max(self._kv_peak, usage)
        done = []
        for o in outputs:
            h = self._by_tag.get(o.request_id)
            if h is None:
                continue
            live = self._live[h]
            comp = o.outputs[0]
            live.tokens.extend(int(t) for t in comp.token_ids)
            live.logprobs.extend(comp.logprobs or ())
            if o.finished:
                done.append(o.request_id)
        if not done and not self._discard:
            return []
        records = self._fetch(done)
        out = []
        for tag in done:
            h = self._by_tag.pop(tag)
            live = self._live.pop(h)
            out.append((h, self._proposal(live, records.get(tag, {}))))
        return out

    def _fetch(self, tags: list[str]) -> dict[str, dict]:
        discard, self._discard = self._discard, []
        merged: dict[str, dict] = {}
        for part in self.engine.collective_rpc("presto_fetch_records", args=(tags, discard)):
            for tag, rec in (part or {}).items():
                if len(rec) > len(merged.get(tag, {})):
                    # tensor-parallel ranks hold the same records: take one whole set (keys come back as
                    # ints or, through some serialisers, as strings)
                    merged[tag] = {int(k): v for k, v in rec.items()}
        return merged

    def _proposal(self, live: _Live, rec: dict) -> Proposal:
        req = live.request
        toks = tuple(live.tokens)
        stopped = req.stop_eos and 0 < len(toks) < req.n_new  # vLLM stopped it at one of the model's EOS tokens
        if (len(toks) != req.n_new and not stopped) or len(rec) < len(toks) or len(live.logprobs) != len(toks):
            raise EngineError(f"vLLM returned {len(toks)} tokens and {len(rec)} records for {req.n_new} requested")
        lp, lq, h = [], [], []
        extra: list[list[float]] = [[] for _ in req.score_taus]
        for i, tok in enumerate(toks):
            lse1, lse_tau, ent, _, _, lse_extra = rec[i]
            logp = float(live.logprobs[i][tok].logprob)
            lp.append(logp)
            lq.append((logp + lse1) / req.tau - lse_tau)
            h.append(ent)
            for t2, lse2, acc in zip(req.score_taus, lse_extra, extra):
                acc.append((logp + lse1) / t2 - lse2)
        return Proposal(toks, tuple(lq), tuple(lp), tuple(h), tuple(tuple(e) for e in extra))

    def pending_records(self) -> int:
        """Records held in the workers (0 once every request has been fetched or discarded)."""
        self._fetch([])
        return sum(self.engine.collective_rpc("presto_pending_records"))

    # -- start-up check ---------------------------------------------------------------------
    def self_check(self, prefix: Sequence[int], tau: float) -> float:
        """Check that the recorded normalisers belong to the logits vLLM sampled from.

        For each position of a short request, vLLM's own raw log-prob of the most
        likely token must equal top_logit - lse_1 from the processor, and
        log q_tau computed by our formula must equal top_logit/tau - lse_tau.
        Returns the largest disagreement; raises EngineError above 1e-3.
        """
        req = Request(tuple(prefix), 8, 12345, tau)
        h = self.submit(req, logprobs=1)
        live = self._live[h]
        tag = live.tag
        rec: dict = {}
        while h in self._live:
            outputs = self.engine.step()
            self._steps += 1
            for o in outputs:
                if o.request_id == tag:
                    live.logprobs.extend(o.outputs[0].logprobs or ())
                    live.tokens.extend(o.outputs[0].token_ids)
                    if o.finished:
                        rec = self._fetch([tag]).get(tag, {})
                        del self._live[h], self._by_tag[tag]
        worst = 0.0
        for i in range(len(live.tokens)):
            if i not in rec:
                raise EngineError("self-check: the logits processor recorded nothing (is it registered?)")
            lse1, lse_tau, _, top, top_logit, _ = rec[i]
            if top not in live.logprobs[i]:
                raise EngineError("self-check: vLLM's top token differs from the processor's")
            logp_top = float(live.logprobs[i][top].logprob)
            worst = max(worst, abs(logp_top - (top_logit - lse1)),
                        abs(((logp_top + lse1) / tau - lse_tau) - (top_logit / tau - lse_tau)))
        if worst > SELF_CHECK_TOL:
            raise EngineError(f"self-check failed: log q_tau and log p0/tau - logsumexp differ by {worst:.2e} "
                              f"(> {SELF_CHECK_TOL}); refusing to sample")
        return worst
