"""What the app shows, folded from events by one reducer (no Textual here).

Live sessions (the chat worker) and replays (a trace) feed the same
`AppState.apply`, so both draw the same screens from the same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from presto_tui.runtime.events import (
    BlockStart, Event, ModelCall, RoundDone, SessionEnd, SessionError, SessionStart,
)
from presto_tui.runtime.summary import SessionSummary

Pieces = Callable[[Sequence[int]], list[str]]


@dataclass
class SessionView:
    start: SessionStart
    summary: SessionSummary = field(default_factory=SessionSummary)
    events: list[Event] = field(default_factory=list)
    rounds: list[RoundDone] = field(default_factory=list)
    tokens: tuple[int, ...] = ()  # the chain's current state (generated tokens)
    status: str = "running"  # running, done, cancelled, error
    error: str = ""
    extend_s_per_token: float | None = None  # from the single-request extension call

    @property
    def params(self) -> dict:
        return self.start.params

    @property
    def total_steps(self) -> int:
        p = self.params
        return int(p["steps"]) * (int(p["max_new_tokens"]) // int(p["block_size"]))

    def summary_upto(self, round_index: int) -> SessionSummary:
        """The session's numbers as they stood when round `round_index` finished (replay)."""
        out, last = SessionSummary(), -1
        for ev in self.events:
            if last == round_index and isinstance(ev, (ModelCall, RoundDone)):
                break  # the next round has begun
            out.update(ev)
            last += isinstance(ev, RoundDone)
        return out

    def speedup_estimate(self, summary: SessionSummary, upto: int | None = None) -> float | None:
        """Estimated call-time ratio sequential PowerMH / this sampler (eq. 20).

        Sequential PowerMH would make one single-request call per realized
        transition, generating T - c tokens; its cost per token is taken from
        this session's own single-request call (the block extension).
        """
        rounds = self.rounds if upto is None else self.rounds[: upto + 1]
        if not rounds or not self.extend_s_per_token or not summary.call_time_s:
            return None
        tokens = sum(r.tree.T - r.tree.decisions[s.decision].cut for r in rounds for s in r.tree.steps)
        return tokens * self.extend_s_per_token / summary.call_time_s


@dataclass
class AppState:
    sessions: list[SessionView] = field(default_factory=list)

    def apply(self, ev: Event) -> SessionView | None:
        if isinstance(ev, SessionStart):
            self.sessions.append(SessionView(ev))
        if not self.sessions:
            return None
        s = self.sessions[-1]
        s.summary.update(ev)
        s.events.append(ev)
        if isinstance(ev, ModelCall) and ev.purpose == "extend" and ev.tokens:
            s.extend_s_per_token = ev.wall_s / ev.tokens
        elif isinstance(ev, BlockStart):
            s.tokens = s.tokens + tuple(ev.tokens)
        elif isinstance(ev, RoundDone):
            s.rounds.append(ev)
            s.tokens = ev.tree.final_state.tokens
        elif isinstance(ev, SessionEnd):
            s.status, s.tokens = ev.reason, tuple(ev.tokens)
        elif isinstance(ev, SessionError):
            s.status, s.error = "error", ev.message
        return s

    @property
    def current(self) -> SessionView | None:
        return self.sessions[-1] if self.sessions else None

    def all_rounds(self) -> list[tuple[int, int]]:
        """(session index, round index) of every round, in order: the replay timeline."""
        return [(i, j) for i, s in enumerate(self.sessions) for j in range(len(s.rounds))]
