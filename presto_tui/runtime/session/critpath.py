"""Where a chain's time went: its critical path, each piece of it attributed to a cause.

Every exact rule with decision inputs walks the same trajectory; the
dependency limit (`limit.py`) is the time an oracle would need that starts
each used request (every block's extension, every walked decision's proposal)
the moment the tokens of its prefix exist, on an engine where a batch costs
what one request costs.  A chain started from its prompt reaches its last
decision there after exactly n decode steps: one step per token of the
answer.  This module follows, backwards from the chain's last decision, the
chain of waits that made it as late as it was, and says what each piece of
that path was:

- at a decision: it was taken when the latest of its proposal, the decision
  before it (the walk is in order) and, first in a block, the block's
  extension, was there; the path goes on through that one;
- through a request: it decoded from when it was issued to the token the
  path needs (its last one, or the one a later request's prefix ended on);
  before that it was issued late, after the token its own prefix ends on
  existed (`gate`), whose request the path goes on through.

Every piece of the path between engine steps is the scheduler's own time.
The rest of a piece is:

- `irreducible`: a request decoding, at one request's step time: one step
  per token on the path;
- `width`: the same steps' time beyond that (more requests live at once);
- `block end`: a proposal waiting for its block to begin while the block
  before it still walked (its prefix existed already: no decision is asked
  for across blocks);
- `extension`: a proposal waiting for its block to begin, while the block's
  extension was still decoding;
- `not speculated`: a proposal issued late that no policy pass refused (the
  speculation did not see it);
- `budget`: issued late while the policy saw it and had no slot under its cap (held by other
  requests: its chain's, and under the shared policy the other chains' on the engine);
- `ranked`: issued late while the policy ranked it below what pays (the cost policy's width,
  the shared policy's price for the chain alone on the engine);
- `reissued`: a used proposal aborted (a mis-speculation) and issued again;
- `round`: a finished proposal waiting for the rest of its round (round rules);
- `scheduler`: the path between engine steps;
- `reused` (negative): a request issued before its prefix existed on the path,
  because the same tokens had been decoded already (an accept reproduced
  them): time the chain gained over the limit's assumptions.

The path's tokens are exactly the answer's n, so `irreducible` is the
dependency limit in seconds and the other parts add up to the chain's time
minus that limit (`CriticalPath.check`).  It needs a chain started from its
prompt and the timing of schema 1.3 traces (`EngineSteps`, model calls'
`start` and `clock`, `BlockStart.open`, the requests' `waited`); without them
there is none.

A population (session/population.py: tempering's replicas, resample-move's particles) is R chains that
meet at barriers; its time is its phases', each from one crossing to the next.  Each member's path
through a phase is walked as a chain's (from its arrival at the barrier back to the phase's start, where
its state was handed to it: `MemberPaths`, recorded in the trace's `barrier` lines, `BarrierMet`).  The
population's path follows its slowest member (the most time at work over all phases): that member's
own parts, phase by phase, then `barrier`, the time it waited at the barriers for the phase's slowest
(the member that set its pace), and `scheduler`, from the last arrival to the crossing.  Without the
barriers the population would have ended when its slowest member did: `barrier` is what they cost it.
Its `irreducible` part is the path's decoding given the barriers, longer than a chain's n tokens: the
path starts afresh at every barrier, from the state the barrier handed its member.
Each phase (`Phase`) says which member set the pace and how long each of the others idled.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from presto_tui.runtime.session.events import (
    BarrierMet,
    BlockStart,
    DecisionWalked,
    EngineCost,
    EngineSteps,
    Event,
    ModelCall,
    RequestEvent,
    RoundDone,
    SessionStart,
)
from presto_tui.runtime.session.limit import BlockPath, dependency_steps

IRREDUCIBLE, WIDTH, BLOCK_END, EXTENSION, UNSPECULATED, BUDGET, RANKED, REISSUED, ROUND, BARRIER, SCHEDULER, \
    REUSED = ("irreducible", "width", "block end", "extension", "not speculated", "budget", "ranked", "reissued",
              "round", "barrier", "scheduler", "reused")
CAUSES = (IRREDUCIBLE, WIDTH, BLOCK_END, EXTENSION, UNSPECULATED, BUDGET, RANKED, REISSUED, ROUND, BARRIER,
          SCHEDULER, REUSED)
SHORT = {IRREDUCIBLE: "limit", WIDTH: "width", BLOCK_END: "blkend", EXTENSION: "ext", UNSPECULATED: "unspec",
         BUDGET: "budget", RANKED: "ranked", REISSUED: "reissue", ROUND: "round", BARRIER: "barrier",
         SCHEDULER: "sched", REUSED: "reuse"}
MEANING = {
    IRREDUCIBLE: "decoding on the path at one request's step time: the dependency limit",
    WIDTH: "those steps' time beyond one request's (a wider batch)",
    BLOCK_END: "proposals waiting for the block before theirs to end (no decision is asked for across blocks)",
    EXTENSION: "proposals waiting for their block's extension to finish",
    UNSPECULATED: "proposals issued late that no policy pass had seen",
    BUDGET: "proposals issued late while the policy had no slot under its cap (other requests held them, "
            "the other chains' too)",
    RANKED: "proposals issued late while the policy ranked them below what pays",
    REISSUED: "used proposals aborted and issued again",
    ROUND: "finished proposals waiting for the rest of their round",
    BARRIER: "a population's slowest member waiting at its barriers for the member that set the phase's pace",
    SCHEDULER: "between engine steps: the scheduler's own time",
    REUSED: "(negative) requests issued before their prefix existed on the path: the same tokens were there",
}


@dataclass
class _Request:
    """A used request: a block's extension or a walked decision's proposal (its selected candidate)."""

    cut: int  # its first position (an extension: the block's L)
    n: int  # tokens it decodes
    issued: float  # when it was issued (the last time, if it was issued again)
    first: float  # when it was first issued
    finished: float | None  # when it finished (None: from the step log)
    block: int
    waited: dict = field(default_factory=dict)
    gate: tuple[int, int] | None = None  # (request, token count) its prefix's last token comes from
    extension: bool = False


@dataclass
class _Group:
    """A streaming request group's times, from its `request` events."""

    issued: list[float] = field(default_factory=list)
    finished: float | None = None
    waited: dict = field(default_factory=dict)


