"""The paper's test-time baselines (appendix E.8) as sessions on the one engine loop.

They batch with everything else on the engine and record traces like the MH
chains.  None targets p0^alpha exactly with finitely many samples: low
temperature and best-of-N sharpen every conditional separately, PowerSMC is a
finite-particle approximation.  All stop a sample at EOS (E.8), up to n tokens.

- `lowtemp`: one sample at temperature 1/alpha (`--tau`).
- `bestofn`: N samples at that temperature; keep the one with the highest sum
  of token log-probabilities under that sampling distribution (the paper's
  choice, `--rank logq`) or under p0 (`--rank logp`); ties go to the first.
  Sample i has the seed `sample_seed(seed, 0, i)`, so sample 0 is `lowtemp`'s.
- `powersmc` (Azizi et al. 2026): P particles grown from q_tau in blocks of
  `smc_block` tokens; the target after t tokens is p0^a(t) with the exponent
  ramped linearly from 1 to alpha over the first min(`smc_ramp`, n) tokens, so
  a particle's log weight since it was last resampled grows by
  a(t1) log p0(x_1:t1) - a(t0) log p0(x_1:t0) - log q_tau(x_t0+1:t1) (the
  per-token p0^a / q_tau weights with the ramp's correction, telescoped); a
  particle that stopped at EOS keeps its tokens and only the ramp moves its
  weight.  Once every particle is complete (n reached, or all stopped at EOS,
  perhaps through resampling) the exponent jumps to alpha, so the final
  weights target p0^alpha exactly.  After a block, if the effective
  sample size (sum w)^2 / sum w^2 falls below P/2, systematic resampling (one
  uniform per block; particle j takes ancestor F^-1((u + j) / P)) forks the
  survivors: a copy continues the same prefix with a seed of its own, and the
  engine's prefix cache keeps the shared prefix from being decoded again.  The
  answer is drawn by the final weights.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from presto_tui.runtime.core.names import SamplerName
from presto_tui.runtime.core.randomness import resample_uniform, sample_seed
from presto_tui.runtime.core.types import Proposal, Request, SeqState
from presto_tui.runtime.session.driver import RoundTag, SessionDriver, Tag
from presto_tui.runtime.session.events import Choice, Event, InFlight, ModelCall, Sample, SmcStep
from presto_tui.runtime.session.metrics import answer_quality
from presto_tui.runtime.session.sps import SpsDriver


def sample_event(index: int, p: Proposal, clock: float, eos_id: int | None) -> Sample:
    """A finished sample: its sums over every token it drew (EOS included: its law), and eqs. 21-22 of
    its response (EOS excluded: what a person reads)."""
    return Sample(index, p.tokens, math.fsum(p.logq), math.fsum(p.logp),
                  *answer_quality(p.tokens, p.logp, p.entropy, eos_id), clock)


class _Batch(SessionDriver):
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


class SamplesDriver(_Batch):
    """Low temperature (one sample) and best-of-N (N samples, the best kept)."""

    def begin(self) -> None:
        n = 1 if self.params.sampler == SamplerName.LOWTEMP else self.params.samples
        self.submit([(i, self.request((), self.params.max_new_tokens, sample_seed(self.params.seed, 0, i)))
                     for i in range(n)], n)

    def delivered_one(self, i: int, proposal: Proposal) -> None:
        self._out.append(sample_event(i, proposal, self.clock(), self.engine.eos_id))

    def advance_session(self) -> None:
        if not self.batch_done():
            return
        self._out.append(self.call_event(0))
        props: list[Proposal] = self.pending  # type: ignore[assignment]
        scores: tuple[float, ...]
        if len(props) == 1:
            best, rule, scores = 0, "the only sample", (math.fsum(props[0].logq),)
        else:
            by_p = self.params.bon_rank == "logp"
            scores = tuple(math.fsum(p.logp if by_p else p.logq) for p in props)
            best = max(range(len(props)), key=lambda i: (scores[i], -i))  # ties: the first
            rule = f"highest sum of log {'p0' if by_p else 'q_tau'} of {len(props)}"
        self.state = SeqState(self.prompt_ids).extended(props[best])
        self._out.append(Choice(best, rule, scores, *self.answer_quality()))
        self._end("done")


def exponent(t: int, alpha: float, ramp: int, n: int) -> float:
    """PowerSMC's a(t): 1 at t = 0, alpha from t = min(ramp, n) on, linear between."""
    R = min(ramp, n)
    return alpha if R <= 0 else 1.0 + (alpha - 1.0) * min(1.0, t / R)


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
    w = normalised(log_w)
    return 1.0 / math.fsum(x * x for x in w)


