"""PowerMH (Karan and Du): the MH chain whose every transition cuts the response at a uniform position,
resamples the suffix from q_tau and accepts with eq. 6 (the paper's sec 3.1 and alg. 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
        return score(state, cut, proposals[0], self.alpha, self.epsilon, self.law)


class PowerMH(ChainMethod):
    name = "powermh"
    order = 10
    display = "PowerMH"
    help = "uniform cut, suffix from q_tau"
    paper = "Karan and Du 2025; the PreSTO paper, sec 3.1, alg. 1"

    def family(self, params: SamplerParams) -> PowerMHFamily:
        return PowerMHFamily(params.alpha, params.proposal_tau, params.epsilon)


METHOD = PowerMH()