@dataclass
class _Decision:
    block: int
    cut: int
    accepted: bool
    taken: float
    request: int  # index into the used requests
    round: bool  # taken at the end of a round (its proposal finishing earlier waited for the round)


@dataclass(frozen=True)
class Phase:
    """A population's phase: from one barrier's crossing (`start`) to the next's (`end`)."""

    step: int  # from 1
    block: int  # the barrier that ended it: after k transitions of the block (from 0); the end: the last block's K
    k: int
    final: bool
    start: float
    end: float
    pace: int  # the member that arrived last (from 0): the phase's pace
    waits: tuple[float, ...]  # per member: how long it idled at the barrier for the pace
    pace_parts: dict[str, float] = field(default_factory=dict)  # the pace's path through the phase, by cause

    @property
    def idle_s(self) -> float:
        """Member-seconds idle at the barrier (every member's wait for the slowest)."""
        return sum(self.waits)

    def to_dict(self) -> dict:
        return {"step": self.step, "block": self.block + 1, "transitions": self.k, "final": self.final,
                "start": self.start,
                "end": self.end, "pace": self.pace + 1, "waits": list(self.waits),  # members from 1 (numbering.md)
                "pace_parts": {c: v for c, v in self.pace_parts.items() if v}}


@dataclass(frozen=True)
class CriticalPath:
    time_s: float  # engine time to the chain's last decision (a population's: to its end)
    limit_s: float  # the dependency limit in seconds (limit steps at one request's step time)
    limit_steps: int
    path_tokens: int  # tokens decoded on the path (= limit_steps for a chain from its prompt)
    parts: dict[str, float]  # seconds per cause (CAUSES); they add up to time_s
    # a population's: the member the path follows (its slowest, from 0) and its phases
    member: int | None = None
    phases: tuple[Phase, ...] = ()

    @property
    def idle_s(self) -> float:
        """A population's member-seconds idle at its barriers (0 for a chain)."""
        return sum(p.idle_s for p in self.phases)

    @property
    def idle_share(self) -> float | None:
        """A population's idle member-seconds over its members' time (members x its phases' time)."""
        if not self.phases:
            return None
        span = sum(p.end - p.start for p in self.phases) * len(self.phases[0].waits)
        return self.idle_s / span if span else 0.0

    @property
    def beyond_limit_s(self) -> float:
        return self.time_s - self.limit_s

    def share(self, cause: str) -> float:
        return self.parts.get(cause, 0.0) / self.time_s if self.time_s else 0.0

    def check(self, tol: float = 1e-9) -> bool:
        """The parts add up to the chain's time and the irreducible part is the limit (to `tol`, relative)."""
        scale = max(1.0, abs(self.time_s))
        return (abs(sum(self.parts.values()) - self.time_s) <= tol * scale
                and abs(self.parts[IRREDUCIBLE] - self.limit_s) <= tol * scale)

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "limit_s": self.limit_s, "limit_steps": self.limit_steps,
                "path_tokens": self.path_tokens, "parts": dict(self.parts),
                **({"member": self.member + 1 if self.member is not None else None, "idle_s": self.idle_s,
                    "idle_share": self.idle_share, "phases": [p.to_dict() for p in self.phases]}
                   if self.phases else {})}


