"""What an MH chain method's decisions are, as kernels and walkers see them (paper sec 3.1, sec 5, D.1).

A family says how one MH decision turns its random inputs into a cut and
requests, which of the returned proposals is the move, and how the move is
scored against the state it would replace.  Kernels (sequential or PreSTO)
never ask which family they run; each chain method makes its own
(`Method.family`: PowerMH's, EntropyCut's and MultiTryMH's are in their modules
of `runtime/methods/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from presto_tui.runtime.core.cutlaw import CutLaw
from presto_tui.runtime.core.mh import Score
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.core.types import Proposal, SeqState

Draw = tuple[int, float]  # (suffix-sampling seed, temperature) of one request


class SamplerFamily(Protocol):
    """An MH chain method's decision rule: what requests a decision makes (`draws`, from its
    `DecisionInputs` alone), which proposal is the move (`select`) and its MH score (`score`), with
    the cut law it cuts by (`law`).  `PowerMHFamily` with a `CutLaw` of its own covers most methods;
    it proposes at `params.proposal_tau` or at one of its `score_taus` (docs/extending.md)."""

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


def sampler_family(params: SamplerParams) -> SamplerFamily:
    """The decision rule of `params`' MH chain method (ValueError for a one-shot method)."""
    family = params.method.family(params)
    if family is None:
        raise ValueError(f"--sampler {params.sampler} is not an MH chain: it has no sampler family")
    return family
