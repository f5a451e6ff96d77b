"""One speculation budget for every chain on an engine, priced by the engine's load.

What a width costs: a step with n live requests costs about a + slot n, `slot` being what one
more live request adds to every step (its decode b, and its start p, the prefill of its prefix,
spread over its life: `Load`).  A path of S decode steps at width N takes about
S (1 + KAPPA / N) steps (the synthetic engine's chains measured KAPPA = 6.4 at every width from 1
to 64, counting the requests they held live).  With C chains on the engine, every request one of
them adds slows all C paths: C S (1 + KAPPA / N)(a + slot C N) is least at N = sqrt(KAPPA a /
(slot C)), so the engine holds about M = sqrt(KAPPA a C / slot) requests, C of them each chain's
own want (what the walker waits for: what the sequential chains batched would hold) and M - C
speculative.  A chain alone is given what `policy.CostPolicy` gives it, sqrt(ALONE a / slot) with
ALONE = 16: alone, a chain keeps only about half its allowance live (its tree runs out of likely
wants, its walker moves on), so its allowance is wider than its width; and M never falls as
chains join.

Which chains' requests fill those M - C slots is the engine's choice, not each chain's: a
speculative request's value is the probability that its chain's path will need it (its reach)
times the time it saves there, one engine step for every step it decodes ahead, the same step
for every chain on the engine; its cost, the step time it adds to all of them, is the same
whichever chain asked.  So the slots go to the M - C requests of largest reach across every
chain (`clearing_price`: the reach of the last one), never to a request below its worth (reach
x (a + slot m) >= slot x C: the step it saves its path against the step time it adds to every
chain, m the engine's width: `worth`), and a chain keeps live its own want and its wants that
reach at least that price.  As C grows M - C falls to 0 and every chain keeps only its own want:
the sequential chains batched, never less.

Each chain offers the reaches of the wants it would keep alone (its best `alone - 1` beyond its
own, every time its policy looks at its speculation tree); the price is computed over the latest
offers of the chains on the engine (a chain that looked at its tree steps ago offers what it saw
then).  Nothing here changes what a chain walks: a policy only chooses what to issue.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from presto_tui.runtime.prefetch.stream.moves import MoveRates

KAPPA = 8.0  # a path of S decode steps at width N takes about S (1 + KAPPA / N) steps (module docstring)
ALONE = 16.0  # a chain alone is allowed sqrt(ALONE a / slot), as the cost policy's width (module docstring)
FREE = float("inf")  # a slot costs nothing (b and p are 0: a GPU's batch far from full)


@dataclass(frozen=True)
class Load:
    """What the engine's steps cost now and how many chains share them (the engine loop's)."""

    a: float  # fixed cost of a step
    b: float  # cost per live request per step (its decode)
    p: float = 0.0  # cost of a request's start (its prefill), once, in the step that takes it
    turnover: float = 0.0  # requests taken per live request and step (one over a request's mean life)
    chains: int = 1  # chains on the engine now (this one included)

    @property
    def slot(self) -> float:
        """What one more live request adds to every step: its decode, and its start spread over its life."""
        return self.b + self.p * self.turnover


def best_width(load: Load, chains: int | None = None) -> float:
    """The requests per chain that make `chains` chains' paths (default: the load's) shortest in all:
    M / C (module docstring)."""
    c = max(1, load.chains if chains is None else chains)
    return (max(ALONE, KAPPA * c) * load.a / load.slot) ** 0.5 / c if load.slot > 0 else FREE


class SharedBudget:
    """The engine's speculative slots and the reach they cost (see the module docstring)."""

    def __init__(self, load: Callable[[], Load]):
        self.load = load
        self._offers: dict[Hashable, tuple[float, ...]] = {}  # chain -> its speculative wants' reaches, best first
        self._version = 0  # changes with every offer
        self._price: tuple[int, Load, float] | None = None  # (offers' version, load, price): every chain asks
        self.moves = MoveRates()  # how often decisions move their state, over every chain on the engine

    def offer(self, chain: Hashable, reaches: Sequence[float] | None = None) -> float:
        """Record what `chain` would keep (its speculative wants' reaches; None: as it last offered) and
        return the price: the reach a speculative request needs for a slot now (inf: no slot at all)."""
        if reaches is not None:
            self._offers[chain] = tuple(sorted(reaches, reverse=True))
            self._version += 1
        return self.price()

    def leave(self, chain: Hashable) -> None:
        """`chain` left the engine: its offers free their slots."""
        if self._offers.pop(chain, None) is not None:
            self._version += 1

    def price(self) -> float:
        """The reach a speculative request needs for a slot now (`clearing_price` over every chain's offer)."""
        load = self.load()
        cached = self._price
        if cached is None or cached[0] != self._version or cached[1] != load:
            cached = self._price = (self._version, load, clearing_price(load, *self._offers.values()))
        return cached[2]


def slots(load: Load) -> float:
    """Speculative requests the engine should hold: M - C (see the module docstring)."""
    c = max(1, load.chains)
    width = best_width(load)
    return FREE if width == FREE else max(0.0, c * width - c)


def clearing_price(load: Load, *offers: Sequence[float]) -> float:
    """The reach a speculative request needs for one of the `slots` (inf: there are none): that of the
    last of the best offered (each offer best first) to fit, and never below its worth (`worth`); its
    worth alone while fewer are offered than there are slots."""
    q = slots(load)
    if q == FREE:
        return 0.0
    n = int(q + 0.5)
    if n <= 0:
        return float("inf")
    best = list(itertools.islice(heapq.merge(*offers, reverse=True), n))
    last = best[-1] if len(best) == n else 0.0
    return max(last, worth(load, max(1, load.chains) + len(best)))


def worth(load: Load, live: int) -> float:
    """The reach at which a request is worth its width with `live` requests on the engine: its value,
    the step it saves its chain's path when needed (a + slot live), times the probability it is needed,
    against its cost, the step time it adds to every chain (slot for each)."""
    c = max(1, load.chains)
    return load.slot * c / (load.a + load.slot * live)
