"""Resample-move PowerSMC (Gilks and Berzuini 2001; for power targets e.g. arXiv 2604.16453): sequential
Monte Carlo whose particles are moved by PowerMH after every resampling.

P particles (`--particles`) grow block by block (`-B`), each block's extension drawn from q_tau; a
particle's log weight gains alpha log p0 - log q_tau of its extension (the incremental weight towards
p0^alpha of the prefix so far).  When the effective sample size (sum w)^2 / sum w^2 falls below
`--rm-ess` of P, systematic resampling (`resample_uniform(seed, block)`, as PowerSMC's) copies the
heavy particles and drops the light ones, and the weights start again from equal.  Then every particle
makes K PowerMH transitions (`-K`) on its prefix, which leave the block's target p0^alpha(prefix)
invariant, so the weights stay what they were and resampling's copies part again.  The answer is drawn
by the final weights (`resample_uniform(seed, -1)`).

Each particle is a PowerMH chain under the session's prefetch rule on the one engine loop
(`runtime/session/population.py`), waiting at each block's start (its extension in) for the others:
PreSTO reproduces the sequential resample-move token for token.  Particle i runs with
`member_seed(seed, i)`; a copy made by resampling goes on with its own seed.  Particle 0 keeps the
session seed, so P = 1 is PowerMH itself; K = 0, PowerSMC with block-wise growth and no ramp
(`--sampler powersmc --smc-ramp 0`), is not an MH chain method's setting (K is at least 1).

EOS: as every MH chain, a particle runs to n tokens (EOS ends no extension and no proposal), so the
target is PowerMH's, p0^alpha over responses of n tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from presto_tui.runtime.core.fields import check, get, read_int, read_list, read_tokens
from presto_tui.runtime.core.method import EventType, MethodInfo
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import member_seed, resample_uniform
from presto_tui.runtime.core.spec import Group, Limit, Param, number_text, rule_words
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.methods.chain import PopulationMethod
from presto_tui.runtime.methods.powermh import METHOD as POWERMH
from presto_tui.runtime.methods.powersmc import SMC_STEP, PowerSMCInfo, SmcStep
from presto_tui.runtime.session.batch import draw, ess, normalised, systematic
from presto_tui.runtime.session.driver import Driver
from presto_tui.runtime.session.events import Choice, Event, SessionStart, Transition
from presto_tui.runtime.session.metrics import response_scores
from presto_tui.runtime.session.population import Barrier, Population


@dataclass(frozen=True)
class RmStep(SmcStep):
    """One block of resample-move: PowerSMC's record of it (each particle's extension, the log weights
    after it, the ESS, the resampling and each particle's parent), then its PowerMH moves: per particle
    (after resampling) the transitions accepted and its state after them.  Its exponent is alpha."""

    accepted: tuple[int, ...]  # per particle: of its K transitions, how many accepted
    states: tuple[tuple[int, ...], ...]  # per particle: its generated tokens after its moves
    # per particle: the MH transitions it made (its own `Transition`s; None in a trace written before they
    # were recorded, whose readers take K each)
    transitions: tuple[int, ...] | None = None


def _encode(ev: RmStep) -> dict:
    return {**SMC_STEP.encode(ev), "accepted": list(ev.accepted), "states": [list(t) for t in ev.states],
            **({"transitions": list(ev.transitions)} if ev.transitions is not None else {})}


def _decode(d: dict) -> RmStep:
    smc = SMC_STEP.decode(d)
    P = len(smc.tokens)
    accepted = tuple(read_int(a, "accepted") for a in read_list(get(d, "accepted"), "accepted"))
    states = tuple(read_tokens(t, "states") for t in read_list(get(d, "states"), "states"))
    check(len(accepted) == P and len(states) == P, "states", "should hold one entry per particle, as accepted and "
          "tokens do")
    moves = None
    if "transitions" in d:  # (written since the moves were counted per particle)
        moves = tuple(read_int(n, "transitions", 0) for n in read_list(get(d, "transitions"), "transitions"))
        check(len(moves) == P, "transitions", "should hold one entry per particle, as accepted does")
        check(all(a <= n for a, n in zip(accepted, moves)), "accepted", "should be at most each particle's transitions")
    return RmStep(**{f: getattr(smc, f) for f in smc.__dataclass_fields__}, accepted=accepted, states=states,
                  transitions=moves)


RM_STEP = EventType("rm_step", RmStep, _encode, _decode,
                    lambda ev: [t for grown in (*ev.tokens, *ev.states) for t in grown])


def member_params(params: SamplerParams, i: int) -> SamplerParams:
    """Particle i's chain: PowerMH at the session's exponent and temperature, with its own seed."""
    return params.with_(sampler=POWERMH.name, seed=member_seed(params.seed, i))


class ResampleMoveDriver(Population):
    """The particles on the loop, a barrier at every block's start (see the module docstring)."""

    def make_members(self) -> list[Driver]:
        P = self.params.particles
        self.log_w = [0.0] * P
        self._open: dict[str, Any] | None = None  # the block's record until its moves are done
        self._accepted = [0] * P
        self._moves = [0] * P  # per particle: its transitions in the open block
        return [self.member(member_params(self.params, i), state=self.start_state(i)) for i in range(P)]

    def barriers(self) -> list[Barrier]:
        return [(b, 0) for b in range(self.params.n_blocks)]

    def member_event(self, i: int, ev: Event) -> None:
        if isinstance(ev, Transition):
            self._accepted[i] += ev.accepted
            self._moves[i] += 1

    def cross(self, barrier: Barrier, states: list[SeqState]) -> list[SeqState]:
        """A block's extensions are in: reweight, perhaps resample (the moves follow)."""
        p, b = self.params, barrier[0]
        self._close(states)
        L = states[0].T - p.block
        grown = tuple(x.tokens[L:] for x in states)
        if not (b == 0 and self.given is not None):  # (given start states are draws of the target: no weight)
            for i, x in enumerate(states):
                self.log_w[i] += p.alpha * math.fsum(x.logp[L:]) - math.fsum(x.logq[L:])
        weights = tuple(self.log_w)
        e = ess(self.log_w)
        resample = e < p.rm_ess * p.particles
        parents = systematic(normalised(self.log_w), resample_uniform(p.seed, b)) if resample \
            else list(range(p.particles))
        if resample:
            states = [states[j] for j in parents]
            self.log_w = [0.0] * p.particles
        self._open = dict(step=b, t=states[0].T, exponent=p.alpha, tokens=grown, log_weights=weights, ess=e,
                          resampled=resample, parents=tuple(parents), start=self.clock())
        return states

    def _close(self, states: list[SeqState]) -> None:
        """The open block's moves are done (`states`: after them, and perhaps the next block's extension)."""
        if self._open is None:
            return
        o, self._open = self._open, None
        start = o.pop("start")
        self.emit(RmStep(**o, wall_s=self.clock() - start, accepted=tuple(self._accepted),
                         states=tuple(x.tokens[:o["t"]] for x in states), transitions=tuple(self._moves)))
        self._accepted, self._moves = [0] * len(states), [0] * len(states)

    def finish(self, states: list[SeqState]) -> None:
        self._close(states)
        p = self.params
        pick = draw(normalised(self.log_w), resample_uniform(p.seed, -1))
        answer = states[pick]
        loglik, confidence = response_scores(answer.tokens, answer.logp, answer.entropy, self.engine.eos_id)
        self.emit(Choice(pick, f"drawn by the final weights of {p.particles} particles", tuple(self.log_w),
                                loglik, confidence))
        self.state = answer


