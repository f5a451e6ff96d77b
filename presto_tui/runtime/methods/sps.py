"""Scalable Power Sampling (Ji, Tutunov, Zimmer, Bou Ammar 2026, arXiv 2601.21590) on the engine loop.

The paper's algorithm 2 (appendix B; algorithm 1 is its chunk of one token), one step per chunk of
`sps_chunk` tokens until n tokens or EOS:

1. draws: L_t chunks from q_tau after the prefix (line 4);
2. candidates: the K_t most likely distinct chunks among them under p0 (line 5);
3. rollouts: M_t continuations of each candidate from q_tau, to the end of the response or
   `sps_horizon` tokens (line 7), all of them one batch of requests (they share the prefix: the
   engine's prefix cache serves it), and from their log p0 and log q_tau the estimate of the
   chunk's conditional under pi_alpha, the jackknife's by default (lines 8-15; the maths is in
   `runtime/samplers/sps.py`);
4. the chunk drawn from it with one keyed uniform (line 16), appended (line 17).

A candidate with no future (its chunk ends at EOS or at the n-th token) has zeta = 1 and no
rollouts, so the last chunk is drawn from p0^alpha over the candidates (eq. 16); a step with one
candidate takes it without rollouts.

Where this differs from the paper, and why:
- The paper draws chunks and rollouts from p0 (zeta as eq. 3 writes it); here both come from
  q_tau (`--tau`, 1/alpha by default as for every baseline) and each rollout carries the
  importance weight p0^alpha / q_tau, which is eq. 3 exactly at `--tau 1`.  The low-temperature
  proposal is what the other baselines sample from, and its weights vary less.
- A draw decodes to the end of the response (or the chunk plus the horizon), not one chunk: the
  draws that began with the chunk drawn are draws from q_tau after the new prefix, so they are
  the next step's first draws (each stays independent of the rollouts the choice was made
  with), and only the rest are drawn again.  With one candidate and one draw per step
  (`--sps-top-k 1`) no rollout is needed and the session is low temperature's request itself,
  token for token.

Seeds (docs/randomness.md): draw i of step s is `sample_seed(seed, s, i)` (so step 0's draw 0 is
low temperature's sample), rollout r of candidate k is `rollout_seed(seed, s, k, r)`, and the
chunk is drawn with `pick_uniform(seed, s)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from presto_tui.runtime.core.fields import (
    check,
    get,
    read_finite,
    read_float,
    read_int,
    read_list,
    read_tokens,
    write_num,
)
from presto_tui.runtime.core.method import Axis, Cost, EventType, MethodInfo
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import pick_uniform, rollout_seed, sample_seed
from presto_tui.runtime.core.spec import Group, Limit, Naming, Param, ParamError
from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.methods.samples import OneShotInfo, OneShotMethod
from presto_tui.runtime.samplers import sps
from presto_tui.runtime.session.driver import RoundTag, SessionDriver, Tag
from presto_tui.runtime.session.events import Choice, Event, InFlight, MethodEvent, ModelCall
from presto_tui.runtime.session.metrics import response_scores
from presto_tui.words import count

DRAWS, ROLLOUTS = 0, 1  # the two calls of a step (a ModelCall's `round`)


@dataclass(frozen=True)
class SpsStep(MethodEvent):
    """One step of Scalable Power Sampling (Ji et al. 2026; runtime/samplers/sps.py): the candidate
    chunks, the numbers their conditional was estimated from, and the chunk drawn.  Per candidate, in
    the step's order (by log p0, most likely first)."""

    step: int
    position: int  # tokens generated before this step
    candidates: tuple[tuple[int, ...], ...]  # each candidate chunk's tokens
    log_p0: tuple[float, ...]  # log p0 of each chunk given the prefix
    log_weights: tuple[tuple[float, ...], ...]  # its rollouts' log p0^alpha(y) - log q(y); () if it has no future
    log_zeta: tuple[float, ...]  # log zeta_hat (eq. 3; 0.0: no future, zeta = 1 exactly)
    plain: tuple[float, ...]  # the plug-in estimate (eq. 4)
    jackknife: tuple[float, ...]  # the jackknife estimate (eq. 5), before clipping; () when not used
    probs: tuple[float, ...]  # what the chunk was drawn from
    chosen: int
    u: float  # the uniform it was drawn with (inverse CDF over `probs`)
    draws: int  # chunks drawn from q_tau that the candidates were chosen from
    reused: int  # of those, continuations of draws that began with the previous step's chunk
    wall_s: float  # the step's engine time (its draws and its rollouts)


