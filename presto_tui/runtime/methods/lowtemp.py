"""Low temperature (the PreSTO paper's appendix E.8): one sample at temperature 1/alpha (`--tau`)."""

from __future__ import annotations

from typing import Any

from presto_tui.runtime.core.method import Cost
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.methods.samples import OneShotMethod, SamplesDriver, samples_cost


class LowTemperature(OneShotMethod):
    name = "lowtemp"
    order = 110
    display = "low temperature"
    help = "one sample at temperature 1/alpha"
    paper = "the PreSTO paper, appendix E.8"

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> SamplesDriver:
        return SamplesDriver(engine, params, prompt_ids, count=1, **kwargs)

    def cost(self, params: SamplerParams) -> Cost:
        return samples_cost(params, 1)


METHOD = LowTemperature()
