"""MultiTryMH (the PreSTO paper's D.4): multiple-try Metropolis over `--tries` candidate suffixes per
transition at the temperatures MULTITRY_TAUS, one selected by its weight (`samplers/multitry.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from presto_tui.runtime.core.cutlaw import CutLaw, UniformCut
from presto_tui.runtime.core.mh import Score
from presto_tui.runtime.core.names import PrefetchRule
from presto_tui.runtime.core.params import MULTITRY_TAUS, SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.core.spec import Group, Limit, Naming, Param, ParamError
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.methods.chain import ChainMethod
from presto_tui.runtime.samplers.families import Draw
from presto_tui.runtime.samplers.multitry import candidates, mtm_score, selection


@dataclass(frozen=True)
class MultiTryFamily:
    """Multiple-try Metropolis over `tries` candidate suffixes (see samplers.multitry)."""

    alpha: float
    epsilon: float
    tries: int
    law: CutLaw = field(default_factory=UniformCut)
    name: ClassVar[str] = "multitry"
    score_taus: tuple[float, ...] = MULTITRY_TAUS
    multiple: ClassVar[bool] = True

    @property
    def requests_per_decision(self) -> int:
        return self.tries

    def draws(self, inp: DecisionInputs) -> tuple[Draw, ...]:
        c = candidates(inp, self.tries)
        return tuple(zip(c.seeds, c.taus))

    def select(self, inp: DecisionInputs, proposals: Sequence[Proposal]) -> int:
        return selection(list(proposals), candidates(inp, self.tries), self.alpha)[1]

    def score(self, state: SeqState, cut: int, inp: DecisionInputs, proposals: Sequence[Proposal],
              selected: int) -> Score:
        return mtm_score(state, cut, list(proposals), candidates(inp, self.tries), self.alpha, self.epsilon,
                         selected)


class MultiTryMH(ChainMethod):
    name = "multitry"
    order = 30
    display = "MultiTryMH"
    help = "multiple-try Metropolis over --tries candidate suffixes"
    paper = "the PreSTO paper, D.4"
    params = (
        Param("tries", int, 4, "MultiTryMH: candidates per transition", Group.OWN, "tries (MultiTryMH)",
              limit=Limit(1, 64, integer=True), symbol="M"),
    )
    # sequential MultiTryMH sends its tries in one call: one request is no sequential step of it
    speedup_unavailable = "sequential MultiTryMH sends its tries in one call; `presto-tui bench` measures it"

    def check(self, params: SamplerParams, naming: Naming) -> None:
        if PrefetchRule.of(params.prefetch).presto and params.budget < params.tries:
            raise ParamError.about("budget", "{budget} {0} is below {tries} {1}: a MultiTryMH decision needs all its "
                                   "candidates in one call", params.budget, params.tries, naming=naming)

    def family(self, params: SamplerParams) -> MultiTryFamily:
        return MultiTryFamily(params.alpha, params.epsilon, params.tries)


METHOD = MultiTryMH()
