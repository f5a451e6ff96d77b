"""The transformers engine: an exact float32 reference and the fallback without vLLM.

It takes part in the engine loop by the documented fallback: `submit` queues a
request and `step` runs everything queued since the last step to completion as
one batch (so "live" requests finish at the next step, and `abort` can only
drop a request still queued).  Continuous batching would need per-row KV
caches of different lengths joining and leaving a running batch; for a
reference whose purpose is exact numbers on small runs that is not worth its
complexity, and the streaming rule stays exact on it (only slower).

One batch generates its requests in lockstep.  Every request of a
round extends a prefix of the same root state and ends at the same total
length (prompt + T), so after one shared forward over their longest common
prefix, row r first replays its own remaining prefix tokens and then samples;
all rows finish together and no padding is needed.

Per token, from the same float32 logits z (upcast to float64):
log p0 = log_softmax(z), log q_tau = log_softmax(z / tau), entropy of p0.
Sampling is by inverse CDF with one uniform per token from the request's own
torch generator, so a request gives the same tokens alone or in any batch
(up to float32 noise in the logits).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.engines.base import LoopEngine
from presto_tui.runtime.engines.tokenizer import ChatTokenizer, TextMixin


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        if any(s[i] != first[i] for s in seqs[1:]):
            return i
    return n


class TransformersEngine(TextMixin, LoopEngine):
    name = "transformers"

    def __init__(self, model_dir: Path, *, model_name: str | None = None, chat_template: bool = True,
                 threads: int | None = None, dtype: str = "float32"):
        import torch
        from transformers import AutoModelForCausalLM

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.text = ChatTokenizer(model_dir, chat_template)
        self.eos_id = self.text.eos_id
        self._model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).eval()
        self.model = model_name or Path(model_dir).name
        self.max_len = int(getattr(self._model.config, "max_position_embeddings", 0) or 0)
        self._cache = {"queries": 0.0, "hits": 0.0}
        self._queued: dict[int, Request] = {}
        self._handles = itertools.count()

    # -- the engine loop (the run-to-completion fallback) ------------------------------
    def submit(self, request: Request) -> int:
        h = next(self._handles)
        self._queued[h] = request
        return h

    def abort(self, handle: int) -> int:
        self._queued.pop(handle, None)
        return 0

    def progress(self, handle: int) -> int:
        return 0

    def partial(self, handle: int) -> tuple[int, ...]:
        return ()  # a batch runs to completion within one step: nothing shows before its end

    @property
    def live(self) -> int:
        return len(self._queued)

    def step(self) -> list[tuple[int, Proposal]]:
        batch, self._queued = self._queued, {}
        reqs = list(batch.values())
        # a stop-at-EOS row decodes in lockstep to the end and is cut after its EOS (the same tokens)
        return [(h, r.until_eos(p, self.eos_id)) for h, r, p in zip(batch, reqs, self._run(reqs))]

    def prefix_cache_stats(self) -> dict:
        """Prefix tokens asked for, and those served from the shared forward instead of recomputed."""
        return dict(self._cache)

    @property
    def info(self) -> dict:
        return {"engine": "transformers", "eos_id": self.eos_id, "dtype": str(self._model.dtype).replace("torch.", ""),
                "threads": self.torch.get_num_threads(), "max_model_len": self.max_len}

    def _run(self, requests: Sequence[Request]) -> list[Proposal]:
        if not requests:
            return []
        torch = self.torch
        ends = {len(r.prefix) + r.n_new for r in requests}
        if len(ends) > 1:  # rows of different total lengths: one lockstep batch per length
            by_end: dict[int, list[int]] = {}
            for i, r in enumerate(requests):
                by_end.setdefault(len(r.prefix) + r.n_new, []).append(i)
            out: list[Proposal | None] = [None] * len(requests)
            for idx in by_end.values():
                for i, p in zip(idx, self._run([requests[i] for i in idx])):
                    out[i] = p
            return out  # type: ignore[return-value]
        prefixes = [list(r.prefix) for r in requests]
        shared = _common_prefix(prefixes)
        # keep one token out of the shared forward so every row has an input at step 0
        shared = min(shared, min(len(p) for p in prefixes) - 1) if shared else 0
        B = len(requests)
        self._cache["queries"] += sum(len(p) for p in prefixes)
        self._cache["hits"] += shared * (B - 1)
        gens = [torch.Generator().manual_seed(int(r.seed)) for r in requests]
        taus = torch.tensor([r.tau for r in requests], dtype=torch.float64)
        out_tokens: list[list[int]] = [[] for _ in requests]
        out_lq: list[list[float]] = [[] for _ in requests]
        out_lp: list[list[float]] = [[] for _ in requests]
        out_h: list[list[float]] = [[] for _ in requests]
        out_x: list[list[list[float]]] = [[[] for _ in r.score_taus] for r in requests]
        with torch.inference_mode():
            cache = None
            if shared:
                res = self._model(input_ids=torch.tensor([prefixes[0][:shared]]), use_cache=True)
                cache = res.past_key_values
                if hasattr(cache, "batch_repeat_interleave"):
                    cache.batch_repeat_interleave(B)
                else:  # legacy tuple caches
                    cache = tuple((k.repeat(B, 1, 1, 1), v.repeat(B, 1, 1, 1)) for k, v in cache)
            total = next(iter(ends))
            logits: Any = None  # row r's next-token logits for position `pos`
            for pos in range(shared, total):
                # row r replays its prefix up to len(prefix_r), then samples
                inputs = [prefixes[r][pos] if pos < len(prefixes[r]) else
                          self._sample(r, logits[r], taus[r], gens[r], out_tokens, out_lq, out_lp, out_h,
                                       requests[r].score_taus, out_x[r])
                          for r in range(B)]
                if pos == total - 1:
                    break  # every row has drawn its last token; no forward needed
                res = self._model(input_ids=torch.tensor(inputs).unsqueeze(1), past_key_values=cache,
                                  use_cache=True)
                cache = res.past_key_values
                logits = res.logits[:, -1, :].to(torch.float64)
        return [Proposal(tuple(t), tuple(q), tuple(p), tuple(h), tuple(tuple(e) for e in x))
                for t, q, p, h, x in zip(out_tokens, out_lq, out_lp, out_h, out_x)]

    def _sample(self, r, z, tau, gen, toks, lqs, lps, hs, score_taus=(), extra=()) -> int:
        torch = self.torch
        logp = torch.log_softmax(z, dim=-1)
        logq = torch.log_softmax(z / tau, dim=-1)
        q = logq.exp()
        cdf = torch.cumsum(q, dim=-1)
        u = torch.rand(1, generator=gen, dtype=torch.float64)
        tok = int(torch.searchsorted(cdf, u * cdf[-1], right=True).clamp(max=len(cdf) - 1))
        toks[r].append(tok)
        lqs[r].append(float(logq[tok]))
        lps[r].append(float(logp[tok]))
        hs[r].append(float(-torch.special.xlogy(logp.exp(), logp.exp()).sum()))
        for t2, out in zip(score_taus, extra):
            out.append(float(z[tok] / t2 - torch.logsumexp(z / t2, dim=-1)))
        return tok