class ResampleMoveInfo(PowerSMCInfo):
    """PowerSMC's numbers (blocks, resamplings, the last ESS, log Z, genealogy) and the moves: each particle's
    PowerMH transitions a block (per particle slot, as the record counted them), and how many accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.moves = 0
        self.moved = 0
        self.steps = 0  # K, from the session's parameters
        self.member_transitions: list[int] = []
        self.member_accepted: list[int] = []
        self.inferred = False  # a record without its particles' transitions: K each taken

    def update(self, ev: object) -> None:
        super().update(ev)
        if isinstance(ev, SessionStart):
            self.steps = int(ev.params.get("steps") or 0)
        elif isinstance(ev, RmStep):
            P = len(ev.accepted)
            if len(self.member_transitions) != P:
                self.member_transitions, self.member_accepted = [0] * P, [0] * P
            # each particle's transitions as the record counted them; a trace written before it did: K a block
            moves = ev.transitions if ev.transitions is not None else (self.steps,) * P
            self.inferred |= ev.transitions is None
            for i, (n, a) in enumerate(zip(moves, ev.accepted)):
                self.member_transitions[i] += n
                self.member_accepted[i] += a
            self.moved += sum(ev.accepted)
            self.moves += sum(moves)

    def member_moves(self) -> list[tuple[int, int]]:
        return list(zip(self.member_transitions, self.member_accepted))

    def session_moves(self) -> tuple[int, int] | None:
        return (self.moves, self.moved) if self.smc_steps else None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **({"moves_accepted": self.moved, "moves_proposed": self.moves}
                                        if self.smc_steps else {})}

    def rows(self) -> list[tuple[str, str]]:
        share = f" ({self.moved / self.moves:.2f})" if self.moves else ""
        per = "  ".join(f"p{i + 1} {a}/{n}" for i, (n, a) in enumerate(self.member_moves()))
        return super().rows() + ([("moves accepted / proposed", f"{self.moved}/{self.moves}{share}"),
                                  ("moves per particle (accepted/proposed)", per)] if self.smc_steps else [])

    def notes(self) -> list[str]:
        out = []
        if self.smc_steps and not self.resamplings:
            out.append("it never resampled: the effective sample size stayed at or above --rm-ess of the particles "
                       "after every block, so its answer is one of independent PowerMH chains drawn by importance "
                       "weight (a higher --rm-ess resamples sooner)")
        if self.inferred:
            out.append("its trace predates per-particle move counts: each particle is taken to have made K "
                       "transitions a block")
        return out


class ResampleMove(PopulationMethod):
    name = "resample-move"
    order = 150  # after PowerSMC, whose particles parameter it reads
    display = "resample-move"
    help = "particles grown in blocks, reweighted towards p0^alpha, resampled and moved by K PowerMH transitions"
    aliases = ("rm",)
    paper = "Gilks and Berzuini 2001 (resample-move); for power targets e.g. arXiv 2604.16453"
    session = ResampleMoveDriver
    reads = ("particles",)
    events = (RM_STEP,)
    view_state: ClassVar[str | None] = "presto_tui.views.state.resample_move:RmRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.baseline:ParticleGrid"
    params = (
        Param("rm_ess", float, 0.5, "resample-move: resample when the effective sample size falls below this share of "
              "the particles (1: after every block, 0: never)", Group.OWN, "resampling below ESS share (resample-move)",
              limit=Limit(0, 1), symbol="ess"),
    )

    def describe(self, p: Mapping[str, Any]) -> str:
        # its blocks are the chain's (-B), said where every MH method's K and B are (`run`'s header, stats' columns)
        return f"{self.display} P={p.get('particles')} ESS<{number_text(p['rm_ess'])}P, {rule_words(p)}"

    def members(self, params: SamplerParams) -> list[SamplerParams]:
        return [member_params(params, i) for i in range(params.particles)]

    def member_count(self, params: SamplerParams) -> int:
        return params.particles

    def member_samplers(self, params: SamplerParams) -> set[str]:
        return {member_params(params, 0).sampler}  # (every particle's chain is PowerMH's)

    def family(self, params: SamplerParams) -> Any:
        return POWERMH.family(member_params(params, 0))

    def info(self) -> MethodInfo:
        return ResampleMoveInfo()


METHOD = ResampleMove()
