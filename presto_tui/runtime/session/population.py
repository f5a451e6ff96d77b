"""Several MH chains in one session: a population (tempering's replicas, resample-move's particles) whose
members run on the engine loop as any chain does and meet at barriers, where their states may be replaced.

A `Population` is the session the engine loop sees; each of its members is an MH chain's driver (a
`RoundDriver` or `StreamDriver`, made by the member's own method under the session's prefetch rule).
The population passes every request of every member to the loop and every proposal back to the member
that asked for it, so all members of all sessions share each engine step.  A method says three things:

- its members (`make_members`: their parameters, seeds, decision rules and start states);
- its barriers (`barriers`: the points (block, k) at which every member stops, in order: after k
  transitions of the block, 0 once the block's extension is in, K after its last transition);
- what happens there (`cross`: the members' states in, the states they go on from out, the same object
  where a member's state is unchanged), and at the end (`finish`: the answer, from the members' states).

Exactness: a member waits at its barrier (`Driver.hold`) before it takes the barrier's decision, and
goes on from the state `cross` gives it with the decision's own keyed inputs, so every member is the
sequential chain from the states the barriers hand it, under every prefetch rule, and `cross` sees the
states the sequential population would hold.  A streaming member keeps speculating while it waits;
what it speculated for a state it does not go on from is wasted, never used (its walker uses only the
proposal of the request its own state makes).

The session's own events: a `ModelCall` per phase (everything its members decoded between two barriers,
its engine time: the population's calls are its time, as a one-shot method's), a `BarrierMet` per phase
(when each member arrived at its end and its path through it: the population's critical path, critpath.py),
the method's own events from `cross` and `finish`, and whatever of its members' events the method forwards
(`member_event`).  Every member's events are on the session's clock, and every one a member records
(its rounds or epochs, transitions, requests, blocks, end) is emitted wrapped as a `MemberEvent`, its first
the member's `SessionStart`: each member's chain replays as a session of its own (the app's member
screens open its rounds under every rule), and nothing of the population's own numbers reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from presto_tui import __version__
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import Proposal, Request, SeqState
from presto_tui.runtime.samplers.families import SamplerFamily
from presto_tui.runtime.session.critpath import MemberPaths
from presto_tui.runtime.session.driver import Driver, SessionDriver
from presto_tui.runtime.session.events import (
    TRANSIENT,
    BarrierMet,
    EngineCost,
    Event,
    InFlight,
    MemberEvent,
    ModelCall,
    SessionStart,
)
from presto_tui.runtime.session.summary import SessionSummary

Barrier = tuple[int, int]  # (block, transitions of the block done)
# what a member emits that is not its chain's to record: what it shows in flight (never recorded), and the
# engine's cost, which the population shares with every member and records once as its own
NOT_THE_MEMBERS = (*TRANSIENT, EngineCost)


@dataclass(frozen=True, eq=False)
class MemberTag:
    """A member's request as the loop holds it: which member, and the member's own tag."""

    member: int
    tag: Any  # the member's own (driver.Tag)


class Population(SessionDriver):
    """Members on the loop, barriers between them (see the module docstring).  Subclass it."""

    def __init__(self, engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                 classifier: CertaintyClassifier | None = None, state: SeqState | Sequence[SeqState] | None = None,
                 **chain):
        super().__init__(engine, params, prompt_ids, prompt=prompt, **chain)
        self.classifier = classifier
        self.given = state  # start states given (the law-test kit): one for all members, or one each
        self.members: list[Driver] = []
        self.tallies: list[SessionSummary] = []  # each member's events folded: its tokens, transitions
        self.lead = 0  # the member whose state the session holds while it runs (what a cancel ends with)
        self.barrier: Barrier | None = None
        self.crossed = 0  # barriers crossed
        self._holds: Iterator[Barrier] = iter(())
        self._route: dict[int, int] = {}  # engine handle -> member
        self._phase = (0.0, 0, 0)  # the phase's start: (engine time, tokens decoded, requests submitted)
        self._requests = 0
        self._paths = MemberPaths(0)  # each member's path through each phase (the critical path's)
        self._arrived: list[float | None] = []  # per member: when it reached the phase's barrier (or ended)
        self._kept: list[list[int]] = []  # per member: barriers that left its state as it was, barriers crossed

    # -- what a population method says ------------------------------------------------------------
    def make_members(self) -> list[Driver]:
        raise NotImplementedError

    def barriers(self) -> Iterable[Barrier]:
        """The barriers, in the order the members meet them."""
        return ()

    def cross(self, barrier: Barrier, states: list[SeqState]) -> list[SeqState]:
        """Every member waits at `barrier` with its state: the states they go on from."""
        return states

    def finish(self, states: list[SeqState]) -> None:
        """Every member has ended: set the answer (`self.state`) and say how it was chosen."""
        raise NotImplementedError

    def member_event(self, i: int, ev: Event) -> None:
        """An event of member i (folded into its tally already); forward it with `self.emit`."""

    def keeps(self, i: int) -> bool:
        """Whether member i's next barrier is likely to leave its state as it is, so that, waiting there, it
        speculates on from it (the streaming rule): a method that can guess says so; a wrong guess only wastes
        what the member decodes meanwhile, a right one lets it walk on at once.  Default: no guess (a member
        waits idle), as for resample-move, whose resampling hands most particles another's state."""
        return False

    def kept_mostly(self, i: int) -> bool:
        """Whether the barriers so far left member i's state as it was at least as often as not (False before
        the first has said)."""
        kept, crossed = self._kept[i]
        return crossed > 0 and 2 * kept >= crossed

    # -- helpers for the methods ------------------------------------------------------------------
    def member(self, params: SamplerParams, *, state: SeqState | None = None,
               family: SamplerFamily | None = None) -> Driver:
        """A member: an MH chain of `params`' method (a chain method) under its prefetch rule."""
        d = params.method.driver(self.engine, params, self.prompt_ids, prompt=self.prompt,
                                 classifier=self.classifier, state=state, family=family)
        assert isinstance(d, Driver), f"{params.sampler} is not an MH chain method"
        return d

    def start_state(self, i: int) -> SeqState | None:
        """Member i's given start state (None: it grows its own from the prompt)."""
        if self.given is None or isinstance(self.given, SeqState):
            return self.given
        return self.given[i]

    @property
    def tokens_decoded(self) -> int:
        return sum(t.tokens_generated for t in self.tallies)

    # -- the session ------------------------------------------------------------------------------
    def begin(self) -> None:
        self.members = self.make_members()
        self.tallies = []
        for m in self.members:
            tally = SessionSummary()
            tally.params = m.params.to_dict()
            self.tallies.append(tally)
            m.cost = self.cost
            m.peers = lambda: self.peers() + len(self.members) - 1  # the cost policy counts every member
        self._holds = iter(self.barriers())
        self.barrier = next(self._holds, None)
        self._phase = (self.clock(), 0, 0)
        self._paths = MemberPaths(len(self.members))
        self._paths.begin([m.state.T for m in self.members])
        self._arrived = [None] * len(self.members)
        self._kept = [[0, 0] for _ in self.members]
        for i, m in enumerate(self.members):
            self.emit(MemberEvent(i, self.member_start(m, i)))
            m._t0 = self._t0  # (its events on the session's clock, as its steps are)
            m.hold = self.barrier
            m.speculate_held = self.keeps(i)
            m.begin()
            self._consume(i, m.flush())
        self._settle()

    def advance_session(self) -> None:
        for i, m in enumerate(self.members):
            if not m.done:
                self._consume(i, m.advance())
        self._settle()

    def member_start(self, m: Driver, i: int) -> SessionStart:
        """Member i's start, as its recorded chain begins: the session's, with the member's parameters (a
        session begun without `start`, as the law-test kit's are, has no start of its own: its engine and prompt)."""
        e = self.engine
        start = self.started or SessionStart("", __version__, e.name, e.model, {}, self.prompt,
                                             tuple(self.prompt_ids), 0.0, dict(e.info))
        return replace(start, session_id=f"{start.session_id}.{i + 1}", params=m.params.to_dict(), chain=0,
                       chains=1, group="")

    def _consume(self, i: int, events: list[Event]) -> None:
        for ev in events:
            self.tallies[i].update(ev)
            self._paths.update(i, ev)
            self.member_event(i, ev)
            if not isinstance(ev, NOT_THE_MEMBERS):
                self.emit(MemberEvent(i, ev))

    def stepped(self, start: float, end: float, live: int) -> None:
        super().stepped(start, end, live)
        self._paths.stepped(start - self._t0, end - self._t0)

    def _settle(self) -> None:
        """Cross every barrier all members wait at (a member let go may reach the next at once), end when
        every member has."""
        while True:
            now = self.clock()
            self._arrived = [t if t is not None or not (m.held or m.done) else now
                             for t, m in zip(self._arrived, self.members)]
            if all(m.done for m in self.members):
                self._call(final=True)
                self.finish([m.state for m in self.members])
                self.end("done")
                return
            if self.barrier is None or not all(m.held or m.done for m in self.members):
                self.state = self.members[self.lead].state
                return
            barrier = self.barrier
            states = self.cross(barrier, [m.state for m in self.members])
            self._call()
            self.crossed += 1
            self.barrier = next(self._holds, None)
            self._paths.begin([st.T for st in states])
            self._arrived = [None] * len(self.members)
            for i, (m, st) in enumerate(zip(self.members, states)):
                self._kept[i][0] += st is m.state
                self._kept[i][1] += 1
                m.speculate_held = self.keeps(i)
            for i, (m, st) in enumerate(zip(self.members, states)):
                m.release(st, self.barrier)
                self._consume(i, m.flush())
            for i, m in enumerate(self.members):  # let go: each asks for what it needs now (the loop steps next)
                if not m.done:
                    self._consume(i, m.advance())

    def cancel(self) -> list[Event]:
        """Cancelled: every member still running ends as cancelled first (its recorded chain ends where it
        stopped), then the population, with the state of its lead."""
        if not self.done:
            for i, m in enumerate(self.members):
                if not m.done:
                    self._consume(i, m.cancel())
        return super().cancel()

    def fail(self, exc: BaseException) -> list[Event]:
        """Failed: every member still running records the error too, then the population."""
        if not self.done:
            for i, m in enumerate(self.members):
                if not m.done:
                    self._consume(i, m.fail(exc))
        return super().fail(exc)

    def _call(self, final: bool = False) -> None:
        """The phase since the last barrier as one model call: its engine time, what its members decoded;
        and where its time went (`BarrierMet`)."""
        t0, tokens0, requests0 = self._phase
        now, tokens = self.clock(), self.tokens_decoded
        block = self.barrier[0] if self.barrier is not None else self.params.n_blocks - 1
        self.emit(ModelCall(block, self.crossed, "propose",
                                   self._requests - requests0, tokens - tokens0, now - t0, t0, now))
        arrived = [now if t is None else t for t in self._arrived]
        paths, path_tokens = self._paths.paths(t0, arrived)
        # the end is after the last block's K transitions
        k = self.params.steps if final or self.barrier is None else self.barrier[1]
        self.emit(BarrierMet(self.crossed + 1, block, k, final, t0, now, tuple(arrived), paths, path_tokens))
        self._phase = (now, tokens, self._requests)

    # -- the loop's side: every member's requests as the population's ------------------------------
    def to_submit(self) -> list[tuple[Any, Request]]:
        out: list[tuple[Any, Request]] = []
        for i, m in enumerate(self.members):
            queued = m.to_submit()
            if not m.done:  # (what an ended member planned last is of no use: the loop drops an ended session's too)
                out.extend((MemberTag(i, tag), req) for tag, req in queued)
        self._requests += len(out)
        return out

    def to_abort(self) -> list[int]:
        return [h for m in self.members for h in m.to_abort()]

    def submitted(self, tag: Any, handle: int) -> None:
        assert isinstance(tag, MemberTag)
        self._route[handle] = tag.member
        self.members[tag.member].submitted(tag.tag, handle)

    def delivered(self, handle: int, proposal: Proposal) -> None:
        i = self._route.pop(handle, None)
        if i is not None:
            self.members[i].delivered(handle, proposal)

    def aborted(self, handle: int, decoded: int) -> None:
        i = self._route.pop(handle, None)
        if i is not None and handle in self.members[i].handles():
            self.members[i].aborted(handle, decoded)

    def handles(self) -> list[int]:
        return [h for m in self.members for h in m.handles()]

    def progress_event(self) -> Event | None:
        live = self.handles()
        decoded = sum(self.engine.progress(h) for h in live)
        return InFlight(len(live), decoded, decoded)
