"""pass@k and maj@k from M samples of each item (`--chains M`; the frontier's seeds).

pass@k is the chance that at least one of k samples is right.  From n >= k samples of an item,
c of them right, the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
Trained on Code", eq. 1) is 1 - C(n-c, k) / C(n, k): the share of the k-subsets of the n
samples that hold a right one.  It is computed as their product form, 1 - prod_{i=n-c+1}^{n}
(1 - k/i), which never forms the binomials (C(200, 100) overflows a float).

maj@k is the chance that the majority vote of k samples is right (self-consistency, as
`--vote` grades): the samples grouped by what the grader reads (its `key`), the largest group
wins, ties go to the group whose first sample comes first (`answers.vote`'s rule), and the
group is right when its first sample's grade is.  From n >= k samples it is averaged over
every k-subset (in the samples' order), exactly; where there are more than `MAX_SUBSETS`
subsets it is not estimated (None), except k = n: the vote of them all.

Both are averaged over the items that have at least k samples.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SUBSETS = 20_000  # k-subsets one item's maj@k is averaged over


@dataclass(frozen=True)
class Sample:
    key: str | None  # what the grader reads, in its canonical form (None: no answer)
    correct: bool


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the unbiased estimate of pass@k from n samples, c of them right."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a right sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_right(samples: Sequence[Sample]) -> bool:
    """Whether the vote of `samples` is right: the largest group of equal keys, ties to the one first seen."""
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for i, s in enumerate(samples):
        if s.key is not None:
            first.setdefault(s.key, i)
            counts[s.key] = counts.get(s.key, 0) + 1
    if not counts:
        return False
    winner = min(counts, key=lambda key: (-counts[key], first[key]))
    return samples[first[winner]].correct


def maj_at_k(samples: Sequence[Sample], k: int) -> float | None:
    """The vote of k samples right, averaged over every k-subset of `samples` (None: too many subsets)."""
    n = len(samples)
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n, got n={n}, k={k}")
    if math.comb(n, k) > MAX_SUBSETS:
        return None
    subsets = itertools.combinations(samples, k)  # in the samples' order: ties go as the full vote's would
    return statistics.fmean(float(majority_right(s)) for s in subsets)


def budgets(m: int) -> list[int]:
    """The k reported from m samples: 1, 2, 4, ... below m, and m."""
    out = [1 << i for i in range(m.bit_length()) if (1 << i) < m]
    return [*out, m]


def estimates(per_item: Sequence[Sequence[Sample]], ks: Sequence[int]) -> dict[str, dict[str, float | int | None]]:
    """{"pass": {k: mean pass@k}, "maj": {k: mean maj@k}, "items": {k: items counted}} over the items with at
    least k samples (k as a string: JSON's keys)."""
    out: dict[str, dict[str, float | int | None]] = {"pass": {}, "maj": {}, "items": {}}
    for k in ks:
        have = [s for s in per_item if len(s) >= k]
        passes = [pass_at_k(len(s), sum(x.correct for x in s), k) for s in have]
        majs = [maj_at_k(s, k) for s in have]
        out["pass"][str(k)] = statistics.fmean(passes) if passes else None
        out["maj"][str(k)] = statistics.fmean(m for m in majs if m is not None) \
            if have and all(m is not None for m in majs) else None
        out["items"][str(k)] = len(have)
    return out
