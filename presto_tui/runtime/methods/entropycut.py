"""EntropyCut (Zhou et al. 2026; the PreSTO paper's sec 5 and D.1): PowerMH whose cut law favours
positions where p0's entropy jumps, made irreducible by a uniform share (`core/cutlaw.py`), with the
reverse-move term in its MH ratio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from presto_tui.runtime.core.cutlaw import EntropyJumpCut
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import Group, Limit, Naming, Param, ParamError
from presto_tui.runtime.methods.chain import ChainMethod
from presto_tui.runtime.methods.powermh import PowerMHFamily


@dataclass(frozen=True)
class EntropyCutFamily(PowerMHFamily):
    """PowerMH with EntropyCut's state-dependent cut law and its reverse-move term."""

    name: ClassVar[str] = "entropycut"


class EntropyCut(ChainMethod):
    name = "entropycut"
    order = 20
    display = "EntropyCut"
    help = "cuts where p0's entropy jumps"
    paper = "Zhou et al. 2026; the PreSTO paper, sec 5 and D.1"
    params = (
        Param("beta", float, 4.0, "EntropyCut: exponent of the entropy-jump cut law", Group.OWN, "beta (EntropyCut)",
              limit=Limit(0, 64), symbol="β"),
        Param("cut_mix", float, 0.1, "EntropyCut: share of cuts drawn uniformly over every position; > 0 lets the "
              "chain resample the first token (the published law, 0, never does)", Group.OWN, "cut_mix (EntropyCut)",
              limit=Limit(0, 1), symbol="mix"),
    )

    def check(self, params: SamplerParams, naming: Naming) -> None:
        if params.block < 2:
            raise ParamError.about("block_size", "{sampler} entropycut needs {block_size} >= 2 (it cuts between "
                                   "tokens)", naming=naming)

    def family(self, params: SamplerParams) -> EntropyCutFamily:
        return EntropyCutFamily(params.alpha, params.proposal_tau, params.epsilon,
                                EntropyJumpCut(params.beta, params.cut_mix))


METHOD = EntropyCut()
