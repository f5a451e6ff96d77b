"""The one owner of request state (as in vLLM's scheduler: one enum, changed in one class).

A `Group` holds the requests of one `Want` (MultiTryMH: one per candidate).  Its
state is a `RequestState`, distinct from the statuses of a recorded tree's
nodes, and only `RequestBook` changes it: planned -> live when the engine took
its first request, -> finished when every candidate finished, -> aborted when
every candidate was aborted; an aborted group wanted again is planned anew.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.prefetch.stream.decisions import Want


class RequestState(Enum):
    PLANNED = "planned"
    LIVE = "live"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(eq=False)
class Group:
    want: Want
    requests: tuple[Request, ...]
    id: int  # session-unique, for events and traces
    state: RequestState = RequestState.PLANNED
    handles: list[int | None] = field(default_factory=list)
    proposals: list[Proposal | None] = field(default_factory=list)
    selected: int | None = None  # MultiTryMH's J, drawn once when all candidates have finished
    decoded: list[int] = field(default_factory=list)  # per candidate: tokens decoded before an abort

    @property
    def finished(self) -> bool:
        return self.state is RequestState.FINISHED

    @property
    def live(self) -> bool:
        return self.state is RequestState.LIVE

    @property
    def wanting(self) -> bool:
        """Nothing computes it (planned, or aborted and wanted again)."""
        return self.state is RequestState.PLANNED or self.state is RequestState.ABORTED

    @property
    def size(self) -> int:
        return len(self.requests)


class RequestBook:
    """Groups by want, their state, and how many requests are live."""

    def __init__(self, ids: Callable[[], int] | None = None):
        self.groups: dict[Want, Group] = {}
        self._ids = ids or itertools.count().__next__
        self.live = 0  # requests live
        self.finished = 0  # groups finished so far (each adds a branch to the speculation tree)

    def get(self, want: Want) -> Group | None:
        return self.groups.get(want)

    def plan(self, want: Want, requests: Callable[[Want], tuple[Request, ...]]) -> Group:
        """The group of `want`, created (planned) if new; an aborted one is planned again."""
        g = self.groups.get(want)
        if g is None:
            reqs = requests(want)
            g = self.groups[want] = Group(want, reqs, self._ids(), handles=[None] * len(reqs),
                                          proposals=[None] * len(reqs), decoded=[0] * len(reqs))
        elif g.state is RequestState.ABORTED:
            g.state, g.proposals, g.decoded = RequestState.PLANNED, [None] * g.size, [0] * g.size
        return g

    def adopt(self, g: Group) -> None:
        """A group this block did not plan (its own extension) whose live requests count in `live`; it is
        nobody's want here, so no pass ranks or aborts it."""
        self.live += sum(h is not None for h in g.handles)

    def issued(self, g: Group, j: int, handle: int) -> bool:
        """The engine took candidate j; True for the group's first request."""
        first = g.state is RequestState.PLANNED
        g.handles[j] = handle
        g.state = RequestState.LIVE
        self.live += 1
        return first

    def delivered(self, g: Group, j: int, proposal: Proposal) -> bool:
        """Candidate j finished; True when the whole group has."""
        g.proposals[j], g.handles[j] = proposal, None
        self.live -= 1
        if all(p is not None for p in g.proposals):
            g.state = RequestState.FINISHED
            self.finished += 1
            return True
        return False

    def aborted(self, g: Group, j: int, decoded: int) -> bool:
        """Candidate j was aborted after `decoded` tokens; True when no candidate is left live."""
        if g.handles[j] is not None:
            self.live -= 1
        g.handles[j] = None
        g.decoded[j] = decoded
        if all(h is None for h in g.handles):
            g.state = RequestState.ABORTED
            return True
        return False

    def live_groups(self) -> Iterable[Group]:
        return (g for g in self.groups.values() if g.state is RequestState.LIVE)

    def forget(self, before: int) -> None:
        """Drop groups of decisions before `before` that nothing computes any more."""
        for want in [w for w, g in self.groups.items() if w.d < before and g.state is not RequestState.LIVE]:
            del self.groups[want]
