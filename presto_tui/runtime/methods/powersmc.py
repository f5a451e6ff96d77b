"""PowerSMC (Azizi, Baghaei Potraghloo, Ahmadi, Kundu, Pedram 2026, arXiv 2602.10273; the PreSTO paper's
appendix E.8): sequence-level power sampling by sequential Monte Carlo.

P particles grown from q_tau in blocks of
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

Defaults: blocks of n/8 tokens and a ramp over 400/1024 of n (`block_of`, `ramp_of`), the PreSTO paper's
128 and 400 tokens of its n = 1024 (appendix E.8) scaled to the response asked for, so that at every n
the particles have seven chances to resample (a block of 128 tokens at n = 96 or 64 gave none).

PowerSMC is an approximation with finitely many particles (its distance to pi_alpha is measured in
`tests/test_law.py` with the law-test kit, `presto_tui.testing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from presto_tui.runtime.core.fields import (
    check,
    get,
    read_bool,
    read_finite,
    read_float,
    read_int,
    read_list,
    read_tokens,
    write_num,
)
from presto_tui.runtime.core.method import Axis, Cost, EventType, MethodInfo
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import resample_uniform, sample_seed
from presto_tui.runtime.core.spec import Group, Limit, Param
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.methods.population_numbers import SmcNumbers
from presto_tui.runtime.methods.samples import OneShotInfo, OneShotMethod
from presto_tui.runtime.session.batch import BatchDriver, draw, ess, normalised, systematic
from presto_tui.runtime.session.events import Choice, MethodEvent
from presto_tui.runtime.session.metrics import response_scores


@dataclass(frozen=True)
class SmcStep(MethodEvent):
    """One PowerSMC block: each particle's new tokens, the log weights after the block, the effective
    sample size, and what resampling did."""

    step: int
    t: int  # tokens grown per particle so far (the global time)
    exponent: float  # a(t): the target at this time is p0^a(t)
    tokens: tuple[tuple[int, ...], ...]  # per particle, this block's tokens (none once it stopped at EOS)
    log_weights: tuple[float, ...]  # unnormalised, after the block and before resampling
    ess: float  # (sum w)^2 / sum w^2 of those weights
    resampled: bool  # ESS fell below half the particles: systematic resampling
    parents: tuple[int, ...]  # particle i continues from particle parents[i] (the identity without resampling)
    wall_s: float  # the block's engine time


def _encode(ev: SmcStep) -> dict:
    return {"step": ev.step, "t": ev.t, "exponent": ev.exponent, "tokens": [list(t) for t in ev.tokens],
            "log_weights": [write_num(w) for w in ev.log_weights], "ess": ev.ess, "resampled": ev.resampled,
            "parents": list(ev.parents), "wall_s": ev.wall_s}


def _decode(d: dict) -> SmcStep:
    g = lambda key: get(d, key)
    toks = tuple(read_tokens(t, "tokens") for t in read_list(g("tokens"), "tokens"))
    weights = tuple(read_float(w, "log_weights") for w in read_list(g("log_weights"), "log_weights"))
    parents = tuple(read_int(j, "parents", 0, len(toks) - 1) for j in read_list(g("parents"), "parents"))
    check(len(toks) >= 1 and len(weights) == len(toks) == len(parents), "tokens",
          "should hold one entry per particle, as log_weights and parents do")
    return SmcStep(read_int(g("step"), "step"), read_int(g("t"), "t"), read_finite(g("exponent"), "exponent"), toks,
                   weights, read_finite(g("ess"), "ess", 0.0), read_bool(g("resampled"), "resampled"), parents,
                   read_finite(g("wall_s"), "wall_s", 0.0))


SMC_STEP = EventType("smc_step", SmcStep, _encode, _decode, lambda ev: [t for grown in ev.tokens for t in grown])


BLOCKS = 8  # the default block is n / BLOCKS tokens: the paper's 128 of 1024
RAMP_SHARE = 400 / 1024  # the default ramp: the paper's 400 tokens of 1024


def block_of(params: SamplerParams) -> int:
    """Tokens per block: --smc-block, else n / 8 (rounded up)."""
    return params.smc_block if params.smc_block is not None else max(1, math.ceil(params.max_new_tokens / BLOCKS))


def ramp_of(params: SamplerParams) -> int:
    """Tokens over which the exponent rises to alpha: --smc-ramp, else 400/1024 of n."""
    return params.smc_ramp if params.smc_ramp is not None else round(params.max_new_tokens * RAMP_SHARE)


def exponent(t: int, alpha: float, ramp: int, n: int) -> float:
    """PowerSMC's a(t): 1 at t = 0, alpha from t = min(ramp, n) on, linear between."""
    R = min(ramp, n)
    return alpha if R <= 0 else 1.0 + (alpha - 1.0) * min(1.0, t / R)