class PathLog:
    """What the critical path needs, folded from a session's events (`SessionSummary` holds one)."""

    def __init__(self) -> None:
        self.starts: list[float] = []  # engine steps
        self.ends: list[float] = []
        self.cost: EngineCost | None = None
        self.blocks: list[tuple[int, int, int, float]] = []  # (L, T, extension request, open)
        self.requests: list[_Request] = []
        self.decisions: list[_Decision] = []
        self.timed = True  # every event carried the timing the path needs (schema 1.3)
        self._groups: dict[int, _Group] = {}  # streaming request groups by id
        self._call: ModelCall | None = None  # the last model call (a round's, or an extension's)
        self.barriers: list[BarrierMet] = []  # a population's phases

    def update(self, ev: Event) -> None:
        if isinstance(ev, BarrierMet):
            self.barriers.append(ev)
        elif isinstance(ev, EngineSteps):
            self.starts.extend(ev.start)
            self.ends.extend(ev.end)
        elif isinstance(ev, ModelCall):
            self._call = ev
            self.timed &= ev.start is not None and ev.clock is not None
        elif isinstance(ev, BlockStart):
            call = self._call
            if call is None or call.start is None or call.clock is None or ev.open is None:
                self.timed = False
                return
            self.requests.append(_Request(ev.L, ev.T - ev.L, call.start, call.start, call.clock, len(self.blocks),
                                          extension=True))
            self.blocks.append((ev.L, ev.T, len(self.requests) - 1, ev.open))
        elif isinstance(ev, RequestEvent):
            g = self._groups.setdefault(ev.request, _Group())
            if ev.kind == "issued":
                if not g.issued:
                    g.waited = dict(ev.waited)
                g.issued.append(ev.clock)
            elif ev.kind == "finished":
                g.finished = ev.clock
        elif isinstance(ev, DecisionWalked):
            w = self._groups.get(ev.request)
            if w is None or not w.issued or w.finished is None or not self.blocks:
                self.timed = False
                return
            T = self.blocks[-1][1]
            self.requests.append(_Request(ev.cut, T - ev.cut, w.issued[-1], w.issued[0], w.finished,
                                          len(self.blocks) - 1, w.waited))
            self.decisions.append(_Decision(len(self.blocks) - 1, ev.cut, ev.accepted, ev.clock,
                                            len(self.requests) - 1, round=False))
        elif isinstance(ev, RoundDone):
            if ev.tree.rule == "stream":
                return  # its decisions came one by one (DecisionWalked)
            call = self._call
            if call is None or call.start is None or call.clock is None or not self.blocks:
                self.timed = False
                return
            for s in ev.tree.steps:
                cut = ev.tree.decisions[s.decision].cut
                self.requests.append(_Request(cut, ev.tree.T - cut, call.start, call.start, None,
                                              len(self.blocks) - 1))
                self.decisions.append(_Decision(len(self.blocks) - 1, cut, s.accepted, call.clock,
                                                len(self.requests) - 1, round=True))
        elif isinstance(ev, EngineCost):
            self.cost = ev
        elif isinstance(ev, SessionStart):
            self.__init__()  # type: ignore[misc]

    def critical_path(self) -> CriticalPath | None:
        if self.barriers:
            return population_path(self.barriers, self.cost)
        if not (self.timed and self.decisions and self.blocks and self.cost is not None and self.ends):
            return None
        if self.blocks[0][0] != 0:
            return None  # a chain started from given tokens: no extension of its own to start the path
        return _Walk(self).run()


