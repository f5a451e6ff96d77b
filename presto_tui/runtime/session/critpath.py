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
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from presto_tui.runtime.session.events import (
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

IRREDUCIBLE, WIDTH, BLOCK_END, EXTENSION, UNSPECULATED, BUDGET, RANKED, REISSUED, ROUND, SCHEDULER, REUSED = (
    "irreducible", "width", "block end", "extension", "not speculated", "budget", "ranked", "reissued", "round",
    "scheduler", "reused")
CAUSES = (IRREDUCIBLE, WIDTH, BLOCK_END, EXTENSION, UNSPECULATED, BUDGET, RANKED, REISSUED, ROUND, SCHEDULER,
          REUSED)
SHORT = {IRREDUCIBLE: "limit", WIDTH: "width", BLOCK_END: "blkend", EXTENSION: "ext", UNSPECULATED: "unspec",
         BUDGET: "budget", RANKED: "ranked", REISSUED: "reissue", ROUND: "round", SCHEDULER: "sched",
         REUSED: "reuse"}
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
class CriticalPath:
    time_s: float  # engine time to the chain's last decision
    limit_s: float  # the dependency limit in seconds (limit steps at one request's step time)
    limit_steps: int
    path_tokens: int  # tokens decoded on the path (= limit_steps for a chain from its prompt)
    parts: dict[str, float]  # seconds per cause (CAUSES); they add up to time_s

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
                "path_tokens": self.path_tokens, "parts": dict(self.parts)}


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

    def update(self, ev: Event) -> None:
        if isinstance(ev, EngineSteps):
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
        ended = self.ends_at[r.block - 1] if r.block > 0 else 0.0
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
