"""The typed events a session emits: the only thing traces, the TUI and progress consume.

Round rules emit `ModelCall` and `RoundDone` per round.  The streaming rule has
no rounds: it emits a `RequestEvent` when a request is issued, finishes or is
aborted, a `DecisionWalked` for every decision the walker takes, and a
`RoundDone` per epoch (the decisions walked from one state, up to and including
the accept that moves it) whose tree is the epoch's speculation tree, so that
everything that reads rounds (stats, replay, the app) reads epochs alike.

`InFlight` and `LiveTree` are transient: they show work in progress to a person
(at most ten a second) and are never written to a trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from presto_tui.runtime.prefetch.tree import RoundTree


@dataclass(frozen=True)
class SessionStart:
    session_id: str
    tool_version: str
    backend: str
    model: str
    params: dict
    prompt: str
    prompt_ids: tuple[int, ...]
    started_at: float  # unix time
    backend_info: dict = field(default_factory=dict)
    # --chains M: this session is chain `chain` of `chains` run on one prompt, all sharing `group`
    # (each with its own seed, randomness.chain_seed); a single chain is chain 0 of 1, group ""
    chain: int = 0
    chains: int = 1
    group: str = ""


@dataclass(frozen=True)
class ModelCall:
    block: int
    round: int  # -1 for the call that extends the state by a block
    # "extend", "propose", "extend-ahead": the block's extension, decoded while the previous block
    # still ran (streaming), its wall_s only the time the chain waited for it after that block ended; or
    # "extend-overlap": the block's extension, its first proposals decoding beside it from the block's
    # beginning (streaming), its wall_s the time from then to its arrival
    purpose: str
    requests: int
    tokens: int
    wall_s: float
    # engine time since the session started (schema 1.3; None in older traces): when its requests were
    # submitted, and when it finished (an extension decoded ahead: when it arrived, maybe before its block)
    start: float | None = None
    clock: float | None = None


@dataclass(frozen=True)
class BlockStart:
    block: int
    L: int  # generated tokens before the block
    T: int  # after it
    tokens: tuple[int, ...]  # the block's new tokens (the extension, alg. 1 line 2)
    # engine time from which the block's decisions could be requested (schema 1.3): its extension's
    # arrival, or the previous block's end where the extension overlaps the block's first proposals
    open: float | None = None


@dataclass(frozen=True)
class RoundDone:
    block: int
    round: int
    k_before: int
    k_after: int
    steps: int  # K
    tree: RoundTree
    call_wall_s: float  # the round's model call; an epoch's time from its first decision to its last
    sampler_s: dict = field(default_factory=dict)  # the sampler's own time: plan, finish (s)
    clock: float | None = None  # engine time since the session started, when it ended


@dataclass(frozen=True)
class Transition:
    """An MH chain's state after transition k of a block, as MCMC diagnostics read it: the
    log-target alpha log p0(x) of the whole state, the length-normalised log-likelihood (paper
    eq. 21) and confidence (eq. 22, minus the mean entropy of p0) of the response it gives (up to
    its first EOS: `metrics.response_scores`; NaN for an empty one), whether it accepted, and the
    first generated position where the state differs from the block's start (T: nowhere)."""

    block: int
    k: int
    accepted: bool
    log_target: float
    loglik: float
    confidence: float
    first_diff: int


@dataclass(frozen=True)
class Sample:
    """A one-shot method's finished sample (low temperature: the one; best-of-N: one of N), stopped at EOS.

    `index`: its place among the session's samples; `tokens`: its tokens, EOS included where it
    stopped there (`cut_at_eos` gives the response); `logq`: the sum of log q_tau over its tokens
    (the distribution it was drawn from); `logp`: the sum of log p0 (its log-likelihood);
    `loglik`: log p0 per token of its response before EOS (the paper's eq. 21; NaN for an empty
    response); `confidence`: minus the mean entropy of p0 over that response (eq. 22); `clock`:
    the engine time since the session started, when it finished.
    """

    index: int
    tokens: tuple[int, ...]
    logq: float  # sum of log q_tau over its tokens: the distribution it was sampled from
    logp: float  # sum of log p0
    loglik: float  # eq. 21 of its response (before EOS): log p0 per token; NaN for an empty one
    confidence: float  # eq. 22 of its response: minus the mean entropy of p0
    clock: float  # engine time since the session started, when it finished


@dataclass(frozen=True)
class MethodEvent:
    """The base of a method's own events (PowerSMC's `SmcStep`, SPS's `SpsStep`, a plugin's): each is
    declared with its trace encoding in its method's module (`Method.events`)."""