class _Walk:
    """The backward walk over one session's log (see the module docstring)."""

    def __init__(self, log: PathLog):
        self.log = log
        assert log.cost is not None
        self.sigma = log.cost.a + log.cost.b  # one request's step time
        self.starts, self.ends = log.starts, log.ends
        self.busy = [0.0]  # step time before each step (prefix sums)
        for s, e in zip(self.starts, self.ends):
            self.busy.append(self.busy[-1] + (e - s))
        self.parts = dict.fromkeys(CAUSES, 0.0)
        self.tokens = 0
        self.ends_at = {d.block: d.taken for d in log.decisions}  # when each block's last decision was taken
        self._gates()

    def _gates(self) -> None:
        """Each used request's gate: the request and token count its prefix's last token comes from."""
        log = self.log
        source: list[tuple[int, int]] = []  # per position of the state: (request, its offset in it)
        by_block: dict[int, list[_Decision]] = {}
        for d in log.decisions:
            by_block.setdefault(d.block, []).append(d)
        for b, (L, T, ext, _) in enumerate(log.blocks):
            r = log.requests[ext]
            r.gate = (source[L - 1][0], source[L - 1][1] + 1) if L > 0 else None
            source = source[:L] + [(ext, i) for i in range(T - L)]
            for d in by_block.get(b, []):
                r = log.requests[d.request]
                r.gate = (source[d.cut - 1][0], source[d.cut - 1][1] + 1) if d.cut > 0 else None
                if d.accepted:
                    source = source[:d.cut] + [(d.request, i) for i in range(T - d.cut)]

    # -- time on the engine's clock ----------------------------------------------------------
    def token_time(self, issued: float, m: int) -> float:
        """When a request issued at `issued` had decoded m tokens: the end of its m-th step."""
        i = bisect.bisect_left(self.starts, issued) + m - 1
        return self.ends[min(i, len(self.ends) - 1)]

    def finish(self, r: _Request) -> float:
        return r.finished if r.finished is not None else self.token_time(r.issued, r.n)

    def step_time(self, u: float, v: float) -> float:
        """Engine step time within [u, v]."""
        if v <= u:
            return 0.0
        i, j = bisect.bisect_right(self.ends, u), bisect.bisect_left(self.starts, v)
        if i >= j:
            return 0.0
        total = self.busy[j] - self.busy[i]
        total -= max(0.0, u - self.starts[i])  # a step cut by u or v counts only inside
        total -= max(0.0, self.ends[j - 1] - v)
        return max(0.0, total)

    def add(self, cause: str, u: float, v: float) -> None:
        """The path spent [u, v] on `cause`: its time between engine steps is the scheduler's; v < u
        (a request issued before its prefix existed on the path) is negative time."""
        if v < u:
            self.parts[cause] += v - u
            return
        busy = self.step_time(u, v)
        self.parts[cause] += busy
        self.parts[SCHEDULER] += (v - u) - busy

    # -- the walk --------------------------------------------------------------------------
    def run(self) -> CriticalPath:
        log = self.log
        decisions = log.decisions
        i = len(decisions) - 1
        t_end = tau = decisions[i].taken
        while True:  # decisions, backwards, until one waited for a request
            d = decisions[i]
            r = log.requests[d.request]
            f = self.finish(r)
            first = i == 0 or decisions[i - 1].block != d.block
            if first:
                ext = log.requests[log.blocks[d.block][2]]
                e = self.finish(ext)
                if f >= e:
                    self.add(ROUND if d.round else SCHEDULER, f, tau)
                    tau, req, m = f, d.request, r.n
                else:
                    self.add(SCHEDULER, e, tau)
                    tau, req, m = e, log.blocks[d.block][2], ext.n
                break
            prev = decisions[i - 1].taken
            if f >= prev:
                self.add(ROUND if d.round else SCHEDULER, f, tau)
                tau, req, m = f, d.request, r.n
                break
            self.add(SCHEDULER, prev, tau)
            tau, i = prev, i - 1
        while True:  # requests, backwards, each through the gate of its prefix
            r = log.requests[req]
            self.decode(r.issued, tau, m)
            gate = r.gate
            a = 0.0 if gate is None else self.token_time(log.requests[gate[0]].issued, gate[1])
            self.late(r, a)
            if gate is None:
                break
            tau, (req, m) = a, gate
        limit_steps = dependency_steps(self._paths())
        return CriticalPath(t_end, limit_steps * self.sigma, limit_steps, self.tokens, dict(self.parts))

    def _paths(self) -> list[BlockPath]:
        """The trajectory as `limit.py` reads it."""
        paths = [BlockPath(L, T, []) for L, T, _, _ in self.log.blocks]
        for d in self.log.decisions:
            paths[d.block].walk.append((d.cut, d.accepted))
        return paths

    def decode(self, u: float, v: float, m: int) -> None:
        """A request decoding m tokens of the path over [u, v]."""
        self.tokens += m
        full = m * self.sigma
        busy = self.step_time(u, v)
        self.parts[IRREDUCIBLE] += full
        self.parts[WIDTH] += busy - full
        self.parts[SCHEDULER] += (v - u) - busy

    def late(self, r: _Request, a: float) -> None:
        """Request r issued at r.issued, its prefix there since `a`: why it was not issued at `a`."""
        u = r.issued
        if u < a:
            self.add(REUSED, a, u)
            return
        if r.extension:
            self.add(UNSPECULATED, a, u)
            return
        opened = self.log.blocks[r.block][3]
        t = a
        ended = self.ends_at.get(r.block - 1, 0.0) if r.block > 0 else 0.0
        if t < ended:  # its block had not begun: the block before it was still walking
            self.add(BLOCK_END, t, min(ended, u))
            t = min(ended, u)
        if t < opened:  # its block had not begun: the block's extension was still decoding
            self.add(EXTENSION, t, min(opened, u))
            t = min(opened, u)
        first = max(t, min(r.first, u))
        rest = first - t  # before it was first issued: refused by the policy, or not seen
        for why, cause in (("budget", BUDGET), ("ranked", RANKED)):
            s = min(rest, r.waited.get(why, 0.0))
            if s > 0:
                self.add(cause, first - s, first)
                first -= s
                rest -= s
        self.add(UNSPECULATED, t, first)
        self.add(REISSUED, max(t, min(r.first, u)), u)