def _encode(ev: SpsStep) -> dict:
    return {"step": ev.step, "position": ev.position, "candidates": [list(c) for c in ev.candidates],
            "log_p0": [write_num(x) for x in ev.log_p0],
            "log_weights": [[write_num(w) for w in row] for row in ev.log_weights],
            "log_zeta": [write_num(x) for x in ev.log_zeta], "plain": list(ev.plain),
            "jackknife": [write_num(x) for x in ev.jackknife], "probs": list(ev.probs), "chosen": ev.chosen,
            "u": ev.u, "draws": ev.draws, "reused": ev.reused, "wall_s": ev.wall_s}


def _decode(d: dict) -> SpsStep:
    """A step of Scalable Power Sampling: one entry per candidate in every per-candidate field,
    probabilities in [0, 1] (the jackknife's raw values may leave it), the chosen one among them."""
    g = lambda key: get(d, key)
    cands = tuple(read_tokens(c, "candidates") for c in read_list(g("candidates"), "candidates"))
    k = len(cands)
    check(k >= 1 and all(cands), "candidates", "should hold at least one chunk of at least one token")
    per = lambda key, read: tuple(read(x, key) for x in read_list(g(key), key))
    log_p0, log_zeta = per("log_p0", read_float), per("log_zeta", read_float)
    share = lambda x, where: read_finite(x, where, 0.0, 1.0)
    plain, probs = per("plain", share), per("probs", share)
    jk = per("jackknife", read_finite)
    weights = tuple(tuple(read_float(w, "log_weights") for w in read_list(row, "log_weights"))
                    for row in read_list(g("log_weights"), "log_weights"))
    for key, values in (("log_p0", log_p0), ("log_weights", weights), ("log_zeta", log_zeta), ("plain", plain),
                        ("probs", probs)):
        check(len(values) == k, key, "should hold one entry per candidate")
    check(len(jk) in (0, k), "jackknife", "should hold one entry per candidate, or none")
    draws = read_int(g("draws"), "draws", 1)
    return SpsStep(read_int(g("step"), "step"), read_int(g("position"), "position"), cands, log_p0, weights,
                   log_zeta, plain, jk, probs, read_int(g("chosen"), "chosen", 0, k - 1),
                   read_finite(g("u"), "u", 0.0, 1.0), draws, read_int(g("reused"), "reused", 0, draws),
                   read_finite(g("wall_s"), "wall_s", 0.0))


SPS_STEP = EventType("sps_step", SpsStep, _encode, _decode, lambda ev: [t for chunk in ev.candidates for t in chunk])


def draws_of(params: SamplerParams) -> int:
    """L_t: the chunks drawn per step (--sps-draws, else --sps-top-k)."""
    return params.sps_draws if params.sps_draws is not None else params.sps_top_k


def part(p: Proposal, start: int, end: int | None = None) -> Proposal:
    """Tokens start..end of a proposal with their values."""
    return Proposal(p.tokens[start:end], p.logq[start:end], p.logp[start:end], p.entropy[start:end],
                    tuple(a[start:end] for a in p.logq_at))


