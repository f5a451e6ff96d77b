"""Best-of-N (the PreSTO paper's appendix E.8): N samples at temperature tau, the one with the highest
sum of log q_tau kept (its own sampling distribution, the paper's choice), or of log p0 (`--rank`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from presto_tui.runtime.core.method import Axis
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import Group, Limit, Param
from presto_tui.runtime.methods.samples import OneShotMethod, Selection, best_by
from presto_tui.runtime.session.events import Sample

BON_RANKS = ("logq", "logp")  # best-of-N keeps the highest sum of log q_tau (the paper's) or of log p0


class BestOfN(OneShotMethod):
    name = "bestofn"
    order = 120
    display = "best-of-N"
    help = "--samples samples at temperature 1/alpha, the most likely kept"
    aliases = ("bon",)
    paper = "the PreSTO paper, appendix E.8"
    axis = Axis("samples", "N")
    params = (
        Param("samples", int, 8, "Best-of-N: samples N, each at temperature tau", Group.OWN, "samples N (best-of-N)",
              limit=Limit(1, 4096, integer=True), symbol="N"),
        Param("bon_rank", str, "logq", "Best-of-N keeps the sample with the highest sum of log q_tau (its own "
              "sampling distribution, the paper's choice) or of log p0", Group.OWN, "rank by (logq/logp) (best-of-N)",
              choices=BON_RANKS, symbol="", flag="--rank", field="rank", metavar="logq|logp"),
    )

    count_param = "samples"

    def describe(self, p: Mapping[str, Any]) -> str:
        return f"best-of-{p.get('samples')}" + (", ranked by log p0" if p.get("bon_rank") == "logp" else "")

    def score_name(self, params: Mapping[str, Any]) -> str:
        return "sum log p0" if params.get("bon_rank") == "logp" else "sum log q"

    def select(self, samples: Sequence[Sample], params: SamplerParams, eos_id: int | None) -> Selection:
        """The sample with the highest sum of log q_tau (the paper's choice) or of log p0 (`--rank logp`)."""
        if len(samples) == 1:
            return super().select(samples, params, eos_id)
        by_p = params.bon_rank == "logp"
        return best_by([s.logp if by_p else s.logq for s in samples],
                       f"highest sum of log {'p0' if by_p else 'q_tau'} of {len(samples)}")


METHOD = BestOfN()
