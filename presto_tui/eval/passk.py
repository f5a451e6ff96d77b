"""pass@k and maj@k from M samples of each item (`--chains M`; the frontier's seeds).

pass@k is the chance that at least one of k samples is right.  From n >= k samples of an item,
c of them right, the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
Trained on Code", eq. 1) is 1 - C(n-c, k) / C(n, k): the share of the k-subsets of the n
samples that hold a right one.  It is computed as their product form, 1 - prod_{i=n-c+1}^{n}
(1 - k/i), which never forms the binomials (C(200, 100) overflows a float).

maj@k is the chance that the majority vote of k samples is right (self-consistency, as
`--vote` grades): the samples grouped as the grader groups them (its `grouper`: math-verify's
equality for the math grader), the largest group wins, a tie between t groups goes to each
with chance 1/t (so maj@k does not depend on the samples' order, and maj@1 is pass@1), and a
group counts as right by the share of its samples graded right (1 or 0 but where the grader
grades equal answers differently).  From n >= k samples it is the exact mean over every
k-subset, computed from the groups' sizes (a multivariate hypergeometric sum), without
enumerating the subsets.  `--vote` picks one group on a tie (the one first seen), so maj@n
equals its accuracy on the items without a tie.

Both are averaged over the items that have every sample (the largest k's), for every k alike.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Sample:
    key: str | None  # the label of its answer's group, as the grader's `grouper` gives it (None: no answer)
    correct: bool


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the unbiased estimate of pass@k from n samples, c of them right."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset holds a right sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def maj_at_k(samples: Sequence[Sample], k: int) -> float:
    """The vote of k samples right, exactly averaged over every k-subset of `samples`, a tie between t
    groups split 1/t."""
    n = len(samples)
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n, got n={n}, k={k}")
    size: dict[str, int] = {}
    right: dict[str, int] = {}
    for s in samples:
        if s.key is not None:
            size[s.key] = size.get(s.key, 0) + 1
            right[s.key] = right.get(s.key, 0) + s.correct
    blank = n - sum(size.values())  # samples with no answer: in a subset, they vote for nothing
    total = Fraction(0)
    for key, c in size.items():
        if not right[key]:
            continue
        others = [size[o] for o in size if o != key]
        wins = Fraction(0)
        for m in range(1, min(c, k) + 1):  # the group has m of the k: every other group at most m
            ties = _at_most(others, blank, m, k - m)
            wins += math.comb(c, m) * sum(Fraction(w, 1 + t) for t, w in enumerate(ties))
        total += wins * Fraction(right[key], c)
    return float(total / math.comb(n, k))


def _at_most(sizes: list[int], blank: int, m: int, rest: int) -> list[int]:
    """[the ways to draw `rest` samples from groups of `sizes` (none more than m of one) and `blank`
    unanswered ones, with t groups drawn exactly m times, for t = 0, 1, ...]."""
    ways = [[math.comb(blank, s)] for s in range(rest + 1)]  # ways[s][t]: s drawn, t groups at m
    for c in sizes:
        new = [[0] * (len(ways[0]) + 1) for _ in range(rest + 1)]
        for s, row in enumerate(ways):
            for t, w in enumerate(row):
                if not w:
                    continue
                for x in range(min(c, m, rest - s) + 1):
                    new[s + x][t + (x == m)] += w * math.comb(c, x)
        ways = new
    return ways[rest]


def budgets(m: int) -> list[int]:
    """The k reported from m samples: 1, 2, 4, ... below m, and m."""
    out = [1 << i for i in range(m.bit_length()) if (1 << i) < m]
    return [*out, m]


def estimates(per_item: Sequence[Sequence[Sample]], ks: Sequence[int]) -> dict[str, dict[str, float | int | None]]:
    """{"pass": {k: mean pass@k}, "maj": {k: mean maj@k}, "items": {k: items counted}} (k as a string: JSON's
    keys), every k over the same items: those with at least max(ks) samples (an item with fewer, a chain that
    failed, is left out of every column, so the columns compare)."""
    out: dict[str, dict[str, float | int | None]] = {"pass": {}, "maj": {}, "items": {}}
    have = [s for s in per_item if len(s) >= max(ks, default=1)]
    for k in ks:
        passes = [pass_at_k(len(s), sum(x.correct for x in s), k) for s in have]
        majs = [maj_at_k(s, k) for s in have]
        out["pass"][str(k)] = statistics.fmean(passes) if passes else None
        out["maj"][str(k)] = statistics.fmean(majs) if majs else None
        out["items"][str(k)] = len(have)
    return out


def samples(g, prompt: str, responses: Sequence[tuple[str, bool]]) -> list[Sample]:
    """An item's (response, graded right) as samples, grouped by the item's grader `g` (in this order)."""
    label = g.grouper(prompt)
    return [Sample(label(text), correct) for text, correct in responses]
