"""Best-of-N (the PreSTO paper's appendix E.8): N samples at temperature tau, the one with the highest
sum of log q_tau kept (its own sampling distribution, the paper's choice), or of log p0 (`--rank`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from presto_tui.runtime.core.method import Axis, Cost
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import Group, Limit, Param
from presto_tui.runtime.methods.samples import OneShotMethod, SamplesDriver, samples_cost

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

    def describe(self, p: Mapping[str, Any]) -> str:
        return f"best-of-{p.get('samples')}" + (", ranked by log p0" if p.get("bon_rank") == "logp" else "")

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> SamplesDriver:
        return SamplesDriver(engine, params, prompt_ids, count=params.samples, rank=params.bon_rank, **kwargs)

    def width(self, params: SamplerParams) -> int:
        return params.samples

    def cost(self, params: SamplerParams) -> Cost:
        return samples_cost(params, params.samples)


METHOD = BestOfN()
