"""What the app shows, folded from events by one reducer (no Textual here).

Live sessions (the chat worker) and replays (a trace) feed the same
`AppState.apply`, and both take token text from the same kind of table
(`vocab`: the trace's vocab lines, or the worker's `VocabUpdate`s), so both
draw the same screens from the same data.

The timeline runs over positions: an MH session has one per round (epoch), a
session with a view of its own (a one-shot method's samples, particles or
steps: `baseline.py`) one for the whole session, so that replay and chat reach
it like a round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from presto_tui.api.events import (
    Event,
    MemberEvent,
    ModelCall,
    NodeStatus,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
    SessionSummary,
    TableTree,
)
from presto_tui.views.state.baseline import MethodRun, run_of


def unit_name(params: dict) -> str:
    """What one step of a session's timeline is called, everywhere it is shown: an "epoch" for
    the streaming rule (no rounds; the decisions walked from one state, up to the accept that
    moves it), a "round" for every round rule."""
    return "epoch" if params.get("prefetch") == "stream" else "round"


@dataclass
class SessionView:
    start: SessionStart
    summary: SessionSummary = field(default_factory=SessionSummary)
    events: list[Event] = field(default_factory=list)
    rounds: list[RoundDone] = field(default_factory=list)
    # its method's own view of it (`Method.view_state`: a one-shot method's samples, particles or steps);
    # None: an MH chain's rounds and trees
    method_run: MethodRun | None = None
    # a population's members' own chains, by member (from 0), each folded from its `MemberEvent`s as a
    # session of its own (its rounds under every rule); empty for a trace written before schema 1.4
    members: dict[int, SessionView] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method_run is None:
            self.method_run = run_of(self.start.params)

    @property
    def positions(self) -> int:
        """Its places on the timeline: one per round, or one for a session with a view of its own."""
        return 1 if self.method_run is not None else len(self.rounds)

    @property
    def params(self) -> dict:
        return self.start.params

    @property
    def unit(self) -> str:
        return unit_name(self.params)

    @property
    def status(self) -> str:
        return self.summary.status

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


@dataclass
class AppState:
    sessions: list[SessionView] = field(default_factory=list)
    vocab: dict[int, str] = field(default_factory=dict)
    # --chains M: the chain a live view follows among the running prompt's chains (`current`)
    followed: int = 0
    _chain_at: dict[int, int] = field(default_factory=dict)  # the running prompt's chains -> session index
    _current: int = -1
    # a population member's chain opened as a state of its own (`members`): whose it is, as every screen
    # names its session ('replica 2 of 4 (alpha 1.59) of session 1'); empty for a trace's or a chat's sessions
    label: str = ""
    member: tuple[int, int] | None = None  # ... and which: (its population's session, the member), from 0

    def session_name(self, index: int) -> str:
        """Session `index` in short: 'session 2' (a member's chain: its label)."""
        return self.label or f"session {index + 1}"

    def stem(self, index: int) -> str:
        """Session `index` in an export's file name: 's2' (a member's chain: 's2m3', member 3 of session 2)."""
        return f"s{self.member[0] + 1}m{self.member[1] + 1}" if self.member is not None else f"s{index + 1}"

    def session_words(self, index: int) -> str:
        """Session `index` as a screen's title names it: 'session 2 of 3' (a member's chain: its label)."""
        return self.label or f"session {index + 1} of {len(self.sessions)}"

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab.get(i, f"<{i}>") for i in ids]

    def apply(self, ev: Event, chain: int | None = None) -> SessionView | None:
        """Fold `ev` into its session: the last one started, or the running prompt's chain `chain`
        (the events of a prompt's chains interleave)."""
        if isinstance(ev, SessionStart):
            self.sessions.append(SessionView(ev))
            i = len(self.sessions) - 1
            if ev.chain == 0:  # a prompt's first chain: a new group (or a single chain)
                self._chain_at = {}
            self._chain_at[ev.chain] = i
            if ev.chain in (0, self.followed):
                self._current = i
        if not self.sessions:
            return None
        s = self.sessions[self._chain_at.get(chain, -1) if chain is not None else -1]
        if isinstance(ev, MemberEvent):
            member_view(s, ev)
            return s
        fold(s, ev)
        if isinstance(ev, (SessionEnd, SessionError)):  # a member's chain ends with its population at the latest
            for member in s.members.values():  # (a trace cut short by a kill records the population's end only)
                if member.status == "running":
                    fold(member, ev if isinstance(ev, SessionError) else
                         SessionEnd(ev.reason, tuple(member.summary.tokens), ""))
        return s

    @property
    def current(self) -> SessionView | None:
        """The session a live view follows: the last one started (with several chains, the
        followed chain of the last prompt)."""
        return self.sessions[self._current] if self.sessions else None

    @property
    def current_index(self) -> int:
        return self._current

    def index_of(self, session: SessionView) -> int:
        """The index of `session` (this very one: two sessions may hold equal events)."""
        return next(i for i, s in enumerate(self.sessions) if s is session)

    def chains_of(self, index: int) -> list[int]:
        """The session indices of session `index`'s prompt's chains, in chain order (itself alone
        for a single chain)."""
        group = self.sessions[index].start.group
        if not group:
            return [index]
        return sorted((i for i, s in enumerate(self.sessions) if s.start.group == group),
                      key=lambda i: self.sessions[i].start.chain)

    def follow(self, index: int) -> None:
        """Follow session `index`'s chain from now on (and at once, if its prompt is the running one)."""
        self.followed = self.sessions[index].start.chain
        if self._chain_at.get(self.followed) == index:
            self._current = index

    def all_rounds(self) -> list[tuple[int, int]]:
        """(session index, round index) of every timeline position, in order: the replay timeline
        (a baseline session's one position is (session, 0))."""
        return [(i, j) for i, s in enumerate(self.sessions) for j in range(s.positions)]

    def timeline_index(self, cursor: tuple[int, int]) -> int:
        """Position of (session, round) on the timeline, without building it."""
        s, r = cursor
        return sum(v.positions for v in self.sessions[:s]) + r

    def timeline_cursor(self, index: int) -> tuple[int, int] | None:
        """The (session, round) at a timeline position (None outside it)."""
        if index < 0:
            return None
        for s, v in enumerate(self.sessions):
            if index < v.positions:
                return s, index
            index -= v.positions
        return None

    @property
    def total_rounds(self) -> int:
        """Timeline positions: every round, and one per baseline session."""
        return sum(v.positions for v in self.sessions)

    def round_at(self, cursor: tuple[int, int] | None) -> RoundDone | None:
        """The round at a timeline position (None: none, or a baseline session's position)."""
        if cursor is None:
            return None
        s, r = cursor
        rounds = self.sessions[s].rounds
        return rounds[r] if 0 <= r < len(rounds) else None