def critical_path(events) -> CriticalPath | None:
    """The critical path of one session's events (None where the trace lacks what it needs)."""
    log = PathLog()
    for ev in events:
        log.update(ev)
    return log.critical_path()


# -- populations ----------------------------------------------------------------------------------

Mark = tuple[int, int, int, int]  # a member's log at a phase's start: (requests, decisions, blocks, its state's T)


class MemberPaths:
    """Each member's path through each phase of a population, as it runs (session/population.py): every
    member's events folded into its own `PathLog`, on the population's clock, and the engine's steps."""

    def __init__(self, members: int) -> None:
        self.logs = [PathLog() for _ in range(members)]
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.busy = [0.0]
        self.marks: list[Mark] = []

    def stepped(self, start: float, end: float) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.busy.append(self.busy[-1] + (end - start))

    def update(self, i: int, ev: Event) -> None:
        self.logs[i].update(ev)

    def begin(self, Ts: list[int]) -> None:
        """A phase begins: member i goes on from a state of Ts[i] tokens."""
        self.marks = [(len(g.requests), len(g.decisions), len(g.blocks), T) for g, T in zip(self.logs, Ts)]

    def paths(self, start: float, arrived: list[float]) -> tuple[tuple[dict[str, float], ...] | None, tuple[int, ...]]:
        """Each member's path from `start` to its arrival, by cause (its decoding all `width`), and the tokens
        decoded on it; None where a member's events lacked the timing."""
        if not all(g.timed for g in self.logs):
            return None, tuple(0 for _ in self.logs)
        out = [_PhaseWalk(self, g).run(mark, start, a) for g, mark, a in zip(self.logs, self.marks, arrived)]
        return tuple({c: v for c, v in parts.items() if v} for parts, _ in out), tuple(n for _, n in out)


