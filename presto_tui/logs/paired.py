"""Accuracy intervals and the paper's paired equivalence test, from a maintained library (statsmodels).

- `accuracy`: the share of items right with its 95% Wilson score interval (honest at small
  counts and at 0% or 100%, where the normal interval collapses to a point).
- `paired_tost`: eq. 23 of the paper (appendix D.2): the per-item differences d_i of a
  statistic (second method minus first, matched by item and seed), the margin
  delta = 0.2 standard deviations of the statistic across items under the first method,
  and two one-sided paired t-tests of H0: |mean d| >= delta; p_eq is the larger p-value,
  equivalence is declared when p_eq < 0.05, that is when the 90% interval of the mean
  difference lies inside (-delta, delta).  Pairs that are identical in every item (a
  sampler and PreSTO with decision inputs end in the same state token for token) need
  no test, and are reported as such.

statsmodels is imported when a test runs, so commands that need none start without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from presto_tui.errors import InputError

MARGIN_SD = 0.2  # the paper's margin, in standard deviations of the first method's statistic
LEVEL = 0.05  # equivalence when p_eq < LEVEL (the 90% interval inside the margin)


def need_statsmodels() -> None:
    """One line, before any work, when statsmodels is missing."""
    try:
        import statsmodels  # noqa: F401
    except ImportError:
        raise InputError("the paired statistics need statsmodels: pip install 'presto-tui[eval]'") from None


@dataclass(frozen=True)
class Accuracy:
    correct: int
    graded: int
    rate: float | None
    low: float | None  # 95% Wilson interval
    high: float | None


def accuracy(correct: int, graded: int) -> Accuracy:
    if graded == 0:
        return Accuracy(0, 0, None, None, None)
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(correct, graded, alpha=0.05, method="wilson")
    return Accuracy(correct, graded, correct / graded, float(low), float(high))


@dataclass(frozen=True)
class Equivalence:
    statistic: str
    pairs: int
    mean_first: float | None
    mean_second: float | None
    mean_diff: float | None  # second minus first
    sd_first: float | None
    margin: float | None  # delta
    ci_low: float | None  # 90% interval of the mean difference
    ci_high: float | None
    p_eq: float | None
    verdict: str  # "equivalent", "not shown equivalent", "identical", or why no test ran
    undefined: int = 0  # pairs left out: a side's statistic undefined (eqs. 21-22 of an empty response)

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


IDENTICAL = "identical"
EQUIVALENT = "equivalent"
NOT_SHOWN = "not shown equivalent"


def paired_tost(statistic: str, first: Sequence[float], second: Sequence[float], *, identical: bool = False,
                margin_sd: float = MARGIN_SD) -> Equivalence:
    """Eq. 23 on matched pairs (first[i], second[i]); `identical`: every pair's responses are the same tokens."""
    if len(first) != len(second):
        raise ValueError("paired samples differ in length")
    pairs = [(a, b) for a, b in zip(first, second) if math.isfinite(a) and math.isfinite(b)]
    n = len(pairs)
    if len(first) > n:
        return replace(paired_tost(statistic, [a for a, _ in pairs], [b for _, b in pairs], identical=identical,
                                   margin_sd=margin_sd), undefined=len(first) - n)
    if n == 0:
        return Equivalence(statistic, 0, None, None, None, None, None, None, None, None, "no pairs")
    import numpy as np

    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    d = b - a
    mean_a, mean_b, mean_d = float(a.mean()), float(b.mean()), float(d.mean())
    sd_a = float(a.std(ddof=1)) if n > 1 else None
    if identical:
        return Equivalence(statistic, n, mean_a, mean_b, mean_d, sd_a, None, None, None, None, IDENTICAL)
    if n < 3:
        return Equivalence(statistic, n, mean_a, mean_b, mean_d, sd_a, None, None, None, None,
                           f"too few pairs ({n}; the test needs 3 or more)")
    delta = margin_sd * sd_a if sd_a is not None else 0.0
    if not delta > 1e-12 * max(1.0, abs(mean_a)):  # (a spread of rounding errors is no spread)
        return Equivalence(statistic, n, mean_a, mean_b, mean_d, sd_a, delta, None, None, None,
                           "no margin (the first is constant)")
    if float(d.std(ddof=1)) == 0.0:
        # every difference the same: the t statistics are infinite; the interval is that one value
        inside = -delta < mean_d < delta
        return Equivalence(statistic, n, mean_a, mean_b, mean_d, sd_a, delta, mean_d, mean_d, 0.0 if inside else 1.0,
                           EQUIVALENT if inside else NOT_SHOWN)
    from statsmodels.stats.weightstats import DescrStatsW, ttost_paired

    p_eq = float(ttost_paired(b, a, -delta, delta)[0])
    low, high = DescrStatsW(d).tconfint_mean(alpha=2 * LEVEL)
    return Equivalence(statistic, n, mean_a, mean_b, mean_d, sd_a, delta, float(low), float(high), p_eq,
                       EQUIVALENT if p_eq < LEVEL else NOT_SHOWN)
