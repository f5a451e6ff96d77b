"""What to keep live: speculation policies over the speculation tree (one protocol, several policies).

A policy answers one question per scheduling pass, as a frozen `Plan` (wants
to submit, live groups to abort, wants it saw and refused, and why): it reads
a block (`BlockView`) and changes nothing of it: the block applies the plan
(`StreamBlock.plan`), the engine loop carries it out.  Two policies:

- `FillPolicy(N)`: keep the N requests most likely to be needed live (the
  best-first order of the speculation tree), whatever they cost.
- `CostPolicy(cap, cost)`: keep a request live only while its predicted chance
  of being used pays for what it adds to every other request's engine step.
  With a step costing a + b n for n live requests (learned online by the
  engine loop), the requests most likely to be needed, of reaches
  r_1 >= r_2 >= ..., make expected useful tokens per second
  (r_1 + ... + r_m) / (a + b n); one more request of reach r pays iff
  r (a + b n) > b (r_1 + ... + r_m).  On a CPU (b/a about 0.05) that keeps
  few requests live; on a GPU (b/a near 0) it goes wide, up to `cap`.

Both abort, in every pass, the live requests no state the walker can still
reach would ask for; `CostPolicy` also aborts a speculative request whose reach
has fallen far below what a new request must bring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook
from presto_tui.runtime.prefetch.stream.speculation import SpeculationTree
from presto_tui.runtime.prefetch.stream.walker import Walker

# why a want the policy saw was not submitted (the critical path counts how long each waited so)
BUDGET = "budget"  # no slot left under the cap
RANKED = "ranked"  # the cost rule: its reach does not pay for a slot


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

    def reachable(self, want: Want) -> bool: ...


class SpeculationPolicy(Protocol):
    @property
    def cap(self) -> int:
        """The most requests the policy keeps live for one chain."""
        ...

    def plan(self, block: BlockView) -> Plan: ...


# (a, b, n): a step with n live requests costs about a + b n (seconds or engine units); n is
# what the whole engine has live now, every chain's requests included
StepCost = Callable[[], tuple[float, float, int]]


class _Passes:
    """What both policies share: aborts every pass; an expansion only when it can change something.

    A pass expands the speculation tree when at least `refill_at` slots are free (a pass costs
    O(N): above N = 16 refills come in batches of N/16), or the walker's own request is not
    live.  An expansion that found fewer wants than free slots (the tree above MIN_REACH is
    exhausted) is repeated only once `refill_at` more groups have finished (each adds a branch)
    or the walker's state has moved.
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
        mine = book.get(walker.want_at(walker.k))
        covered = mine is not None and (mine.live or mine.finished)
        if self._exhausted_state is not walker.state:
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

    @staticmethod
    def _gather(block: BlockView, free: int) -> tuple[dict[Want, float], dict[Want, Group | None], int]:
        """Summed reach of every want seen, best first, until `free` + 1 new ones were seen."""
        wanted: dict[Want, float] = {}
        groups: dict[Want, Group | None] = {}
        fresh = 0  # wants seen that nothing computes yet
        for want, reach, g in block.tree.wants():
            seen = wanted.get(want)
            if seen is None:
                fresh += g is None or g.wanting
                groups[want] = g
            wanted[want] = reach if seen is None else seen + reach
            if fresh > free:
                break
        return wanted, groups, fresh


Choice = tuple[list[Want], list[Group], list[tuple[Want, str]], bool]


class FillPolicy(_Passes):
    """Keep `cap` requests live, the most likely to be needed first (the walker's own always)."""

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        free = self.cap - live
        own = block.walker.want_at(block.walker.k)
        if free <= 0:  # no slot to fill: only the walker's own want may go over the budget
            return ([own] if mine is None or mine.wanting else []), [], [], False
        wanted, groups, fresh = self._gather(block, free)
        size = block.decisions.family.requests_per_decision
        width = lambda want: 1 if want.d >= block.decisions.K else size  # the requests a want makes
        out: list[Want] = []
        refused: list[tuple[Want, str]] = []
        if mine is None or mine.wanting:  # first, and even over budget: the walker waits for it (a deeper
            out.append(own)  # want summed over many nodes can outrank its reach of 1 by rounding)
            live += width(own)
        for want, _ in sorted(wanted.items(), key=lambda kv: -kv[1]):
            g = groups[want]
            if want == own or (g is not None and not g.wanting):
                continue
            if live + width(want) > self.cap:
                refused.append((want, BUDGET))
                continue
            out.append(want)
            live += width(want)
        return out, [], refused, fresh <= free


class CostPolicy(_Passes):
    """Keep a request live only while its reach pays for its share of every step (module docstring)."""

    ABORT_BELOW = 0.25  # abort a speculative request below this share of the admission threshold

    def __init__(self, cap: int, cost: StepCost):
        super().__init__(cap)
        self.cost = cost

    def choose(self, block: BlockView, live: int, mine: Group | None) -> Choice:
        a, b, engine_live = self.cost()
        own = block.walker.want_at(block.walker.k)
        wanted, groups, fresh = self._gather(block, self.cap - live)
        size = block.decisions.family.requests_per_decision
        K = block.decisions.K
        # what is live already (for this chain) and how likely it is to be used
        kept = sum(r for w, r in wanted.items() if (g := groups[w]) is not None and g.live)
        n = max(engine_live, live)
        out: list[Want] = []
        if mine is None or mine.wanting:  # the walker waits for it: always
            out.append(own)
            kept += wanted.get(own, 1.0)
            live += size
            n += size
        refused: list[tuple[Want, str]] = []
        stop = ""  # why admission stopped: every want after it is refused for the same reason
        for want, r in sorted(wanted.items(), key=lambda kv: -kv[1]):
            g = groups[want]
            if want == own or (g is not None and not g.wanting):
                continue
            s = 1 if want.d >= K else size
            if not stop and live + s > self.cap:
                stop = BUDGET
            elif not stop and r * (a + b * n) <= b * s * kept:
                stop = RANKED  # sorted by reach: nothing after it pays either
            if stop:
                refused.append((want, stop))
                continue
            out.append(want)
            kept += r
            live += s
            n += s
        # a speculative request that has become far less likely than what a new one must bring
        threshold = b * kept / (a + b * n) if a + b * n > 0 else 0.0
        aborts = [g for w, r in wanted.items() if (g := groups[w]) is not None and g.live and w != own
                  and r < self.ABORT_BELOW * threshold]
        return out, aborts, refused, fresh <= self.cap - live


def speculation_policy(budget: int, policy: str, cost: StepCost | None) -> SpeculationPolicy:
    """`fill` keeps `budget` requests live; `cost` (the default) keeps what pays, at most `budget`."""
    if policy == "fill" or cost is None:
        return FillPolicy(budget)
    return CostPolicy(budget, cost)
