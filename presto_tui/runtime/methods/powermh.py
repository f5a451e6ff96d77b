"""PowerMH (Karan and Du): the MH chain whose every transition cuts the response at a uniform position,
resamples the suffix from q_tau and accepts with eq. 6 (the paper's sec 3.1 and alg. 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from presto_tui.runtime.core.cutlaw import CutLaw, UniformCut
from presto_tui.runtime.core.mh import Score, score
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.methods.chain import ChainMethod
from presto_tui.runtime.samplers.families import Draw


@dataclass(frozen=True)
class PowerMHFamily:
    """Uniform cut, suffix from q_tau, accept with eq. 6 (Karan and Du)."""

    alpha: float
    tau: float
    epsilon: float
    law: CutLaw = field(default_factory=UniformCut)
    name: ClassVar[str] = "powermh"
    score_taus: tuple[float, ...] = ()
    requests_per_decision: ClassVar[int] = 1
    multiple: ClassVar[bool] = False

    def draws(self, inp: DecisionInputs) -> tuple[Draw, ...]:
        return ((inp.seed, self.tau),)

    def select(self, inp: DecisionInputs, proposals: Sequence[Proposal]) -> int:
        return 0

    def score(self, state: SeqState, cut: int, inp: DecisionInputs, proposals: Sequence[Proposal],
              selected: int) -> Score:
        return score(at_temperature(state, self.tau, self.score_taus), cut, proposals[0], self.alpha, self.epsilon,
                     self.law)


def at_temperature(state: SeqState, tau: float, score_taus: Sequence[float]) -> SeqState:
    """`state` with its log q at `tau`, where `tau` is one of the temperatures its requests reported log q
    at (`score_taus`): a family that proposes at a temperature of its own (not the run's `--tau`, which a
    state's `logq` holds) scores the state at the temperature it proposes at, so its MH ratio is that of
    its own proposal density (the machinery parallel tempering's `retempered` uses).  Else unchanged."""
    if state.logq_at and tau in score_taus:
        return replace(state, logq=state.logq_at[list(score_taus).index(tau)])
    return state


class PowerMH(ChainMethod):
    name = "powermh"
    order = 10
    display = "PowerMH"
    help = "uniform cut, suffix from q_tau"
    paper = "Karan and Du 2025; the PreSTO paper, sec 3.1, alg. 1"

    def family(self, params: SamplerParams) -> PowerMHFamily:
        return PowerMHFamily(params.alpha, params.proposal_tau, params.epsilon)


METHOD = PowerMH()
