"""What the one-shot methods' sessions share: requests submitted together and awaited together
(`BatchDriver`), a finished sample as an event (`sample_event`), and the weights and resampling of
sequential Monte Carlo (`normalised`, `ess`, `systematic`, `draw`), which PowerSMC and resample-move
use alike."""

from __future__ import annotations

import math
from bisect import bisect_right

from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.session.driver import RoundTag, SessionDriver, Tag
from presto_tui.runtime.session.events import Event, InFlight, ModelCall, Sample
from presto_tui.runtime.session.metrics import response_scores


def sample_event(index: int, p: Proposal, clock: float, eos_id: int | None) -> Sample:
    """A finished sample: its sums of log q_tau and log p0 over every token it drew (EOS too: the
    distributions it was drawn from and ranked by), and eqs. 21-22 of its response (before EOS)."""
    loglik, confidence = response_scores(p.tokens, p.logp, p.entropy, eos_id)
    return Sample(index, p.tokens, math.fsum(p.logq), math.fsum(p.logp), loglik, confidence, clock)


class BatchDriver(SessionDriver):
    """Requests submitted together and awaited together; `progress_event` shows them decoding."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pending: list[Proposal | None] = []
        self._requests: list[Request] = []
        self._batch_t0 = 0.0

    def request(self, tokens: tuple[int, ...], n_new: int, seed: int) -> Request:
        return Request(self.prompt_ids + tokens, n_new, seed, self.params.proposal_tau, stop_eos=True)

    def submit(self, requests: list[tuple[int, Request]], slots: int) -> None:
        """Submit (slot, request) pairs; `slots` results are awaited (slots without a request stay None)."""
        self.pending = [None] * slots
        self._requests = [r for _, r in requests]
        self._batch_t0 = self.clock()
        self._submit.extend((RoundTag(i), r) for i, r in requests)

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, RoundTag)
        self.pending[tag.position] = proposal
        self.delivered_one(tag.position, proposal)

    def delivered_one(self, i: int, proposal: Proposal) -> None:
        pass

    def batch_done(self) -> bool:
        return all(self.pending[i] is not None for i in range(len(self.pending)) if self._awaited(i))

    def _awaited(self, i: int) -> bool:
        return True

    def call_event(self, round_: int) -> ModelCall:
        props = [p for p in self.pending if p is not None]
        return ModelCall(0, round_, "propose", len(props), sum(len(p.tokens) for p in props),
                         self.clock() - self._batch_t0)

    def progress_event(self) -> Event | None:
        decoded = sum(self.engine.progress(h) for h in self._owned)
        decoded += sum(len(p.tokens) for p in self.pending if p is not None)
        return InFlight(len(self._requests), decoded, sum(r.n_new for r in self._requests))


def _cdf(weights: list[float]) -> list[float]:
    total = math.fsum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    cdf[-1] = 1.0  # rounding must not leave a u in [0, 1) past the last particle
    return cdf


def systematic(weights: list[float], u: float) -> list[int]:
    """Systematic resampling: particle j takes the ancestor at (u + j) / P of the weights' CDF."""
    P, cdf = len(weights), _cdf(weights)
    return [min(P - 1, bisect_right(cdf, (u + j) / P)) for j in range(P)]


def draw(weights: list[float], u: float) -> int:
    """The particle at u in [0, 1) of the weights' CDF."""
    return min(len(weights) - 1, bisect_right(_cdf(weights), u))


def normalised(log_w: list[float]) -> list[float]:
    """Weights from their logs, summing to 1 (the largest taken out first, so none overflows)."""
    m = max(log_w)
    w = [math.exp(x - m) for x in log_w]
    s = math.fsum(w)
    return [x / s for x in w]


def ess(log_w: list[float]) -> float:
    """The effective sample size (sum w)^2 / sum w^2 of weights given by their logs."""
    w = normalised(log_w)
    return 1.0 / math.fsum(x * x for x in w)