class PowerSMCDriver(_Batch):
    """PowerSMC (see the module docstring)."""

    def begin(self) -> None:
        P = self.params.particles
        self.tokens: list[tuple[int, ...]] = [()] * P
        self.logp = [0.0] * P
        self.logq = [0.0] * P
        self.paths = [SeqState(self.prompt_ids)] * P  # each particle's tokens with their per-token values
        self.alive = [True] * P
        self.log_w = [0.0] * P
        self.t = 0
        self.step = 0
        self._launch()

    def _launch(self) -> None:
        n = self.params.max_new_tokens
        self._grow = min(self.params.smc_block, n - self.t)
        self.submit([(i, self.request(self.tokens[i], self._grow, sample_seed(self.params.seed, self.step, i)))
                     for i in range(self.params.particles) if self.alive[i]], self.params.particles)

    def _awaited(self, i: int) -> bool:
        return self.alive[i]

    def advance_session(self) -> None:
        if not self.batch_done():
            return
        p, n = self.params, self.params.max_new_tokens
        grown: list[tuple[int, ...]] = []
        before: list[tuple[float, float]] = []  # (log p0 before the block, log q_tau of its tokens)
        for i in range(p.particles):
            prop = self.pending[i] if self.alive[i] else None
            before.append((self.logp[i], math.fsum(prop.logq) if prop is not None else 0.0))
            if prop is None:
                grown.append(())
                continue
            grown.append(prop.tokens)
            self.tokens[i] += prop.tokens
            self.logp[i] += math.fsum(prop.logp)
            self.logq[i] += math.fsum(prop.logq)
            self.paths[i] = self.paths[i].extended(prop)
            eos = self.engine.eos_id
            if len(prop.tokens) < self._grow or (eos is not None and eos in prop.tokens):
                self.alive[i] = False
        t0, t1 = self.t, self.t + self._grow
        a0, a1 = exponent(t0, p.alpha, p.smc_ramp, n), exponent(t1, p.alpha, p.smc_ramp, n)
        for i, (logp0, dq) in enumerate(before):
            self.log_w[i] += a1 * self.logp[i] - a0 * logp0 - dq
        last = t1 >= n or not any(self.alive)
        if last:
            self._complete(a1)
        e = ess(self.log_w)
        resample = not last and e < p.particles / 2
        parents = systematic(normalised(self.log_w), resample_uniform(p.seed, self.step)) if resample \
            else list(range(p.particles))
        call = self.call_event(self.step)
        self._out.append(call)
        self._out.append(SmcStep(self.step, t1, p.alpha if last else a1, tuple(grown), tuple(self.log_w), e, resample,
                                 tuple(parents), call.wall_s))
        if resample:  # forks: each copy continues its ancestor's prefix with a seed of its own
            self.tokens = [self.tokens[j] for j in parents]
            self.logp = [self.logp[j] for j in parents]
            self.logq = [self.logq[j] for j in parents]
            self.paths = [self.paths[j] for j in parents]
            self.alive = [self.alive[j] for j in parents]
            self.log_w = [0.0] * p.particles
            if not any(self.alive):  # every copy is of a particle that stopped: nothing left to grow
                last = True
                self._complete(a1)
        self.t, self.step = t1, self.step + 1
        if not last:
            self._launch()
            return
        pick = draw(normalised(self.log_w), resample_uniform(p.seed, -1))
        self.state = self.paths[pick]
        self._out.append(Choice(pick, f"drawn by the final weights of {p.particles} particles", tuple(self.log_w),
                                *self.answer_quality()))
        self._end("done")

    def _complete(self, a: float) -> None:
        """Every particle is complete: the target jumps from p0^a to p0^alpha (nothing if a = alpha)."""
        for i in range(self.params.particles):
            self.log_w[i] += (self.params.alpha - a) * self.logp[i]


BASELINES: dict[str, type[SessionDriver]] = {
    SamplerName.LOWTEMP.value: SamplesDriver,
    SamplerName.BESTOFN.value: SamplesDriver,
    SamplerName.POWERSMC.value: PowerSMCDriver,
    SamplerName.SPS.value: SpsDriver,  # Scalable Power Sampling (Ji et al. 2026), beside the paper's baselines
}
