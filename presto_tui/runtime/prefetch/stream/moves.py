"""How often a decision moves its chain's state, learned online from the decisions walked (by cut).

The speculation tree branches a proposal that is still decoding (or not issued) with the
probability that the walker will take its accept branch (eq. 14's h+, from the epsilon-class
classifier).  What the tree's reaches need is narrower: whether the decision changes the state's
tokens.  An accepted proposal that reproduces the tokens after its cut (about half of the
accepts, on SmolLM2 and on the synthetic model alike) leaves every later want what it was, as a
reject does.  `MoveRates` keeps, per tenth of the cut's position in the block, how many decisions
were walked and how many moved the state; its rate is a running estimate with the classifier's
h+ as its prior, worth `PRIOR_WEIGHT` decisions.  A chain's rates lean on the rates of every
chain on the engine (`parent`: the same model, and a block of K decisions is short), which lean
on the prior.
"""

from __future__ import annotations

BUCKETS = 10  # by the cut's position in the block: tenths
PRIOR_WEIGHT = 4.0  # the prior (a parent's rate, or h+) counts as this many decisions in each bucket
FLOOR = 0.01  # a rate never reaches 0 or 1: reach must shrink along every path of the tree


class MoveRates:
    def __init__(self, parent: MoveRates | None = None):
        self.parent = parent
        self._walked = [0] * BUCKETS
        self._moved = [0] * BUCKETS
        self._changes = 0

    @staticmethod
    def bucket(fraction: float) -> int:
        return min(BUCKETS - 1, max(0, int(fraction * BUCKETS)))

    def observe(self, fraction: float, moved: bool) -> None:
        """A decision cut at `fraction` of the block was walked; `moved`: it changed the state's tokens."""
        b = self.bucket(fraction)
        self._walked[b] += 1
        self._moved[b] += moved
        self._changes += 1
        if self.parent is not None:
            self.parent.observe(fraction, moved)

    @property
    def version(self) -> int:
        """Changes with every decision observed here or in the parent (a cache of rates is stale then)."""
        return self._changes + (self.parent.version if self.parent is not None else 0)

    def rate(self, fraction: float, prior: float) -> float:
        """The probability that a decision cut at `fraction` of the block moves the state."""
        base = self.parent.rate(fraction, prior) if self.parent is not None else prior
        b = self.bucket(fraction)
        r = (PRIOR_WEIGHT * base + self._moved[b]) / (PRIOR_WEIGHT + self._walked[b])
        return min(1.0 - FLOOR, max(FLOOR, r))
