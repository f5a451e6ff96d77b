"""One speculation budget for every chain on an engine, priced by the engine's load.

A chain alone on an engine is fastest with about N = sqrt(KAPPA a / slot) requests live
(`policy.CostPolicy`): wider, every step of its path is slower; narrower, more of its path
waits for proposals issued late.  `slot` is what one more live request adds to every step:
its decode b, and its start p (the prefill of its prefix) spread over its life (`Load`).
With C chains on the engine, every request one of them adds slows all C paths: the
total time of C chains of width N each, C (S + S KAPPA / N)(a + slot C N) with S a path's
decode steps, is least at N = sqrt(KAPPA a / (slot C)), so the engine holds about
M = C N requests, C of them each chain's own (what the walker waits for: what the
sequential chains would hold) and M - C speculative.

Which chains' requests fill those M - C slots is the engine's choice, not each chain's:
a speculative request's value is the probability that its chain's path will need it
(its reach) times the time it saves there, one engine step for every step it decodes
ahead, the same step for every chain on the engine; its cost, the step time it adds to
all of them, is the same whichever chain asked.  So the slots go to the M - C requests
of largest reach across every chain (`SharedBudget.price`: the reach of the last one),
and a chain keeps live its own want and its wants that reach at least that price.  As C
grows, M - C falls to 0 (N to 1) and every chain keeps only its own want: the sequential
chains batched, never less.  On an idle engine (C = 1) it is the cost policy's width.

Each chain offers the reaches of the wants it would keep alone (its best `alone - 1`
beyond its own, every time its policy looks at its speculation tree); the price is
computed over the latest offers of the chains on the engine (a chain that looked at its
tree steps ago offers what it saw then).  Nothing here changes what a chain walks: a
policy only chooses what to issue.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from presto_tui.runtime.prefetch.stream.moves import MoveRates

KAPPA = 8.0  # a path of S decode steps at width N takes about S (1 + KAPPA / N) steps (module docstring)
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
    """The requests per chain that make `chains` chains' paths (default: the load's) shortest in all."""
    c = max(1, load.chains if chains is None else chains)
    return (KAPPA * load.a / (load.slot * c)) ** 0.5 if load.slot > 0 else FREE


class SharedBudget:
    """The engine's speculative slots and the reach they cost (see the module docstring)."""

    def __init__(self, load: Callable[[], Load]):
        self.load = load
        self._offers: dict[Hashable, tuple[float, ...]] = {}  # chain -> its speculative wants' reaches
        self.moves = MoveRates()  # how often decisions move their state, over every chain on the engine

    def offer(self, chain: Hashable, reaches: Sequence[float] | None = None) -> float:
        """Record what `chain` would keep (its speculative wants' reaches; None: as it last offered) and
        return the price: the reach a speculative request needs for a slot now (inf: no slot at all)."""
        if reaches is not None:
            self._offers[chain] = tuple(reaches)
        return self.price()

    def leave(self, chain: Hashable) -> None:
        """`chain` left the engine: its offers free their slots."""
        self._offers.pop(chain, None)

    def price(self) -> float:
        """The reach a speculative request needs for a slot now (`clearing_price` over every chain's offer)."""
        return clearing_price(self.load(), [r for rs in self._offers.values() for r in rs])


def slots(load: Load) -> float:
    """Speculative requests the engine should hold: M - C (see the module docstring)."""
    c = max(1, load.chains)
    width = best_width(load)
    return FREE if width == FREE else max(0.0, c * width - c)


def clearing_price(load: Load, offered: Sequence[float]) -> float:
    """The reach a speculative request needs for one of the `slots` (inf: there are none): that of the
    last of the best offered to fit, and never below its worth (`worth`); its worth alone while fewer
    are offered than there are slots."""
    q = slots(load)
    if q == FREE:
        return 0.0
    n = int(q + 0.5)
    if n <= 0:
        return float("inf")
    best = sorted(offered, reverse=True)[:n]
    last = best[-1] if len(best) == n else 0.0
    return max(last, worth(load, max(1, load.chains) + len(best)))


def worth(load: Load, live: int) -> float:
    """The reach at which a request is worth its width with `live` requests on the engine: its value,
    the step it saves its chain's path when needed (a + slot live), times the probability it is needed,
    against its cost, the step time it adds to every chain (slot for each)."""
    c = max(1, load.chains)
    return load.slot * c / (load.a + load.slot * live)
