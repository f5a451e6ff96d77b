"""Independent Metropolis-Hastings (IMH) as a presto-tui method: a toy, but an honest one.

Every transition proposes a whole new response y from q_tau (the cut is always at the first
generated token) and accepts it with the Metropolis-Hastings probability for the target
pi_alpha ∝ p0^alpha and the independent proposal q_tau:

    A = min(1, [p0(y)^alpha q_tau(x)] / [p0(x)^alpha q_tau(y)]),

which is PowerMH's ratio (the PreSTO paper, eq. 6) at cut 0.  It is therefore PowerMH with a
cut law that always answers 0: its decisions draw their randomness as PowerMH's do, so every
PreSTO rule reproduces the sequential chain token for token, and the chain leaves pi_alpha
invariant.  It mixes slowly where q_tau is far from pi_alpha (it can only jump whole responses),
which is why PowerMH cuts at random instead.

Everything presto-tui needs of the method is declared here: its name, words, kind, budget axis
(K, the transitions per block), its one parameter (none: it reads the chain's), its decision rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from presto_tui.plugin import ChainMethod, PowerMHFamily, SamplerParams, SeqState


class WholeResponseCut:
    """The cut law of IMH: always the first generated token (probability 1, the same under every state)."""

    state_dependent = False
    reverse_term = True

    def cut(self, u: float, state: SeqState) -> int:
        return 0

    def log_prob(self, cut: int, state: SeqState) -> float:
        return 0.0 if cut == 0 else float("-inf")


@dataclass(frozen=True)
class IMHFamily(PowerMHFamily):
    name: ClassVar[str] = "imh"


class IndependentMH(ChainMethod):
    name = "imh"
    display = "independent MH"
    help = "every proposal a whole response from q_tau (an example plugin)"
    paper = "Metropolis-Hastings with an independent proposal; PowerMH's eq. 6 at cut 0"

    def family(self, params: SamplerParams) -> IMHFamily:
        return IMHFamily(params.alpha, params.proposal_tau, params.epsilon, WholeResponseCut())


METHOD = IndependentMH()
