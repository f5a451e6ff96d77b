"""How far an empirical law of responses is from an exact one: total variation with its noise.

The frontier (`eval --frontier`) and the law-test kit (`presto_tui.testing`) read a method's
distance to pi_alpha with these: the bootstrap's bias-corrected TV with its interval, and the
level an exact sampler's S draws would show (the noise floor).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 2000  # bootstrap replicates of a distance
FLOOR_DRAWS = 200  # exact samplers whose distance makes the floor
FLOOR_BOOTSTRAP = 200  # bootstrap replicates of each


def _support_tv(counts: np.ndarray, probs: np.ndarray, rest: float) -> np.ndarray:
    """TV between count rows (over the support of an empirical law) and pi_alpha, whose mass outside
    that support is `rest`: 0.5 (sum over the support of |c/S - pi| + rest)."""
    S = counts.sum(axis=-1, keepdims=True)
    return 0.5 * (np.abs(counts / S - probs).sum(axis=-1) + rest)


@dataclass(frozen=True)
class Distance:
    """How far a point's answers are from pi_alpha, averaged over prompts."""

    tv: float  # the bootstrap's bias-corrected estimate of the distance of the method's law
    low: float  # its 95% basic bootstrap interval
    high: float
    plugin: float  # the empirical law's own distance (biased upward by the finite draws)


def distance(laws: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator,
             reps: int = BOOTSTRAP) -> Distance:
    """`laws`: per prompt, (the responses' counts, pi_alpha) over every response.

    The empirical law of S draws is some way from any law, pi_alpha itself included, so its
    distance (the plug-in) overstates the method's: by more the more spread the law, so unevenly
    across methods.  The bootstrap draws each prompt's S sessions again with replacement (its
    counts multinomial with the empirical law) and reads that bias off the replicates (their
    mean minus the plug-in): the estimate is the plug-in less that bias, the interval the basic
    one (2 plug-in less the replicates' 97.5% and 2.5% quantiles), both clipped at 0."""
    point, boot = [], np.zeros(reps)
    for counts, probs in laws:
        seen = np.flatnonzero(counts)  # a replicate never leaves the empirical law's support
        c, p = counts[seen].astype(float), probs[seen]
        rest = max(0.0, 1.0 - float(p.sum()))
        S = int(c.sum())
        point.append(float(_support_tv(c, p, rest)))
        boot += _support_tv(rng.multinomial(S, c / S, size=reps).astype(float), p, rest)
    boot /= len(laws)
    plugin = statistics.fmean(point)
    return Distance(max(0.0, 2 * plugin - float(boot.mean())), max(0.0, 2 * plugin - float(np.quantile(boot, 0.975))),
                    max(0.0, 2 * plugin - float(np.quantile(boot, 0.025))), plugin)


def exact_floor(probs: np.ndarray, S: int, rng: np.random.Generator, reps: int = FLOOR_DRAWS,
                inner: int = FLOOR_BOOTSTRAP) -> float:
    """The mean estimated distance (`distance`) of S exact draws from `probs`: what the finite draws
    leave in any point's estimate, the level at which an exact sampler would sit."""
    return statistics.fmean(distance([(rng.multinomial(S, probs), probs)], rng, inner).tv for _ in range(reps))
