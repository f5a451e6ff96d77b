"""A session's chain at a glance, one column per round or epoch (pure): the overview's data.

Columns are folded from the session's events once, and extended as a live
session's rounds arrive.  The cumulative rates are SessionSummary's own
(`transitions_per_call`, or `transitions_per_s` for streaming sessions, which
make no calls), folded event by event, so the overview, the stats panel and
`presto-tui stats` agree on every number.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from presto_tui.runtime.session.events import ModelCall, RoundDone
from presto_tui.runtime.session.summary import SessionSummary
from presto_tui.views.state import SessionView


@dataclass(frozen=True)
class Column:
    round: int  # index within the session
    classes: tuple[str, ...]  # epsilon class of every walked decision, in order
    accepted: tuple[bool, ...]
    cuts: tuple[int, ...]  # cut of every walked decision
    stop: str  # why the walk stopped: "deferred", "leaf" or "cap" (the block was done)
    rate: float  # this round's transitions per call (streaming: per second)
    acceptance: float  # this round's accepted share
    cum_rate: float  # as of this round (SessionSummary)
    cum_acceptance: float

    @property
    def transitions(self) -> int:
        return len(self.classes)


class ChainSeries:
    def __init__(self, session: SessionView) -> None:
        self.session = session
        self.columns: list[Column] = []
        self.cut_counts: Counter[int] = Counter()  # walked decisions per cut position, whole session
        self.horizon = 1  # largest T seen: the cut strip's width in tokens
        self._summary = SessionSummary()
        self._seen = 0
        self._calls = 0  # proposal calls since the last round

    @property
    def per_second(self) -> bool:
        """Streaming sessions have no calls: their rate is transitions per second of engine time."""
        return self._summary.calls == 0 and bool(self.columns)

    @property
    def rate_name(self) -> str:
        return "transitions/s" if self.per_second else "transitions/call"

    def update(self) -> bool:
        """Fold the events that arrived since the last update; True if there are new columns."""
        events = self.session.events
        before = len(self.columns)
        for ev in events[self._seen:]:
            self._summary.update(ev)
            if isinstance(ev, ModelCall) and ev.purpose == "propose":
                self._calls += 1
            elif isinstance(ev, RoundDone):
                self._column(ev)
        self._seen = len(events)
        return len(self.columns) > before

    def _column(self, ev: RoundDone) -> None:
        tree, m = ev.tree, self._summary
        classes = tuple(tree.scores[(s.decision, s.src)].eps_class for s in tree.steps)
        accepted = tuple(s.accepted for s in tree.steps)
        cuts = tuple(tree.decisions[s.decision].cut for s in tree.steps)
        n = len(classes)
        if self._calls:
            rate, cum = n / self._calls, m.transitions_per_call
        else:
            rate, cum = (n / ev.call_wall_s if ev.call_wall_s else 0.0), m.transitions_per_s
        self.columns.append(Column(len(self.columns), classes, accepted, cuts, tree.stop_reason, rate,
                                   sum(accepted) / n if n else 0.0, cum, m.acceptance_rate))
        self.cut_counts.update(cuts)
        self.horizon = max(self.horizon, tree.T)
        self._calls = 0
