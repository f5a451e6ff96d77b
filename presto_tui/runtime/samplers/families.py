"""Sampler families as objects, chosen once from the parameters (paper sec 3.1, sec 5, D.1).

A family says how one MH decision turns its random inputs into a cut and
requests, which of the returned proposals is the move, and how the move is
scored against the state it would replace.  Kernels (sequential or PreSTO)
never ask which family they run: `sampler_family(params)` is the only place
that reads the sampler's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from presto_tui.runtime.core.cutlaw import CutLaw, EntropyJumpCut, UniformCut
from presto_tui.runtime.core.mh import Score, score
from presto_tui.runtime.core.names import SamplerName
from presto_tui.runtime.core.params import MULTITRY_TAUS, SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.samplers.multitry import candidates, mtm_score, selection

Draw = tuple[int, float]  # (suffix-sampling seed, temperature) of one request


class SamplerFamily(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def law(self) -> CutLaw: ...

    @property
    def score_taus(self) -> tuple[float, ...]:
        """Extra temperatures each request reports log q at."""
        ...

    @property
    def requests_per_decision(self) -> int: ...

    @property
    def multiple(self) -> bool:
        """A decision makes several candidate requests (recorded as such)."""
        ...

    def draws(self, inp: DecisionInputs) -> tuple[Draw, ...]:
        """The requests a decision with these inputs makes."""
        ...

    def select(self, inp: DecisionInputs, proposals: Sequence[Proposal]) -> int:
        """Which proposal is the move (drawn once, from the proposals alone)."""
        ...

    def score(self, state: SeqState, cut: int, inp: DecisionInputs, proposals: Sequence[Proposal],
              selected: int) -> Score:
        """The move scored against `state`, the state it would replace."""
        ...


@dataclass(frozen=True)
class PowerMH:
    """Uniform cut, suffix from q_tau, accept with eq. 6 (Karan and Du)."""

    alpha: float
    tau: float
    epsilon: float
    law: CutLaw = field(default_factory=UniformCut)
    name = SamplerName.POWERMH.value
    score_taus: tuple[float, ...] = ()
    requests_per_decision = 1
    multiple = False

    def draws(self, inp: DecisionInputs) -> tuple[Draw, ...]:
        return ((inp.seed, self.tau),)

    def select(self, inp: DecisionInputs, proposals: Sequence[Proposal]) -> int:
        return 0

    def score(self, state: SeqState, cut: int, inp: DecisionInputs, proposals: Sequence[Proposal],
              selected: int) -> Score:
        return score(state, cut, proposals[0], self.alpha, self.epsilon, self.law)


@dataclass(frozen=True)
class EntropyCut(PowerMH):
    """PowerMH with EntropyCut's state-dependent cut law and its reverse-move term."""

    name = SamplerName.ENTROPYCUT.value


@dataclass(frozen=True)
class MultiTryMH:
    """Multiple-try Metropolis over `tries` candidate suffixes (see samplers.multitry)."""

    alpha: float
    epsilon: float
    tries: int
    law: CutLaw = field(default_factory=UniformCut)
    name = SamplerName.MULTITRY.value
    score_taus: tuple[float, ...] = MULTITRY_TAUS
    multiple = True

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


def sampler_family(params: SamplerParams) -> SamplerFamily:
    """The family of `params.sampler` (a name of the registry, `SamplerName`)."""
    match SamplerName.of(params.sampler):
        case SamplerName.POWERMH:
            return PowerMH(params.alpha, params.proposal_tau, params.epsilon)
        case SamplerName.ENTROPYCUT:
            return EntropyCut(params.alpha, params.proposal_tau, params.epsilon,
                              EntropyJumpCut(params.beta, params.cut_mix))
        case SamplerName.MULTITRY:
            return MultiTryMH(params.alpha, params.epsilon, params.tries)
        case _:
            raise ValueError(f"--sampler {params.sampler} is not an MH chain: it has no sampler family")