class PowerSMCDriver(BatchDriver):
    """PowerSMC (see the module docstring)."""

    def begin(self) -> None:
        P = self.params.particles
        self.tokens: list[tuple[int, ...]] = [()] * P
        self.logp = [0.0] * P
        self.logq = [0.0] * P
        self.values: list[tuple[tuple[float, ...], tuple[float, ...]]] = [((), ())] * P  # per token: log p0, H
        self.alive = [True] * P
        self.log_w = [0.0] * P
        self.t = 0
        self.step = 0
        self._launch()

    def _launch(self) -> None:
        n = self.params.max_new_tokens
        self._grow = min(block_of(self.params), n - self.t)
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
            self.values[i] = (self.values[i][0] + prop.logp, self.values[i][1] + prop.entropy)
            eos = self.engine.eos_id
            if len(prop.tokens) < self._grow or (eos is not None and eos in prop.tokens):
                self.alive[i] = False
        t0, t1 = self.t, self.t + self._grow
        ramp = ramp_of(p)
        a0, a1 = exponent(t0, p.alpha, ramp, n), exponent(t1, p.alpha, ramp, n)
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
        self.emit(call)
        self.emit(SmcStep(self.step, t1, p.alpha if last else a1, tuple(grown), tuple(self.log_w), e, resample,
                                 tuple(parents), call.wall_s))
        if resample:  # forks: each copy continues its ancestor's prefix with a seed of its own
            self.tokens = [self.tokens[j] for j in parents]
            self.logp = [self.logp[j] for j in parents]
            self.logq = [self.logq[j] for j in parents]
            self.values = [self.values[j] for j in parents]
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
        loglik, confidence = response_scores(self.tokens[pick], *self.values[pick], self.engine.eos_id)
        self.emit(Choice(pick, f"drawn by the final weights of {p.particles} particles", tuple(self.log_w),
                                loglik, confidence))
        self.state = SeqState(self.prompt_ids, self.tokens[pick])
        self.end("done")

    def _complete(self, a: float) -> None:
        """Every particle is complete: the target jumps from p0^a to p0^alpha (nothing if a = alpha)."""
        for i in range(self.params.particles):
            self.log_w[i] += (self.params.alpha - a) * self.logp[i]


class PowerSMCInfo(OneShotInfo):
    """Blocks grown, resamplings, the last block's ESS, the evidence estimate log Z, the ESS and genealogy
    per block (`population_numbers.SmcNumbers`), and the one-shot numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.smc_steps = 0
        self.resamplings = 0
        self.last_ess: float | None = None
        self.particles = 0
        self.smc = SmcNumbers()

    def update(self, ev: object) -> None:
        super().update(ev)
        if isinstance(ev, SmcStep):
            self.smc_steps += 1
            self.resamplings += ev.resampled
            self.last_ess = ev.ess
            self.particles = len(ev.tokens)
            self.smc.step(ev)
        elif isinstance(ev, Choice):  # the final weights: the evidence's last factor
            self.smc.final(ev.scores)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **({"smc_steps": self.smc_steps, "resamplings": self.resamplings,
                                         "last_ess": self.last_ess, **self.smc.to_dict()} if self.smc_steps else {})}

    def rows(self) -> list[tuple[str, str]]:
        rows = []
        if self.smc_steps:
            ess_text = f"{self.last_ess:.2f}" if self.last_ess is not None else "-"
            rows.append(("blocks / resamplings", f"{self.smc_steps} / {self.resamplings} (last ESS {ess_text})"))
            rows += self.smc.rows()
        return rows + super().rows()

    def drawn(self) -> str:
        return f"{self.particles}x{self.smc_steps}"

    def notes(self) -> list[str]:
        """A session that never resampled is importance sampling, not sequential Monte Carlo: say so."""
        if self.smc_steps == 1:
            return ["it never resampled: it grew one block, and PowerSMC resamples only between blocks (--smc-block "
                    "at least n), so its answer is one of independent samples drawn by importance weight"]
        if self.smc_steps and not self.resamplings:
            return ["it never resampled: the effective sample size stayed at or above half the particles after "
                    "every block, so its answer is one of independent samples drawn by importance weight (a "
                    "smaller --smc-block gives it more chances to resample)"]
        return []


class PowerSMC(OneShotMethod):
    name = "powersmc"
    order = 130
    display = "PowerSMC"
    help = "--particles particles grown in blocks, reweighted towards p0^alpha and resampled"
    aliases = ("smc",)
    paper = "Azizi et al. 2026 (arXiv 2602.10273); the PreSTO paper, appendix E.8"
    axis = Axis("particles", "P")
    events = (SMC_STEP,)
    view_state: ClassVar[str | None] = "presto_tui.views.state.baseline:SmcRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.baseline:ParticleGrid"
    params = (
        Param("particles", int, 8, "PowerSMC and resample-move: particles P", Group.OWN,
              "particles P (PowerSMC, resample-move)", limit=Limit(1, 4096, integer=True), symbol="P"),
        Param("smc_block", int, None, "PowerSMC: tokens a particle grows between resampling steps", Group.OWN,
              "tokens per block (PowerSMC; empty: n/8)", limit=Limit(1, 65536, integer=True), optional=True,
              default_text="n/8, the paper's 128 of 1024", symbol="B"),
        Param("smc_ramp", int, None, "PowerSMC: the exponent rises from 1 to alpha over this many tokens (at most n)",
              Group.OWN, "ramp: tokens to reach alpha (PowerSMC; empty: 0.39 n)", limit=Limit(0, 65536, integer=True),
              optional=True, default_text="400/1024 of n, the paper's 400 of 1024", symbol="R"),
    )

    def resolved(self, params: SamplerParams) -> dict[str, Any]:
        return {"smc_block": block_of(params), "smc_ramp": ramp_of(params)}

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> PowerSMCDriver:
        return PowerSMCDriver(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        return params.particles

    def cost(self, params: SamplerParams) -> Cost:
        """Each of ceil(n / block) steps grows every particle by a request; a particle decodes at most n
        tokens in all (a resampled copy continues its ancestor's prefix: only new tokens are decoded)."""
        blocks = math.ceil(params.max_new_tokens / block_of(params))
        return Cost(params.particles * blocks, params.particles * params.max_new_tokens)

    def info(self) -> MethodInfo:
        return PowerSMCInfo()


METHOD = PowerSMC()
