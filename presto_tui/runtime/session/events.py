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
    # "extend", "propose", or "extend-ahead": the block's extension, decoded while the previous block
    # still ran (streaming); its wall_s is only the time the chain waited for it after that block ended
    purpose: str
    requests: int
    tokens: int
    wall_s: float


@dataclass(frozen=True)
class BlockStart:
    block: int
    L: int  # generated tokens before the block
    T: int  # after it
    tokens: tuple[int, ...]  # the block's new tokens (the extension, alg. 1 line 2)


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
    log-target alpha log p0(x), the length-normalised log-likelihood (paper eq. 21) and
    confidence (eq. 22, minus the mean entropy of p0), whether it accepted, and the first
    generated position where the state differs from the block's start (T: nowhere)."""

    block: int
    k: int
    accepted: bool
    log_target: float
    loglik: float
    confidence: float
    first_diff: int


@dataclass(frozen=True)
class Sample:
    """A baseline's finished sample (low temperature: the one; best-of-N: one of N), stopped at EOS."""

    index: int
    tokens: tuple[int, ...]
    logq: float  # sum of log q_tau over its tokens: the distribution it was sampled from
    logp: float  # sum of log p0
    loglik: float  # eq. 21: log p0 per token
    confidence: float  # eq. 22: minus the mean entropy of p0
    clock: float  # engine time since the session started, when it finished


@dataclass(frozen=True)
class SmcStep:
    """One PowerSMC block (Azizi et al. 2026, appendix E.8): each particle's new tokens, the log
    weights after the block, the effective sample size, and what resampling did."""

    step: int
    t: int  # tokens grown per particle so far (the global time)
    exponent: float  # a(t): the target at this time is p0^a(t)
    tokens: tuple[tuple[int, ...], ...]  # per particle, this block's tokens (none once it stopped at EOS)
    log_weights: tuple[float, ...]  # unnormalised, after the block and before resampling
    ess: float  # (sum w)^2 / sum w^2 of those weights
    resampled: bool  # ESS fell below half the particles: systematic resampling
    parents: tuple[int, ...]  # particle i continues from particle parents[i] (the identity without resampling)
    wall_s: float  # the block's engine time


@dataclass(frozen=True)
class SpsStep:
    """One step of Scalable Power Sampling (Ji et al. 2026; runtime/samplers/sps.py): the candidate
    chunks, the numbers their conditional was estimated from, and the chunk drawn.  Per candidate, in
    the step's order (by log p0, most likely first)."""

    step: int
    position: int  # tokens generated before this step
    candidates: tuple[tuple[int, ...], ...]  # each candidate chunk's tokens
    log_p0: tuple[float, ...]  # log p0 of each chunk given the prefix
    log_weights: tuple[tuple[float, ...], ...]  # its rollouts' log p0^alpha(y) - log q(y); () if it has no future
    log_zeta: tuple[float, ...]  # log zeta_hat (eq. 3; 0.0: no future, zeta = 1 exactly)
    plain: tuple[float, ...]  # the plug-in estimate (eq. 4)
    jackknife: tuple[float, ...]  # the jackknife estimate (eq. 5), before clipping; () when not used
    probs: tuple[float, ...]  # what the chunk was drawn from
    chosen: int
    u: float  # the uniform it was drawn with (inverse CDF over `probs`)
    draws: int  # chunks drawn from q_tau that the candidates were chosen from
    reused: int  # of those, continuations of draws that began with the previous step's chunk
    wall_s: float  # the step's engine time (its draws and its rollouts)


@dataclass(frozen=True)
class Choice:
    """The sample or particle a baseline answers with."""

    index: int
    rule: str  # how it was chosen, in words
    scores: tuple[float, ...]  # per candidate: best-of-N's ranking scores; PowerSMC's final log weights
    loglik: float = math.nan  # the answer's eq. 21 (log p0 per token) and eq. 22 (minus the mean entropy)
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
    # the answer's eqs. 21-22 under p0, over its terminal response (up to and excluding the first EOS;
    # metrics.answer_quality); NaN for an empty response, None where unknown (a trace before schema 1.4)
    loglik: float | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class SessionError:
    message: str
    kind: str  # "engine", "input", "internal", ...


Event = (SessionStart | ModelCall | BlockStart | RoundDone | Transition | RequestEvent | DecisionWalked | Sample
         | SmcStep | SpsStep | Choice | EngineCost | SessionEnd | SessionError | InFlight | LiveTree)
TRANSIENT = (InFlight, LiveTree)
