"""The logits processor that records what log q_tau, log p0 and the entropy need, in the worker.

vLLM returns one kind of log-probability engine-wide.  We keep
`logprobs_mode="raw_logprobs"` (log p0 of each sampled token) and register
`LogitStats`, a read-only V1 logits processor that sees the same float32 logits
z before temperature and records, for requests tagged through
`SamplingParams.extra_args`, logsumexp(z), logsumexp(z / tau), the full
entropy of p0 and the top token at each position.  Then
log q_tau = (log p0 + lse_1) / tau - lse_tau exactly, with no top-k
approximation and no second scoring pass.

The processor runs wherever vLLM runs its model: in this process, in the
engine-core process, in every tensor-parallel worker, on the last pipeline
stage, on Ray workers.  Its records live on the instance, and the engine
fetches them with `collective_rpc("presto_fetch_records", ...)`, a method that
`RecordsExtension` adds to vLLM's worker class (vLLM's `worker_extension_cls`),
so the call reaches the workers through whatever executor vLLM uses, by name,
with nothing pickled.  Both classes are defined at module level so that vLLM
can load them in worker processes.
"""

from __future__ import annotations

import torch
from vllm.v1.sample.logits_processor import LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

TAG = "presto_tag"
SCORE_TAUS = "presto_score_taus"

# position -> (lse_1, lse_tau, entropy, top token, top logit, (lse at each score tau))
Record = tuple[float, float, float, int, float, tuple[float, ...]]


class LogitStats(LogitsProcessor):
    """Records normalisers and entropy of the raw logits of tagged requests; changes nothing."""

    def __init__(self, vllm_config, device, is_pin_memory):
        self.rows: dict[int, tuple[str, float, list[int], tuple[float, ...]]] = {}
        self.records: dict[str, dict[int, Record]] = {}

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
        taus = torch.tensor([self.rows[i][1] for i in idx], dtype=torch.float64, device=z.device).unsqueeze(1)
        lse1 = torch.logsumexp(z, dim=-1)
        lse_tau = torch.logsumexp(z / taus, dim=-1)
        logp = z - lse1.unsqueeze(1)
        p = logp.exp()
        ent = -torch.special.xlogy(p, p).sum(dim=-1)
        top_logit, top = z.max(dim=-1)
        # one copy to the host for the whole batch (a copy per value would sync the device each time)
        rows = torch.stack([lse1, lse_tau, ent, top.to(torch.float64), top_logit], dim=1).tolist()
        for k, i in enumerate(idx):
            tag, _, out, score_taus = self.rows[i]
            extra = tuple(float(torch.logsumexp(z[k] / t, dim=-1)) for t in score_taus)  # MultiTryMH only
            a, b, e, t_id, t_logit = rows[k]
            self.records.setdefault(tag, {})[len(out)] = (a, b, e, int(t_id), t_logit, extra)
        return logits


def _stats_of(worker) -> list[LogitStats]:
    runner = getattr(worker, "model_runner", None) or getattr(getattr(worker, "worker", None), "model_runner", None)
    batch = getattr(runner, "input_batch", None)
    procs = getattr(batch, "logitsprocs", None)
    return [p for p in (procs.all if procs is not None else ()) if isinstance(p, LogitStats)]


def fetch_records(worker, tags: list[str], discard: list[str]) -> dict[str, dict[int, Record]]:
    """Run in each worker (collective_rpc): hand over and forget the records of `tags`, and
    forget those of `discard` (aborted or failed requests).  Workers that did not sample
    (earlier pipeline stages) have none."""
    out: dict[str, dict[int, Record]] = {}
    for stats in _stats_of(worker):
        for tag in discard:
            stats.records.pop(tag, None)
        for tag in tags:
            rec = stats.records.pop(tag, None)
            if rec:
                out[tag] = rec
    return out


def pending_records(worker) -> int:
    """Run in each worker: how many requests' records are held (tests: nothing leaks)."""
    return sum(len(s.records) for s in _stats_of(worker))


class RecordsExtension:
    """Methods vLLM mixes into its worker class, called by name with `collective_rpc`."""

    def presto_fetch_records(self, tags: list[str], discard: list[str]) -> dict[str, dict[int, Record]]:
        return fetch_records(self, tags, discard)

    def presto_pending_records(self) -> int:
        return pending_records(self)
