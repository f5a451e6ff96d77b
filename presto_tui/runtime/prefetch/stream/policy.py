"""What to keep live: speculation policies over the speculation tree (one protocol, three policies).

A policy answers one question per scheduling pass, as a frozen `Plan` (wants
to submit, live groups to abort, wants it saw and refused, and why): it reads
a block (`BlockView`) and changes nothing of it: the block applies the plan
(`StreamBlock.plan`), the engine loop carries it out.  Each keeps the N wants
of largest reach live (the best-first order of the speculation tree, the
walker's own always):

- `SharedPolicy(cap, load, market)` (the default): N what the engine's shared
  budget gives the chain (`shared.py`: the requests of largest reach across
  every chain on the engine, as many as its load makes worth their width, and
  each worth its width), at most `cap`.
- `FillPolicy(N)`: N fixed, whatever the width costs.
- `CostPolicy(cap, cost)`: N the width at which the chain's critical path is
  shortest on this engine.  A step with n live requests costs a + b n (learned
  online by the engine loop).  Wider, every
  step on the path is slower; narrower, more of the path waits for proposals
  issued late.  With the path's decode steps S and those waits falling as
  C / N (each slot more takes its share of them), the path takes about
  (a + b N)(S + C / N), least at N = sqrt((C / S) a / b): the learned width
  `sqrt(KAPPA a / b)`, at most `cap`.  KAPPA = C / S is what makes this the
  best fixed width of the synthetic engine's chains at a CPU's cost and a
  GPU's alike (about 16 at b/a = 0.05, the cap of 64 at 0.004), on the
  shipped prompts and on others: about 16.  On a CPU (b/a about 0.05) that
  is about 18 live requests; on a GPU (b/a near 0) the cap.  With m chains
  on one engine every request slows all m paths: (a + b m N)(S + C / N) is
  least at N = sqrt(KAPPA a / (b m)).

All abort, in every pass, the live requests no state the walker can still
reach would ask for (an abort throws away what was decoded: a used request
aborted and issued again is the critical path's `reissued`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook
from presto_tui.runtime.prefetch.stream.shared import FREE, Load, best_width, clearing_price
from presto_tui.runtime.prefetch.stream.speculation import SpeculationTree
from presto_tui.runtime.prefetch.stream.walker import Walker

# why a want the policy saw was not submitted (the critical path counts how long each waited so)
BUDGET = "budget"  # no slot left under the cap
RANKED = "ranked"  # the cost policy's learned width (below its cap) left it out: others ranked above it


@dataclass(frozen=True)
class Plan:
    """One scheduling pass's answer: wants to submit (best first), live groups to abort, and the wants
    it saw and did not submit, with why (`BUDGET` or `RANKED`); `expanded`: it looked at the tree."""

    submit: tuple[Want, ...] = ()
    abort: tuple[Group, ...] = ()
    refused: tuple[tuple[Want, str], ...] = ()
    expanded: bool = False


class BlockView(Protocol):
    """What a policy reads of a block (`StreamBlock`); it changes none of it."""

    @property
    def book(self) -> RequestBook: ...

    @property
    def walker(self) -> Walker: ...

    @property
    def tree(self) -> SpeculationTree: ...

    @property
    def decisions(self) -> Decisions: ...

    @property
    def growing(self) -> bool:
        """The tree can change with every engine step (it follows tokens still decoding)."""
        ...

    def reachable(self, want: Want) -> bool: ...


class SpeculationPolicy(Protocol):
    @property
    def cap(self) -> int:
        """The most requests the policy keeps live for one chain."""
        ...

    def plan(self, block: BlockView) -> Plan: ...




# what the engine's steps cost and how many chains share them now (the engine loop's)
LoadOf = Callable[[], Load]


class _Passes:
    """What both policies share: aborts every pass; an expansion only when it can change something.

    A pass expands the speculation tree when at least `refill_at` slots are free (a pass costs
    O(N): above N = 16 refills come in batches of N/16), or the walker's own request is not
    live.  An expansion that found fewer wants than free slots (the tree above MIN_REACH is
    exhausted) is repeated only once `refill_at` more groups have finished (each adds a branch)
    or the walker's state has moved; a tree that follows tokens still decoding (`growing`) may
    hold new wants after any step.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.refill_at = max(1, cap // 16)
        self._exhausted_at: int | None = None
        self._exhausted_state: object = None

    def plan(self, block: BlockView) -> Plan:
        book, walker = block.book, block.walker
        aborts = [g for g in book.live_groups() if not block.reachable(g.want)]
        live = book.live - sum(sum(h is not None for h in g.handles) for g in aborts)
        own = walker.own()  # None: the walker waits for its block's extension first
        mine = book.get(own) if own is not None else None
        covered = own is None or (mine is not None and (mine.live or mine.finished))
        if self._exhausted_state is not walker.state or block.growing:  # (a growing tree: new wants any step)
            self._exhausted_at = None
        exhausted = self._exhausted_at is not None and book.finished - self._exhausted_at < self.refill_at
        if covered and (self.cap - live < self.refill_at or exhausted):
            return Plan((), tuple(aborts))
        ranked, more_aborts, refused, exhausted_now = self.choose(block, live, mine)
        if exhausted_now:
            self._exhausted_at, self._exhausted_state = book.finished, walker.state
        else:
            self._exhausted_at = None
        return Plan(tuple(ranked), tuple(aborts) + tuple(g for g in more_aborts if g not in aborts), tuple(refused),
                    expanded=True)

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        """(wants to submit, best first; live groups to abort; wants refused and why; the tree is exhausted)."""
        raise NotImplementedError


    def _gather(self, block: BlockView, free: int, below: float = 0.0
                ) -> tuple[dict[Want, float], dict[Want, Group | None], int]:
        """Summed reach of every want seen, best first, until `free` + 1 new ones were seen, and as many
        again as the budget holds: the runners-up, refused for want of a slot (what a wider budget would
        have taken: the critical path's `budget`, and what the cost policy learns its width from)."""
        wanted: dict[Want, float] = {}
        groups: dict[Want, Group | None] = {}
        fresh = 0  # wants seen that nothing computes yet
        for want, reach, g in block.tree.wants():
            seen = wanted.get(want)
            if seen is None:
                fresh += g is None or g.wanting
                groups[want] = g
            wanted[want] = reach if seen is None else seen + reach
            if fresh > max(0, free) + self.cap or reach < below:
                break
        return wanted, groups, fresh


Choice = tuple[list[Want], list[Group], list[tuple[Want, str]], bool]


class FillPolicy(_Passes):
    """Keep `cap` requests live, the most likely to be needed first (the walker's own always)."""

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        free = self.cap - live
        own = block.walker.own()
        if free <= 0:  # no slot to fill: only the walker's own want may go over the budget
            needed = own is not None and (mine is None or mine.wanting)
            return ([own] if own is not None and needed else []), [], [], False
        wanted, groups, fresh = self._gather(block, free)
        out, refused = self.fill(block, live, mine, wanted, groups)
        return out, [], refused, fresh <= free

    def fill(self, block: BlockView, live: int, mine: Group | None, wanted: dict[Want, float],
             groups: dict[Want, Group | None], why: Callable[[int, float], str] = lambda *_: BUDGET
             ) -> tuple[list[Want], list[tuple[Want, str]]]:
        """The walker's own want if nothing computes it, then the wants nothing computes by decreasing
        reach while `cap` holds them; the others refused, each for `why(its rank, its reach)` (its rank:
        its place among the wants seen, the walker's own left out, best first)."""
        own = block.walker.own()
        needed = own is not None and (mine is None or mine.wanting)
        size = block.decisions.family.requests_per_decision
        width = lambda want: 1 if want.d >= block.decisions.K else size  # the requests a want makes
        out: list[Want] = []
        refused: list[tuple[Want, str]] = []
        if own is not None and needed:  # first, even over budget: the walker waits for it (a deeper
            out.append(own)  # want summed over many nodes can outrank its reach of 1 by rounding)
            live += width(own)
        rank = 0
        for want, reach in sorted(wanted.items(), key=lambda kv: -kv[1]):
            g = groups[want]
            if want == own:
                continue
            rank += 1
            if g is not None and not g.wanting:
                continue
            if live + width(want) > self.cap:
                refused.append((want, why(rank - 1, reach)))
                continue
            out.append(want)
            live += width(want)
        return out, refused


class CostPolicy(FillPolicy):
    """The N requests most likely to be needed live, N the width at which the chain's critical path is
    shortest on the engine's learned step cost (module docstring), never beyond `cap`."""

    KAPPA = 16.0  # C / S: the waits one budget slot takes off the path, over its decode steps (module docstring)

    def __init__(self, cap: int, load: LoadOf):
        super().__init__(cap)
        self.limit = cap
        self.load = load

    def width(self) -> int:
        """The width that makes the critical path shortest (module docstring); with m chains on the
        engine each request live slows every chain's path, and each chain keeps 1 / sqrt(m) as many."""
        load = self.load()
        width = (self.KAPPA * load.a / (load.b * max(1, load.chains))) ** 0.5 if load.b > 0 else float(self.limit)
        return max(1, min(self.limit, round(width)))

    def plan(self, block: BlockView) -> Plan:
        self.cap = self.width()
        self.refill_at = max(1, self.cap // 16)
        return super().plan(block)

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        out, aborts, refused, exhausted = super().choose(block, live, mine)
        if self.cap < self.limit:  # below the cap: the wants it left out were worth less than the width costs
            refused = [(w, RANKED) for w, _ in refused]
        return out, aborts, refused, exhausted


# A chain's side of the engine's shared budget (shared.py): it offers the reaches of the requests it would
# keep (None: as it last offered) and learns the price, the reach a speculative request needs for a slot.
Market = Callable[[Sequence[float] | None], float]


class SharedPolicy(FillPolicy):
    """The walker's own want, and the wants whose reach buys a slot of the engine's shared budget
    (`shared.SharedBudget`: the requests of largest reach across every chain on the engine, as many as
    the engine's load makes worth their width, none below its worth), never beyond `cap`.  Alone on
    the engine it is allowed what `CostPolicy` keeps; with C chains the engine holds about
    sqrt(8 a C / slot) in all, the likeliest first whichever chain they serve, and at saturation
    every chain only its own want.

    A want it sees and refuses waited for the others' requests (`BUDGET`) if the chain alone on the
    engine would have kept it, else for its reach (`RANKED`; `BUDGET` where `cap` is what bound)."""

    def __init__(self, cap: int, load: LoadOf, market: Market):
        super().__init__(cap)
        self.limit = cap
        self.load = load
        self.market = market
        self.alone = cap  # the width the chain would keep alone on the engine
        self._offered: tuple[float, ...] = ()  # per request, best first: what it last offered

    def _share(self, price: float) -> int:
        """Requests the chain may keep live at `price`: its own, and every one it offered at or above it."""
        return max(1, min(self.limit, 1 + sum(r >= price for r in self._offered)))

    def plan(self, block: BlockView) -> Plan:
        load = self.load()
        self.alone, fair = (self.limit if w == FREE else max(1, min(self.limit, round(w)))
                            for w in (best_width(load, 1), best_width(load)))
        price = self.market(None)
        # whether to look at the tree this pass: up to its share at the price, and up to its even share of
        # the engine (what it offered may be out of date: wants finish, the walker moves, the tree grows);
        # at no price (slots left over) up to what it would keep alone
        self.cap = self.alone if price <= 0 else max(self._share(price), fair)
        self.refill_at = max(1, self.cap // 16)
        return super().plan(block)

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        own = block.walker.own()
        free = self.cap - live
        # a want seen below a quarter of the price will not get a slot: the tree is not looked at past it
        wanted, groups, fresh = self._gather(block, free, self.market(None) / 4)
        size = block.decisions.family.requests_per_decision
        offered: list[float] = []  # what it would keep alone beyond its own, per request (a group's reach
        for want, reach in sorted(wanted.items(), key=lambda kv: -kv[1]):  # split over its candidates)
            g = groups[want]
            if want == own or (g is not None and g.finished):
                continue
            n = 1 if want.d >= block.decisions.K else size
            offered += [reach / n] * n
            if len(offered) >= self.alone - 1:
                break
        self._offered = tuple(offered[: self.alone - 1])
        self.cap = self._share(self.market(self._offered))
        self.refill_at = max(1, self.cap // 16)
        load = self.load()
        bar = clearing_price(Load(load.a, load.b, load.p, load.turnover, 1), self._offered)  # alone on the engine

        def why(rank: int, reach: float) -> str:  # alone it would have had a slot: the others' requests hold it
            if rank >= self.limit - 1 or (rank < self.alone - 1 and reach / size >= bar):
                return BUDGET
            return RANKED

        out, refused = self.fill(block, live, mine, wanted, groups, why)
        return out, [], refused, fresh <= max(0, free)


def speculation_policy(budget: int, policy: str, load: LoadOf | None, market: Market | None = None
                       ) -> SpeculationPolicy:
    """`fill` keeps `budget` requests live; `cost` as many as the engine's cost makes best for the chain, at
    most `budget`; `shared` (the default) what the engine's shared budget gives the chain, at most `budget`."""
    if policy == "fill" or load is None:
        return FillPolicy(budget)
    if policy == "cost" or market is None:
        return CostPolicy(budget, load)
    return SharedPolicy(budget, load, market)
