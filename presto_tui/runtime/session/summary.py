"""Per-session metrics folded from events (paper appendix D.2), one definition for every surface.

One reducer serves `run --json`, `stats`, `bench` and the app's stats panel, so
a number means the same thing everywhere.

- calls: proposal calls (one per sequential step or PreSTO round); the
  streaming rule makes none, so its `to_dict` says null for calls and the
  numbers per call (the text output's "-"); the call that extends the state by
  a block is the same for every sampler and is counted apart (`extend_calls`).
- transitions_per_call = transitions / calls (a population's: every member's,
  `work_transitions`, as for transitions_per_s, wall_per_transition_s and
  requests_realized); time_per_call_s = mean proposal
  call time; call_time_s = their sum (the numerator/denominator of eq. 20).
- wall_s: the session's time, counted from its start, its blocks' extensions
  included: the engine clock at the end of its last round or epoch (`elapsed_s`;
  under `-C` a session's own clock, so the time it shared the engine with others
  counts too).  A trace without clocks (schema 1.0) and a one-shot method (no rounds)
  fall back to the sum of their calls' time and their extensions'.
  transitions_per_s, wall_per_transition_s and the speedup use it, in `run
  --json`, `stats`, the app and the API alike.  (Before, wall_s left out the
  extensions: a streamed session whose extension overlapped its first proposals
  reported 0.007 s for 11 s of work.)
- transition_time_s: the time spent producing transitions alone (the sum of the
  rounds' call times, or of the streaming epochs' durations), extensions left
  out: what `bench`'s `speedup` column compares (its `+ext` compares wall_s).
- speedup_estimate: sequential time / wall_s for the same transitions and
  extensions.  Sequential PowerMH would extend every block as this session did
  (T - L tokens a block, one request) and make one single-request call per
  realized transition, decoding T - c tokens; its cost per token is measured
  from this session's own single-request calls (every block's extension, and
  any one-request proposal call; where every extension decoded beside
  proposals, one request's step time as the engine loop learned it), so with
  a budget of 1 it is about 1 by construction.  `speedup_transitions` is the
  same without the extensions on either side (what wall_s used to give).  It
  compares like with like only where a sequential step is one request: there
  is none for the sequential sampler itself (the baseline) or for MultiTryMH
  (whose step sends all its tries in one call); `speedup_unavailable` says why.
  `bench` measures the sequential sampler.
- eps_certain_share: share of realized MH decisions that were epsilon-certain;
  scored_counts: epsilon classes of every scored (decision, state) pair.
- requests_issued vs requests_realized: speculation sent vs used by the walk;
  proposal_tokens vs used_tokens: tokens decoded for proposals vs those of the
  proposals the walk used (wasted_share = the rest); requests_aborted,
  mean_live (streaming, engine-time weighted), time_to_first_transition_s.
- tokens: the chain's current state (generated tokens), after every event.
- engine_steps: the engine steps taken while the session was on the loop (its
  `EngineSteps`; every session writes them): the frontier's steps axis.
- draws: the chain's state after every MH transition (`Transition`: log-target,
  log-likelihood, confidence), what MCMC diagnostics read (`diagnostics.py`);
- answer_loglik, answer_confidence: eqs. 21-22 of the final answer's response, the
  text a person gets (up to its first EOS, for every method: `metrics.py`);
  elapsed_s: engine time from the session's start to the end of its last round or
  epoch; chain, chains and group: which of `--chains M` it is (chain from 1, as
  everything a person or a program reads counts: docs/numbering.md; the trace's
  `session_start` holds it from 0; 1, 1, "" alone).
- critical_path: where the chain's time went, by cause, against the dependency
  limit (`critpath.py`; schema 1.3 traces, chains started from their prompt); a
  population's: its slowest member's path through its phases and the time that
  member waited at the barriers for the others (`barrier`), with each phase's pace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.method import MethodInfo
from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN
from presto_tui.runtime.core.names import PrefetchRule
from presto_tui.runtime.session.critpath import CriticalPath, PathLog
from presto_tui.runtime.session.events import (
    BlockStart,
    Choice,
    Damaged,
    DecisionWalked,
    EngineCost,
    EngineSteps,
    Event,
    ModelCall,
    RequestEvent,
    RequestKind,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
    Transition,
)
from presto_tui.runtime.session.limit import BlockPath, Limits, limits

# extensions decoded beside other requests: their wall_s is a wait, not one request's decoding time
SHARED_CALLS = ("extend-ahead", "extend-overlap")


def is_one_shot(params: dict) -> bool:
    """Params of a session that is one result, not one MH chain's rounds: a one-shot method's (low
    temperature, best-of-N, PowerSMC, SPS, ...) or a population's (several chains in one session:
    parallel tempering, resample-move), whose time is its model calls (`Method.rounds`)."""
    m = registry.find(params.get("sampler"))
    return m is not None and not m.rounds


@dataclass
class SessionSummary:
    params: dict = field(default_factory=dict)
    prompt: str = ""
    calls: int = 0
    extend_calls: int = 0
    call_time_s: float = 0.0
    extend_time_s: float = 0.0
    transition_time_s: float = 0.0  # rounds' call times or epochs' durations, extensions left out
    transitions: int = 0
    accepted: int = 0
    eps_counts: dict = field(default_factory=lambda: {ACCEPT: 0, REJECT: 0, UNCERTAIN: 0})
    scored_counts: dict = field(default_factory=lambda: {ACCEPT: 0, REJECT: 0, UNCERTAIN: 0})
    requests_issued: int = 0
    requests_aborted: int = 0
    tokens_generated: int = 0  # every token decoded: extensions and proposals
    proposal_tokens: int = 0
    used_tokens: int = 0
    rounds: int = 0
    acceptance_by_round: list = field(default_factory=list)
    sequential_tokens: int = 0  # what sequential PowerMH would decode for the realized transitions
    single_request_s: float = 0.0  # time and tokens of this session's single-request calls
    single_request_tokens: int = 0
    first_transition_s: float | None = None
    live_area: float = 0.0  # streaming: live requests integrated over engine time
    live_span: float = 0.0
    _live_at: tuple[float, int] | None = None
    text: str = ""
    tokens: tuple = ()
    engine_cost: EngineCost | None = None  # the engine's learned step cost (streaming and rounds, schema 1.2)
    engine_steps: int = 0  # engine steps taken while the session was on the loop (its `EngineSteps`)
    # the final answer under p0 (eqs. 21-22 of its response, before EOS: metrics.response_scores), from
    # the last transition of a chain, a baseline's choice; None for an empty response
    answer_loglik: float | None = None
    answer_confidence: float | None = None
    path: list[BlockPath] = field(default_factory=list)  # the trajectory, for the dependency limit
    # the method's own numbers, folded from its own events (`Method.info`: PowerSMC's resamplings, SPS's
    # rollouts, best-of-N's samples and choice, ...), made when the session starts
    info: MethodInfo = field(default_factory=MethodInfo)
    status: str = "running"  # running, done, cancelled, error; damaged (lines of its trace were skipped)
    error: str = ""
    damaged_lines: list[int] = field(default_factory=list)  # a trace's lines that were skipped (Damaged)
    draws: list[Transition] = field(default_factory=list)
    block_prefixes: dict[int, tuple] = field(default_factory=dict)  # generated tokens before each block
    elapsed_s: float = 0.0
    chain: int = 1  # from 1 (the SessionStart event's index + 1: docs/numbering.md)
    chains: int = 1
    group: str = ""
    timing: PathLog = field(default_factory=PathLog)  # what the critical path reads
    _crit: tuple[int, CriticalPath | None] = (-1, None)  # (events seen, the path then)
    _events: int = 0

    def __repr__(self) -> str:
        """Short (a notebook prints a list of them): what ran, how it ended, its main numbers."""
        text = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        what = f"transitions={self.transitions}, acceptance={self.acceptance_rate:.2f}" if not self.one_shot else \
            f"drawn={self.info.drawn()}" + (f", transitions={self.transitions}" if self.population else "")
        return (f"SessionSummary({self.params.get('sampler')!r}, {self.status}, {what}, tokens={len(self.tokens)}, "
                f"text={text!r})")

    def update(self, ev: Event) -> SessionSummary:
        self._events += 1
        self.timing.update(ev)
        self.info.update(ev)
        if isinstance(ev, SessionStart):
            self.params, self.prompt = dict(ev.params), ev.prompt
            self.chain, self.chains, self.group = ev.chain + 1, ev.chains, ev.group
            method = registry.find(self.params.get("sampler"))
            self.info = method.info() if method is not None else MethodInfo()
            self.info.update(ev)  # (its own start: the parameters it ran with; resample-move's K)
        elif isinstance(ev, ModelCall):
            self.tokens_generated += ev.tokens
            if ev.requests == 1 and ev.purpose not in SHARED_CALLS:
                self.single_request_s += ev.wall_s
                self.single_request_tokens += ev.tokens
            if ev.purpose in ("extend", *SHARED_CALLS):
                self.extend_calls += 1
                self.extend_time_s += ev.wall_s
            else:
                self.calls += 1
                self.call_time_s += ev.wall_s
                self.requests_issued += ev.requests
                self.proposal_tokens += ev.tokens
                if self.one_shot:  # no rounds: its calls are its time (and every token is its own)
                    self.transition_time_s += ev.wall_s
                    self.used_tokens += ev.tokens
        elif isinstance(ev, RequestEvent):
            self._live(ev.clock, ev.live)
            if ev.purpose == "extend":  # the next block's extension decoded ahead: counted by its call if
                if ev.kind == RequestKind.ABORTED:  # used; if the block ended elsewhere, its tokens were waste
                    self.tokens_generated += ev.tokens
                    self.proposal_tokens += ev.tokens
            elif ev.kind == RequestKind.ISSUED:
                self.requests_issued += ev.size
            else:
                self.tokens_generated += ev.tokens
                self.proposal_tokens += ev.tokens
                self.requests_aborted += ev.size if ev.kind == RequestKind.ABORTED else 0
        elif isinstance(ev, DecisionWalked):
            if self.first_transition_s is None:
                self.first_transition_s = ev.clock
        elif isinstance(ev, BlockStart):
            self.block_prefixes[ev.block] = self.tokens[:ev.L]
            self.tokens = self.tokens + tuple(ev.tokens)
            self.path.append(BlockPath(ev.L, ev.T))
        elif isinstance(ev, EngineCost):
            self.engine_cost = ev
        elif isinstance(ev, EngineSteps):
            self.engine_steps += len(ev.start)
        elif isinstance(ev, Transition):
            self.draws.append(ev)
            if self.population:  # a population's draws (tempering's alpha replica's) are its own transitions
                self.transitions += 1
                self.accepted += ev.accepted
            self.answer_loglik, self.answer_confidence = _defined(ev.loglik), _defined(ev.confidence)
        elif isinstance(ev, Choice):
            self.answer_loglik, self.answer_confidence = _defined(ev.loglik), _defined(ev.confidence)
        elif isinstance(ev, RoundDone):
            self._round(ev)
        elif isinstance(ev, SessionEnd):
            self.status, self.text, self.tokens = ev.reason, ev.text, tuple(ev.tokens)
        elif isinstance(ev, SessionError):
            self.status, self.error = "error", ev.message
        elif isinstance(ev, Damaged):
            self.damaged_lines.extend(ev.lines)
        if (own := self.info.session_moves()) is not None and self.population:  # resample-move: all particles'
            self.transitions, self.accepted = own
        if self.damaged_lines:  # whatever it ended with, its numbers are those of what could be read
            self.status = "damaged"
        return self

    def _round(self, ev: RoundDone) -> None:
        tree = ev.tree
        if not self.path:  # a chain started from a given state (no extension)
            self.path.append(BlockPath(tree.T, tree.T))
        self.path[-1].walk.extend((tree.decisions[s.decision].cut, s.accepted) for s in tree.steps)
        self.path[-1].draws = max([1, *(len(tree.decisions[s.decision].candidates) for s in tree.steps)])
        self.rounds += 1
        self.transition_time_s += ev.call_wall_s
        acc = 0
        for s in tree.steps:
            sc = tree.scores[(s.decision, s.src)]
            dec = tree.decisions[s.decision]
            self.eps_counts[sc.eps_class] += 1
            self.sequential_tokens += tree.T - dec.cut
            self.used_tokens += (tree.T - dec.cut) * max(1, len(dec.candidates))
            acc += s.accepted
        for sc in tree.scores.values():
            self.scored_counts[sc.eps_class] += 1
        if self.first_transition_s is None and tree.steps and ev.clock is not None:
            self.first_transition_s = ev.clock
        if ev.clock is not None:
            self.elapsed_s = max(self.elapsed_s, ev.clock)
        self.transitions += tree.transitions
        self.accepted += acc
        self.acceptance_by_round.append(acc / max(1, tree.transitions))
        self.tokens = tree.final_state.tokens

    def _live(self, clock: float, live: int) -> None:
        if self._live_at is not None:
            t0, n = self._live_at
            self.live_area += n * max(0.0, clock - t0)
            self.live_span += max(0.0, clock - t0)
        self._live_at = (clock, live)

    @property
    def wall_s(self) -> float:
        """The session's time from its start, extensions included (the module docstring): the clock
        at its last round or epoch; without clocks (schema 1.0, a one-shot method) its calls' and extensions'."""
        return self.elapsed_s if self.elapsed_s and not self.one_shot else self.transition_time_s + self.extend_time_s

    @property
    def engine_time_s(self) -> float:
        """The session's engine time: wall_s (the name `bench` and the limits read)."""
        return self.wall_s

    @property
    def extend_tokens(self) -> int:
        """Tokens the blocks' extensions add to the state (T - L a block), as sequential PowerMH decodes them."""
        return sum(b.T - b.L for b in self.path)

    @property
    def limits(self) -> Limits | None:
        """The trajectory's dependency and compute limits (an MH chain's; see limit.py)."""
        if not self.path or not self.transitions:
            return None
        cost = self.engine_cost
        return limits(self.path, cost.a + cost.b if cost else None, cost.best_rate if cost else None)

    @property
    def limit_share(self) -> float | None:
        """The binding limit over the time the session took: 1.0 would be the best any exact chain can do."""
        lim = self.limits
        best = lim.best if lim is not None else None
        return best / self.engine_time_s if best and self.engine_time_s else None

    @property
    def critical_path(self) -> CriticalPath | None:
        """Where the chain's time went, by cause (critpath.py); None without the timing it needs."""
        if self._crit[0] != self._events:
            self._crit = (self._events, self.timing.critical_path()
                          if not self.one_shot or self.population else None)
        return self._crit[1]

    @property
    def one_shot(self) -> bool:
        """A one-shot method's session (low temperature, best-of-N, PowerSMC, SPS, ...): no MH transitions."""
        return is_one_shot(self.params)

    @property
    def population(self) -> bool:
        """A population's session (tempering's replicas, resample-move's particles): its transitions are its
        draws' (the alpha replica's), or every member's where no chain's are (`MethodInfo.session_moves`);
        `member_moves` has each member's."""
        m = registry.find(self.params.get("sampler"))
        return m is not None and m.population

    @property
    def member_moves(self) -> list[tuple[int, int]]:
        """A population's MH transitions per member, and how many accepted ([] for one chain)."""
        return self.info.member_moves()

    @property
    def streaming(self) -> bool:
        """The streaming rule's session: no proposal calls, only engine steps (per call: undefined)."""
        return self.params.get("prefetch") == PrefetchRule.STREAM and not self.one_shot

    @property
    def work_transitions(self) -> int:
        """The MH transitions the session's calls and time paid for: a population's every member's
        (`population_transitions`: tempering's R replicas share its calls), else its own `transitions`.  The
        throughput numbers (`requests_realized`, per call, per second) count these, so that a tempering
        session's time is not charged to its alpha replica's transitions alone."""
        moves = self.member_moves if self.population else []
        return sum(n for n, _ in moves) if moves else self.transitions

    @property
    def transitions_per_call(self) -> float:
        return self.work_transitions / self.calls if self.calls else 0.0

    @property
    def time_per_call_s(self) -> float:
        return self.call_time_s / self.calls if self.calls else 0.0

    @property
    def transitions_per_s(self) -> float:
        return self.work_transitions / self.wall_s if self.wall_s else 0.0

    @property
    def wall_per_transition_s(self) -> float:
        return self.wall_s / self.work_transitions if self.work_transitions else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.transitions if self.transitions else 0.0

    @property
    def wasted_share(self) -> float:
        return 1.0 - self.used_tokens / self.proposal_tokens if self.proposal_tokens else 0.0

    @property
    def mean_live(self) -> float | None:
        return self.live_area / self.live_span if self.live_span else None

    @property
    def speedup_unavailable(self) -> str | None:
        """Why there is no speedup estimate (None: there is one)."""
        if self.params.get("prefetch") == PrefetchRule.NONE:
            return "this is the sequential sampler, the baseline"
        method = registry.find(self.params.get("sampler"))
        if method is not None and method.speedup_unavailable is not None:
            return method.speedup_unavailable
        if not ((self.single_request_tokens or self.engine_cost is not None) and self.wall_s
                and self.sequential_tokens):
            return "not measured yet: it needs a single-request call"
        return None

    def _per_token_s(self) -> float:
        """Sequential PowerMH's time per decoded token, from this session's single-request calls."""
        if self.single_request_tokens:
            return self.single_request_s / self.single_request_tokens
        # every extension decoded beside proposals: one request's step time as the engine learned it
        assert self.engine_cost is not None
        return self.engine_cost.a + self.engine_cost.b

    @property
    def speedup_estimate(self) -> float | None:
        """Estimated sequential time / this session's wall_s, both from the start, extensions included
        (see the module docstring)."""
        if self.speedup_unavailable is not None:
            return None
        return (self.sequential_tokens + self.extend_tokens) * self._per_token_s() / self.wall_s

    @property
    def speedup_transitions(self) -> float | None:
        """The same estimate over the transitions alone (extensions left out on both sides)."""
        if self.speedup_unavailable is not None or not self.transition_time_s:
            return None
        return self.sequential_tokens * self._per_token_s() / self.transition_time_s

    @property
    def eps_certain_share(self) -> float:
        n = sum(self.eps_counts.values())
        return (self.eps_counts[ACCEPT] + self.eps_counts[REJECT]) / n if n else 0.0

    def _limit_dict(self) -> dict:
        return _limit_fields(self.limits, self.limit_share)

    def _members_dict(self) -> dict:
        """A population's members' MH transitions (per member, from 1 in the list's order: tempering's levels
        from the lowest exponent, resample-move's particles) and all of them together."""
        moves = self.member_moves
        if not moves:
            return {}
        n, a = sum(m for m, _ in moves), sum(k for _, k in moves)
        return {"member_transitions": [m for m, _ in moves], "member_accepted": [k for _, k in moves],
                "population_transitions": n, "population_acceptance_rate": a / n if n else None}

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "text": self.text,
            "tokens": list(self.tokens),
            "status": self.status,
            "calls": None if self.streaming else self.calls,
            "extend_calls": self.extend_calls,
            "transitions": self.transitions,
            "transitions_per_call": None if self.streaming else self.transitions_per_call,
            "time_per_call_s": None if self.streaming else self.time_per_call_s,
            "call_time_s": self.call_time_s,
            "extend_time_s": self.extend_time_s,
            "wall_s": self.wall_s,
            "transition_time_s": self.transition_time_s,
            "wall_per_transition_s": self.wall_per_transition_s,
            "transitions_per_s": self.transitions_per_s,
            "speedup_estimate": self.speedup_estimate,
            "speedup_transitions": self.speedup_transitions,
            "time_to_first_transition_s": self.first_transition_s,
            "acceptance_rate": self.acceptance_rate,
            "eps_certain_share": self.eps_certain_share,
            "eps_counts": dict(self.eps_counts),
            "scored_eps_counts": dict(self.scored_counts),
            "requests_issued": self.requests_issued,
            "requests_realized": self.work_transitions,
            "requests_aborted": self.requests_aborted,
            "tokens_generated": self.tokens_generated,
            "engine_steps": self.engine_steps,
            "proposal_tokens": self.proposal_tokens,
            "used_tokens": self.used_tokens,
            "wasted_share": self.wasted_share,
            "mean_live_requests": self.mean_live,
            **self._limit_dict(),
            **({"critical_path": cp.to_dict()} if (cp := self.critical_path) is not None else {}),
            "answer_loglik": self.answer_loglik,
            "answer_confidence": self.answer_confidence,
            **self._members_dict(),
            **self.info.to_dict(),
            "rounds": self.rounds,
            "elapsed_s": self.elapsed_s,
            "params": self.params,
            **({"chain": self.chain, "chains": self.chains, "chain_group": self.group} if self.chains > 1 else {}),
            **({"error": self.error} if self.error else {}),
            **({"damaged_lines": list(self.damaged_lines)} if self.damaged_lines else {}),
        }


def _defined(x: float) -> float | None:
    """A number of eqs. 21-22, None where it is undefined (an empty response: NaN)."""
    return None if math.isnan(x) else x


def _limit_fields(lim: Limits | None, share: float | None) -> dict:
    if lim is None:
        return {}
    return {"dependency_limit_steps": lim.steps, "dependency_limit_s": lim.seconds,
            "compute_limit_s": lim.compute_seconds, "limit_s": lim.best, "limit_share": share}


def summarize(events) -> SessionSummary:
    """Every number of a session, folded from its events (a trace's, or a run's as they came)."""
    s = SessionSummary()
    for ev in events:
        s.update(ev)
    return s
