"""A session's chain at a glance, one column per round or epoch (pure): the overview's data.

Columns are folded from the session's events once, and extended as a live
session's rounds arrive.  The cumulative rates are SessionSummary's own
(`transitions_per_call`, or `transitions_per_s` for streaming sessions, which
make no calls), folded event by event, so the overview, the stats panel and
`presto-tui stats` agree on every number.

A round's own rate is its transitions over its calls.  An epoch has no call,
and its own span is no time to divide by: several decisions walked in one
engine step close epochs that last (almost) no time at all, which would plot
thousands of transitions a second.  An epoch's rate is instead the
transitions walked in a window of fixed engine time that ends with it, over
the window's length (`window_rates`): epochs that end in the same engine step
show the same rate.  Engine time is the session's clock from its start
(SessionSummary's `wall_s`, block extensions included), and each walked decision
is placed in it by its own clock.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass

from presto_tui.api.events import DecisionWalked, ModelCall, RoundDone, SessionSummary
from presto_tui.views.state.reducer import SessionView

WINDOWS = 10  # an epoch rate's window: about this fraction of the session's engine time, on a 1-2-5 scale


@dataclass(frozen=True)
class Column:
    round: int  # index within the session
    classes: tuple[str, ...]  # epsilon class of every walked decision, in order
    accepted: tuple[bool, ...]
    cuts: tuple[int, ...]  # cut of every walked decision
    stop: str  # why the walk stopped: "deferred", "leaf" or "cap" (the block was done)
    rate: float | None  # this round's transitions per call (None for an epoch: see window_rates)
    acceptance: float  # this round's accepted share
    cum_rate: float  # as of this round (SessionSummary)
    cum_acceptance: float
    wall: float = 0.0  # the session's engine time at the end of this one (SessionSummary.wall_s)

    @property
    def transitions(self) -> int:
        return len(self.classes)


def nice_window(span: float, windows: int = WINDOWS) -> float:
    """The smallest of 1, 2, 5 x 10^k seconds that is at least span / windows (0 for no span)."""
    if not span > 0 or not math.isfinite(span):
        return 0.0
    target = span / windows
    base = 10.0 ** math.floor(math.log10(target))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= target * (1 - 1e-9))


class ChainSeries:
    def __init__(self, session: SessionView) -> None:
        self.session = session
        self.columns: list[Column] = []
        self.cut_counts: Counter[int] = Counter()  # walked decisions per cut position, whole session
        self.horizon = 1  # largest T seen: the cut strip's width in tokens
        self.walked_at: list[float] = []  # engine time (wall) of every walked decision, in order
        self._summary = SessionSummary()
        self._seen = 0
        self._calls = 0  # proposal calls since the last round
        self._walked: list[float] = []  # clocks of the decisions walked since the last epoch

    @property
    def per_second(self) -> bool:
        """Streaming sessions have no calls: their rate is transitions per second of engine time."""
        return self._summary.calls == 0 and bool(self.columns)

    @property
    def rate_name(self) -> str:
        return "transitions/s" if self.per_second else "transitions/call"

    @property
    def window_s(self) -> float:
        """The length of an epoch rate's window of engine time (grows with a live session)."""
        return nice_window(self._summary.wall_s)

    def rates(self) -> list[float]:
        """Each column's own rate: a round's per call, an epoch's over the window that ends with it."""
        return self.window_rates() if self.per_second else [c.rate or 0.0 for c in self.columns]

    def window_rates(self) -> list[float]:
        """Per column, the transitions walked in the `window_s` of engine time up to its end, over
        that window (over the time so far while the session is younger than one window)."""
        w = self.window_s
        if not w:
            return [0.0] * len(self.columns)
        times = self.walked_at
        out = []
        for c in self.columns:
            hi = bisect.bisect_right(times, c.wall)
            lo = bisect.bisect_right(times, c.wall - w)
            span = min(w, c.wall)
            out.append((hi - lo) / span if span > 0 else 0.0)
        return out

    def update(self) -> bool:
        """Fold the events that arrived since the last update; True if there are new columns."""
        events = self.session.events
        before = len(self.columns)
        for ev in events[self._seen:]:
            self._summary.update(ev)
            if isinstance(ev, ModelCall) and ev.purpose == "propose":
                self._calls += 1
            elif isinstance(ev, DecisionWalked):
                self._walked.append(ev.clock)
            elif isinstance(ev, RoundDone):
                self._column(ev)
        self._seen = len(events)
        return len(self.columns) > before

    def _place(self, ev: RoundDone, n: int) -> None:
        """Engine time of the round's walked decisions: each by its own clock within the epoch
        (streaming), else all at the round's end (a round's decisions are walked after its call)."""
        end = self._summary.wall_s
        start = end - ev.call_wall_s
        if ev.clock is not None and len(self._walked) == n:
            t0 = ev.clock - ev.call_wall_s
            self.walked_at.extend(min(end, max(start, start + c - t0)) for c in self._walked)
        else:
            self.walked_at.extend([end] * n)
        self._walked = []

    def _column(self, ev: RoundDone) -> None:
        tree, m = ev.tree, self._summary
        classes = tuple(tree.scores[(s.decision, s.src)].eps_class for s in tree.steps)
        accepted = tuple(s.accepted for s in tree.steps)
        cuts = tuple(tree.decisions[s.decision].cut for s in tree.steps)
        n = len(classes)
        self._place(ev, n)
        if self._calls:
            rate, cum = n / self._calls, m.transitions_per_call
        else:  # an epoch: its rate comes from a window of engine time (window_rates)
            rate, cum = None, m.transitions_per_s
        self.columns.append(Column(len(self.columns), classes, accepted, cuts, tree.stop_reason, rate,
                                   sum(accepted) / n if n else 0.0, cum, m.acceptance_rate, m.wall_s))
        self.cut_counts.update(cuts)
        self.horizon = max(self.horizon, tree.T)
        self._calls = 0
