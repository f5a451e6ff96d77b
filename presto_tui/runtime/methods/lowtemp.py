"""Low temperature (the PreSTO paper's appendix E.8): one sample at temperature 1/alpha (`--tau`)."""

from __future__ import annotations

from presto_tui.runtime.methods.samples import OneShotMethod


class LowTemperature(OneShotMethod):
    """One sample (no `count_param`), the only one kept: `OneShotMethod`'s session as it is."""

    name = "lowtemp"
    order = 110
    display = "low temperature"
    help = "one sample at temperature 1/alpha"
    paper = "the PreSTO paper, appendix E.8"


METHOD = LowTemperature()