class _PhaseWalk(_Walk):
    """A member's walk through one phase: a chain's (`_Walk`), back from its arrival to the phase's start,
    where every token of the state it was handed existed.  Its decoding is all `width` here (no step cost
    yet: the population's path takes the limit's share out at the engine's final cost, `population_path`)."""

    def __init__(self, paths: MemberPaths, log: PathLog):  # (not _Walk's: the steps are the population's)
        self.log = log
        self.sigma = 0.0
        self.starts, self.ends, self.busy = paths.starts, paths.ends, paths.busy
        self.parts = dict.fromkeys(CAUSES, 0.0)
        self.tokens = 0
        self.ends_at = {d.block: d.taken for d in log.decisions}

    def _phase_gates(self, mark: Mark) -> None:
        """As `_Walk._gates`, from the state the phase began with (its tokens: no gate, there at the start)."""
        log, (_, d0, b0, T0) = self.log, mark
        source: list[tuple[int, int] | None] = [None] * T0
        by_block: dict[int, list[_Decision]] = {}
        for d in log.decisions[d0:]:
            by_block.setdefault(d.block, []).append(d)

        def gate(pos: int) -> tuple[int, int] | None:
            s = source[pos - 1] if 0 < pos <= len(source) else None
            return None if s is None else (s[0], s[1] + 1)

        for b in sorted(set(by_block) | set(range(b0, len(log.blocks)))):
            T = log.blocks[b][1]
            if b >= b0:
                L, _, ext, _ = log.blocks[b]
                log.requests[ext].gate = gate(L)
                source = source[:L] + [(ext, i) for i in range(T - L)]
            for d in by_block.get(b, []):
                log.requests[d.request].gate = gate(d.cut)
                if d.accepted:
                    source = source[:d.cut] + [(d.request, i) for i in range(T - d.cut)]

    def run(self, mark: Mark, s: float, a: float) -> tuple[dict[str, float], int]:  # type: ignore[override]
        log, (_, d0, b0, _) = self.log, mark
        self._phase_gates(mark)
        decisions = log.decisions
        last_ext = b0 < len(log.blocks) and (len(decisions) == d0 or decisions[-1].block < len(log.blocks) - 1)
        if last_ext:  # the phase ended with a block's extension (a barrier at a block's start)
            req = log.blocks[-1][2]
            tau = self.finish(log.requests[req])
            self.add(SCHEDULER, tau, a)
            m = log.requests[req].n
        elif len(decisions) == d0:  # nothing of its own in the phase
            self.add(SCHEDULER, s, a)
            return self.parts, 0
        else:
            i = len(decisions) - 1
            tau = decisions[i].taken
            self.add(SCHEDULER, tau, a)
            while True:  # decisions, backwards, until one waited for a request (or the phase's start)
                d = decisions[i]
                r = log.requests[d.request]
                f = self.finish(r)
                if (i == d0 or decisions[i - 1].block != d.block) and d.block >= b0:  # first of a block begun here
                    ext = log.requests[log.blocks[d.block][2]]
                    e = self.finish(ext)
                    if f >= e:
                        self.add(ROUND if d.round else SCHEDULER, f, tau)
                        tau, req, m = f, d.request, r.n
                    else:
                        self.add(SCHEDULER, e, tau)
                        tau, req, m = e, log.blocks[d.block][2], ext.n
                    break
                prev = s if i == d0 else decisions[i - 1].taken
                if f >= prev:
                    self.add(ROUND if d.round else SCHEDULER, f, tau)
                    tau, req, m = f, d.request, r.n
                    break
                self.add(SCHEDULER, prev, tau)
                if i == d0:  # its proposal was there when the phase began (speculated while it waited)
                    return self.parts, self.tokens
                tau, i = prev, i - 1
        while True:  # requests, backwards, each through the gate of its prefix, to the phase's start
            r = log.requests[req]
            if r.issued < s:  # issued before the phase began (speculated while it waited): its steps since
                steps = bisect.bisect_right(self.ends, tau) - bisect.bisect_left(self.starts, s)
                self.decode(s, tau, max(0, min(m, steps)))
                break
            self.decode(r.issued, tau, m)
            gate = r.gate
            at = s if gate is None else self.token_time(log.requests[gate[0]].issued, gate[1])
            if gate is None or at <= s:  # its prefix was there when the phase began
                self.late(r, s)
                break
            self.late(r, at)
            tau, (req, m) = at, gate
        return self.parts, self.tokens