@dataclass(frozen=True)
class Choice:
    """The sample or particle a one-shot method answers with."""

    index: int
    rule: str  # how it was chosen, in words
    scores: tuple[float, ...]  # per candidate: best-of-N's ranking scores; PowerSMC's final log weights
    loglik: float = math.nan  # the answer's eq. 21 (log p0 per token) and eq. 22 (minus the mean entropy),
    # over its response (before EOS; NaN for an empty one)
    confidence: float = math.nan


class RequestKind(StrEnum):
    """What happened to a streaming request group: the one spelling, in the event, the trace (whose
    `request` lines hold the values) and the summary.  A str, so a trace's strings read unchanged."""

    ISSUED = "issued"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(frozen=True)
class RequestEvent:
    """Streaming: a request group (MultiTryMH: all candidates of a decision) issued, finished or aborted."""

    kind: RequestKind
    block: int
    request: int  # session-unique id of the group
    decision: int
    cut: int
    size: int  # requests in the group
    tokens: int  # finished: tokens generated; aborted: tokens decoded before the abort (a speculated
    # extension that finished for a state the block did not end in is `aborted` at the block's end: dropped)
    clock: float  # engine time since the session started
    live: int  # this chain's live requests after the event
    purpose: str = "propose"  # or "extend": the next block's extension, speculated (decision = K)
    # issued: seconds its want waited, seen by the policy and refused, before it was issued, by why
    # ("budget": no slot under the cap; "ranked": the cost rule; schema 1.3)
    waited: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DecisionWalked:
    """Streaming: the walker took decision k with the proposal of group `request`."""

    block: int
    k: int
    cut: int
    request: int
    accepted: bool
    accept_prob: float
    eps_class: str
    clock: float


@dataclass(frozen=True)
class EngineCost:
    """What an engine step cost while the session ran (the engine loop's online fit, `session.cost`):
    a step with n live requests about a + b n seconds.  Written before the session's end; the
    dependency and compute limits of `stats` and the app read it from the trace."""

    a: float
    b: float
    steps: int  # engine steps measured
    best_n: int  # live requests at the best measured throughput
    best_rate: float  # requests decoded per second there (tokens per second)


@dataclass(frozen=True)
class EngineSteps:
    """The engine steps since the session's previous `EngineSteps` (schema 1.3): when each began and
    ended (engine time since the session started) and how many requests the engine had live.  Chains
    write them before each round or epoch and before their end; the critical path reads them."""

    start: tuple[float, ...]
    end: tuple[float, ...]
    live: tuple[int, ...]


@dataclass(frozen=True)
class BarrierMet:
    """A population's phase ended (session/population.py): every member met the barrier (block, k), or,
    `final`, ended.  The phase ran from `start` to `end` (the crossing), on the session's clock; each
    member arrived at `arrived` (reached the barrier, or ended) and then waited for the slowest.  `paths`:
    each member's critical path through the phase by cause (critpath.py; from `start` to its arrival,
    its decoding all counted as `width`, of which `tokens` decoded on the path are the limit's at the
    engine's step cost), None where its events lacked the timing.  Population's critical path reads them."""

    step: int  # the phase, from 1
    block: int
    k: int
    final: bool
    start: float
    end: float
    arrived: tuple[float, ...]
    paths: tuple[dict[str, float], ...] | None
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class InFlight:
    """Transient: the round in flight (requests issued, tokens decoded so far)."""

    requests: int
    decoded: int
    total: int


@dataclass(frozen=True)
class LiveTree:
    """Transient: the streaming epoch in progress, as its tree so far."""

    block: int
    k_before: int
    k_now: int
    tree: RoundTree


@dataclass(frozen=True)
class SessionEnd:
    reason: str  # "done" or "cancelled"
    tokens: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class SessionError:
    message: str
    kind: str  # "engine", "input", "internal", ...


@dataclass(frozen=True)
class Damaged:
    """Not an event of a session but a reader's mark in its place: lines of the session's trace that
    could not be read and were skipped (`--on-bad-lines warn|skip`).  Never written to a trace; the
    summary says the session is damaged from here on, never silently shorter."""

    lines: tuple[int, ...]


@dataclass(frozen=True)
class MemberEvent:
    """An event of a population's member (session/population.py: a replica's or a particle's MH chain), as
    the member emitted it: its rounds or epochs, transitions, requests, blocks and end, so that each member's
    chain replays as a session of its own.  The first of each member's is its `SessionStart` (its
    parameters as it began).  The population's own numbers never read them: they are the member's."""

    member: int  # from 0, the method's numbering (tempering: the level, 0 the lowest exponent)
    event: Event


Event = (SessionStart | ModelCall | BlockStart | RoundDone | Transition | RequestEvent | DecisionWalked | Sample
         | MethodEvent | Choice | EngineCost | EngineSteps | BarrierMet | SessionEnd | SessionError | InFlight
         | LiveTree | Damaged | MemberEvent)
TRANSIENT = (InFlight, LiveTree)