def fold(s: SessionView, ev: Event) -> None:
    """Fold one of session `s`'s own events into it."""
    s.summary.update(ev)
    s.events.append(ev)
    if s.method_run is not None:
        s.method_run.apply(ev)
    if isinstance(ev, RoundDone):
        s.rounds.append(ev)
    elif isinstance(ev, (SessionEnd, SessionError)) and s.rounds:
        s.rounds[-1] = ended(s.rounds[-1])


def member_view(s: SessionView, ev: MemberEvent) -> None:
    """Fold a population member's event into its own session view (made by its `SessionStart`; an event of a
    member whose start is not there, a trace cut or damaged before it, is dropped)."""
    inner = ev.event
    if isinstance(inner, SessionStart):
        s.members[ev.member] = SessionView(inner)
    member = s.members.get(ev.member)
    if member is not None:
        fold(member, inner)


def ended(rd: RoundDone) -> RoundDone:
    """A session's last round as its end left it.

    A streaming epoch is recorded with the requests still decoding at that moment.  Once the
    session has ended (done, cancelled or failed) none of them is decoding any more: the end
    aborted what was left (a cancel or a failure without an event per request), so they show as
    aborted, with what they had decoded ("aborted at 77/92"), not as "decoding 77/92" for ever.
    Earlier epochs stay as recorded: what was live in them went on after they closed."""
    tree = rd.tree
    if not isinstance(tree, TableTree) or all(rec.status != NodeStatus.LIVE for rec in tree.table.values()):
        return rd
    table = {i: replace(rec, status=NodeStatus.ABORTED) if rec.status == NodeStatus.LIVE else rec
             for i, rec in tree.table.items()}
    return replace(rd, tree=replace(tree, table=table))