def population_path(barriers: list[BarrierMet], cost: EngineCost | None) -> CriticalPath | None:
    """A population's critical path from its phases (see the module docstring); None where a phase lacks its
    members' paths or the trace the engine's step cost."""
    if cost is None or not barriers or any(b.paths is None for b in barriers):
        return None
    n = len(barriers[0].arrived)
    if n == 0 or any(len(b.arrived) != n for b in barriers):
        return None
    work = [sum(b.arrived[i] - b.start for b in barriers) for i in range(n)]
    slow = max(range(n), key=lambda i: work[i])
    sigma = cost.a + cost.b
    parts = dict.fromkeys(CAUSES, 0.0)
    tokens = 0
    phases = []
    parts[SCHEDULER] += barriers[0].start  # (the session's start to its first phase's)
    for b in barriers:
        assert b.paths is not None
        for c, v in b.paths[slow].items():
            parts[c] += v
        tokens += b.tokens[slow]
        last = max(b.arrived)
        pace = b.arrived.index(last)
        parts[BARRIER] += last - b.arrived[slow]
        parts[SCHEDULER] += b.end - last
        phases.append(Phase(b.step, b.block, b.k, b.final, b.start, b.end, pace,
                            tuple(last - x for x in b.arrived), _limited(b.paths[pace], b.tokens[pace], sigma)))
    parts[IRREDUCIBLE] = tokens * sigma  # decoding on the path at one request's step time: the rest is width
    parts[WIDTH] -= tokens * sigma
    return CriticalPath(barriers[-1].end, tokens * sigma, tokens, tokens, parts, slow, tuple(phases))


def _limited(parts: dict[str, float], tokens: int, sigma: float) -> dict[str, float]:
    """A member's phase path as recorded (its decoding all width) with the limit's share taken out of it."""
    out = {**dict.fromkeys(CAUSES, 0.0), **parts}
    out[IRREDUCIBLE] += tokens * sigma
    out[WIDTH] -= tokens * sigma
    return out