class SpsDriver(SessionDriver):
    """Scalable Power Sampling (see the module docstring)."""

    def begin(self) -> None:
        self.t = 0  # tokens generated
        self.step = 0
        self.pool: list[Proposal] = []  # draws after the current prefix, each from q_tau
        self.reused = 0
        self.candidates: list[Proposal] = []  # this step's candidate chunks
        self._pending: list[Proposal | None] = []
        self._requests: list[Request] = []
        self._phase = DRAWS
        self._call_t0 = self._step_t0 = 0.0
        self._take_steps()

    # -- sizes -------------------------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.params.max_new_tokens - self.t

    def chunk_len(self, tokens: tuple[int, ...]) -> int:
        """The chunk a draw's tokens begin with: `sps_chunk` tokens (fewer at the end), up to its EOS."""
        n = min(self.params.sps_chunk, self.remaining, len(tokens))
        eos = self.engine.eos_id
        if eos is not None and eos in tokens[:n]:
            return tokens.index(eos) + 1
        return n

    def complete(self, tokens: tuple[int, ...]) -> bool:
        """Whether a draw holds a whole chunk (a continuation cut short by the horizon may not)."""
        n = self.chunk_len(tokens)
        eos = self.engine.eos_id
        return n > 0 and (n == min(self.params.sps_chunk, self.remaining) or tokens[n - 1] == eos)

    def ends(self, chunk: tuple[int, ...]) -> bool:
        """The response ends with this chunk: at its EOS, or at the n-th token."""
        eos = self.engine.eos_id
        return (eos is not None and eos in chunk) or self.t + len(chunk) >= self.params.max_new_tokens

    def horizon(self, left: int) -> int:
        """A request's tokens when `left` remain: all of them, or the horizon's."""
        H = self.params.sps_horizon
        return left if H == 0 else min(H, left)

    # -- the requests ------------------------------------------------------------------------
    def _submit_all(self, requests: list[Request], phase: int) -> None:
        self._phase, self._requests = phase, requests
        self._pending = [None] * len(requests)
        self._call_t0 = self.clock()
        self._submit.extend((RoundTag(i), r) for i, r in enumerate(requests))

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, RoundTag)
        self._pending[tag.position] = proposal

    def progress_event(self) -> Event | None:
        decoded = sum(self.engine.progress(h) for h in self._owned)
        decoded += sum(len(p.tokens) for p in self._pending if p is not None)
        return InFlight(len(self._requests), decoded, sum(r.n_new for r in self._requests))

    def _call_done(self) -> list[Proposal] | None:
        """The call in flight's proposals once all are back (None: it is still decoding)."""
        if not self._pending or any(p is None for p in self._pending):
            return None
        props: list[Proposal] = self._pending  # type: ignore[assignment]
        tokens = sum(len(p.tokens) for p in props)
        self.emit(ModelCall(self.step, self._phase, "propose", len(props), tokens,
                                   self.clock() - self._call_t0))
        self._pending, self._requests = [], []
        return props

    # -- a step ------------------------------------------------------------------------------
    def _take_steps(self) -> None:
        """Take steps until one waits for the engine or the response ends.  A step that needs no
        call (its draws kept from the step before and one candidate, or only candidates that end
        the response) is decided at once, so many can follow one another here: a loop, not a
        recursion."""
        while True:
            self._step_t0 = self.clock()
            if len(self.pool) < draws_of(self.params):
                self._draw()
                return
            if self._choose_candidates() or self._decide([]):
                return

    def _draw(self) -> None:
        """Top the draws up to L_t (the continuations kept from the last step come first)."""
        p, L = self.params, draws_of(self.params)
        prefix = self.state.prefix(self.state.T)
        n_new = self.remaining if p.sps_horizon == 0 else min(self.remaining, p.sps_chunk + p.sps_horizon)
        self._submit_all([Request(prefix, n_new, sample_seed(p.seed, self.step, i), p.proposal_tau, stop_eos=True)
                          for i in range(len(self.pool), L)], DRAWS)

    def advance_session(self) -> None:
        props = self._call_done()
        if props is None:
            return
        if self._phase == DRAWS:
            self.pool.extend(props)
            if self._choose_candidates() or self._decide([]):
                return
        elif self._decide(props):
            return
        self._take_steps()

    def _choose_candidates(self) -> bool:
        """The step's candidates; their rollouts submitted (True) unless none needs any."""
        p = self.params
        chunks = [part(d, 0, self.chunk_len(d.tokens)) for d in self.pool]
        top = sps.top_candidates([(c.tokens, math.fsum(c.logp)) for c in chunks], p.sps_top_k)
        self.candidates = [chunks[i] for i in top]
        if len(self.candidates) == 1:
            return False
        requests = []
        prefix = self.state.prefix(self.state.T)
        for k, c in enumerate(self.candidates):
            if self.ends(c.tokens):
                continue
            left = self.remaining - len(c.tokens)
            requests += [Request(prefix + c.tokens, self.horizon(left), rollout_seed(p.seed, self.step, k, r),
                                 p.proposal_tau, stop_eos=True) for r in range(p.sps_rollouts)]
        if not requests:  # the last chunk: every candidate ends the response (eq. 16)
            return False
        self._submit_all(requests, ROLLOUTS)
        return True

    def _decide(self, rollouts: list[Proposal]) -> bool:
        """Estimate, draw the chunk and append it; True if the response ended with it."""
        p = self.params
        M = p.sps_rollouts
        log_w: list[tuple[float, ...]] = []
        it = iter(rollouts)
        for c in self.candidates:
            if self.ends(c.tokens) or len(self.candidates) == 1:
                log_w.append(())
            else:
                log_w.append(tuple(sps.log_weight(p.alpha, r.logp, r.logq) for r in (next(it) for _ in range(M))))
        log_p0 = [math.fsum(c.logp) for c in self.candidates]
        est = sps.estimate(p.alpha, log_p0, log_w, bool(p.sps_jackknife))
        u = pick_uniform(p.seed, self.step)
        j = sps.pick(est.probs, u)
        chunk = self.candidates[j]
        self.emit(SpsStep(self.step, self.t, tuple(c.tokens for c in self.candidates), tuple(log_p0),
                                 tuple(log_w), est.log_zeta, est.plain, est.jackknife, est.probs, j, u,
                                 len(self.pool), self.reused, self.clock() - self._step_t0))
        done = self.ends(chunk.tokens)
        self.state = self.state.extended(chunk)
        self.t += len(chunk.tokens)
        if done:
            self._finish()
            return True
        # the draws that began with this chunk go on after it: draws for the next step
        n = len(chunk.tokens)
        kept = [part(d, n) for d in self.pool if d.tokens[:n] == chunk.tokens]
        self.pool = [d for d in kept if self.complete(d.tokens)][:draws_of(p)]
        self.reused = len(self.pool)
        self.step += 1
        return False

    def _finish(self) -> None:
        s = self.state
        # eqs. 21-22 of the response a person gets: up to and excluding EOS, as for every method
        loglik, confidence = response_scores(s.tokens, s.logp, s.entropy, self.engine.eos_id)
        self.emit(Choice(0, f"the path of {count(self.step + 1, 'step')}, each chunk drawn from its estimate",
                                (), loglik, confidence))
        self.end("done")


class SpsInfo(OneShotInfo):
    """Steps (chunks drawn) and rollouts issued (and the one-shot numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.sps_steps = 0
        self.rollouts = 0

    def update(self, ev: object) -> None:
        super().update(ev)
        if isinstance(ev, SpsStep):
            self.sps_steps += 1
            self.rollouts += sum(len(row) for row in ev.log_weights)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **({"sps_steps": self.sps_steps, "rollouts": self.rollouts}
                                        if self.sps_steps else {})}

    def rows(self) -> list[tuple[str, str]]:
        steps = [("steps / rollouts", f"{self.sps_steps} / {self.rollouts}")] if self.sps_steps else []
        return steps + super().rows()

    def drawn(self) -> str:
        return f"{self.rollouts}/{self.sps_steps}"


class ScalablePowerSampling(OneShotMethod):
    """Scalable Power Sampling: see the module docstring; the estimator is `runtime/samplers/sps.py`."""

    name = "sps"
    order = 140
    display = "Scalable Power Sampling"
    help = ("chunk by chunk from the top --sps-top-k candidates, each weighted by --sps-rollouts rollouts of its "
            "future")
    paper = "Ji, Tutunov, Zimmer, Bou Ammar 2026 (arXiv 2601.21590), algorithms 1-2, eqs. 3-5"
    axis = Axis("sps_rollouts", "M")
    events = (SPS_STEP,)
    view_state: ClassVar[str | None] = "presto_tui.views.state.sps:SpsRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.sps:SpsGrid"
    params = (
        # the paper ran K = M = 8 with chunks of B = 192 of 3072 tokens (its table 4); these defaults are sized
        # for a CPU and n = 96
        Param("sps_top_k", int, 4, "SPS: candidate chunks per step K, the most likely distinct ones among the draws",
              Group.OWN, "candidates K (SPS)", limit=Limit(1, 256, integer=True), symbol="K"),
        Param("sps_draws", int, None, "SPS: chunks drawn from q_tau per step L, the candidates' pool", Group.OWN,
              "draws L (SPS; empty: K)", limit=Limit(1, 4096, integer=True),
              optional=True, default_text="--sps-top-k", symbol="L"),
        Param("sps_rollouts", int, 4, "SPS: rollouts per candidate M, its future's weight estimated from them",
              Group.OWN, "rollouts M (SPS)", limit=Limit(1, 4096, integer=True), symbol="M"),
        Param("sps_horizon", int, 0, "SPS: tokens per rollout H; 0 rolls out to the end of the response", Group.OWN,
              "rollout tokens H (SPS; 0: to the end)", limit=Limit(0, 65536, integer=True),
              symbol="H", extra={"shown": {0: "end"}}),
        Param("sps_chunk", int, 16, "SPS: tokens per step B (1: token by token)", Group.OWN, "chunk B (SPS)",
              limit=Limit(1, 65536, integer=True), symbol="B"),
        Param("sps_jackknife", bool, True, "SPS: estimate each step's conditional with the jackknife (bias O(1/M^2)), "
              "or plug the rollouts' mean in (bias O(1/M))", Group.OWN, "jackknife (SPS: true/false)",
              negative="--no-sps-jackknife", symbol="jackknife"),
    )

    def describe(self, p: Mapping[str, Any]) -> str:
        horizon = p.get("sps_horizon")
        return (f"{self.display} K={p.get('sps_top_k')} of L={p.get('sps_draws') or p.get('sps_top_k')} draws, "
                f"M={p.get('sps_rollouts')}{f', H={horizon}' if horizon else ''}, B={p.get('sps_chunk')}"
                f"{'' if p.get('sps_jackknife', True) else ', no jackknife'}")

    def resolved(self, params: SamplerParams) -> dict[str, Any]:
        return {"sps_draws": draws_of(params)}

    def check(self, params: SamplerParams, naming: Naming) -> None:
        if params.sps_jackknife and params.sps_rollouts < 2:
            raise ParamError.about("sps_rollouts", "{sps_jackknife} needs {sps_rollouts} >= 2 (each leave-one-out "
                                   "estimate drops one rollout), got {0}; or turn {sps_jackknife} off",
                                   params.sps_rollouts, naming=naming)

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> SpsDriver:
        return SpsDriver(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        """A step's draws (L at once), then its candidates' rollouts (K M at once)."""
        return max(draws_of(params), params.sps_top_k * params.sps_rollouts)

    def cost(self, params: SamplerParams) -> Cost:
        """ceil(n / B) steps; at step s, with r = n - s B tokens left, L draws (each decodes r tokens, or
        B + H with a horizon H) and M rollouts of each of the K candidates (each r - B tokens, or H):
        requests <= steps (L + K M), tokens <= the sum over steps of L d_s + K M h_s (summed in closed
        form).  (K = 256, L = M = 4096, n = 4096: 2.7e8 requests, 5.5e11 tokens a session.)"""
        n, chunk, H = params.max_new_tokens, params.sps_chunk, params.sps_horizon
        L, rollouts = draws_of(params), params.sps_top_k * params.sps_rollouts
        steps = -(-n // chunk)
        if H == 0:  # to the end: step s's draws decode n - s B tokens, its rollouts B fewer
            full = n // chunk  # steps after which tokens are left to roll out
            drawn = steps * n - chunk * steps * (steps - 1) // 2
            tokens = L * drawn + rollouts * (full * n - chunk * full * (full + 1) // 2)
        else:
            tokens = steps * (L * min(n, chunk + H) + rollouts * min(n, H))
        return Cost(steps * (L + rollouts), tokens)

    def info(self) -> MethodInfo:
        return SpsInfo()


METHOD = ScalablePowerSampling()
