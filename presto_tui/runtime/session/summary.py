"""Per-session metrics folded from events (paper appendix D.2).

One reducer serves the CLI summary, trace statistics and the TUI's stats
panel, so a number means the same thing everywhere.

- calls: proposal calls (one per sequential step or PreSTO round); the call
  that extends the state by a block is the same for every sampler and is
  counted apart (`extend_calls`).
- transitions_per_call = transitions / calls; time_per_call_s = mean proposal
  call time; call_time_s = their sum (the numerator/denominator of eq. 20).
- eps_certain_share: share of realized MH decisions that were epsilon-certain;
  scored_counts: epsilon classes of every scored (decision, state) pair.
- requests_issued vs requests_realized: speculation sent vs used by the walk.
- tokens: the chain's current state (generated tokens), after every event.
- speedup_estimate: sequential time / this session's time for the same
  transitions.  Sequential PowerMH would make one single-request call per
  realized transition, decoding T - c tokens; its cost per token is measured
  from this session's own single-request calls (every block's extension, and
  any one-request proposal call), so with a budget of 1 the estimate is about
  1 by construction.  `bench` measures the sequential sampler instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN
from presto_tui.runtime.session.events import (
    BlockStart,
    Event,
    ModelCall,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
)


@dataclass
class SessionSummary:
    params: dict = field(default_factory=dict)
    prompt: str = ""
    calls: int = 0
    extend_calls: int = 0
    call_time_s: float = 0.0
    extend_time_s: float = 0.0
    transitions: int = 0
    accepted: int = 0
    eps_counts: dict = field(default_factory=lambda: {ACCEPT: 0, REJECT: 0, UNCERTAIN: 0})
    scored_counts: dict = field(default_factory=lambda: {ACCEPT: 0, REJECT: 0, UNCERTAIN: 0})
    requests_issued: int = 0
    tokens_generated: int = 0
    rounds: int = 0
    acceptance_by_round: list = field(default_factory=list)
    sequential_tokens: int = 0  # what sequential PowerMH would decode for the realized transitions
    single_request_s: float = 0.0  # time and tokens of this session's single-request calls
    single_request_tokens: int = 0
    text: str = ""
    tokens: tuple = ()
    status: str = "running"  # running, done, cancelled, error
    error: str = ""

    def update(self, ev: Event) -> SessionSummary:
        if isinstance(ev, SessionStart):
            self.params, self.prompt = dict(ev.params), ev.prompt
        elif isinstance(ev, ModelCall):
            self.tokens_generated += ev.tokens
            if ev.requests == 1:
                self.single_request_s += ev.wall_s
                self.single_request_tokens += ev.tokens
            if ev.purpose == "extend":
                self.extend_calls += 1
                self.extend_time_s += ev.wall_s
            else:
                self.calls += 1
                self.call_time_s += ev.wall_s
                self.requests_issued += ev.requests
        elif isinstance(ev, BlockStart):
            self.tokens = self.tokens + tuple(ev.tokens)
        elif isinstance(ev, RoundDone):
            tree = ev.tree
            self.rounds += 1
            acc = 0
            for s in tree.steps:
                sc = tree.scores[(s.decision, s.src)]
                self.eps_counts[sc.eps_class] += 1
                self.sequential_tokens += tree.T - tree.decisions[s.decision].cut
                acc += s.accepted
            self.tokens = tree.final_state.tokens
            for sc in tree.scores.values():
                self.scored_counts[sc.eps_class] += 1
            self.transitions += tree.transitions
            self.accepted += acc
            self.acceptance_by_round.append(acc / max(1, tree.transitions))
        elif isinstance(ev, SessionEnd):
            self.status, self.text, self.tokens = ev.reason, ev.text, tuple(ev.tokens)
        elif isinstance(ev, SessionError):
            self.status, self.error = "error", ev.message
        return self

    @property
    def transitions_per_call(self) -> float:
        return self.transitions / self.calls if self.calls else 0.0

    @property
    def time_per_call_s(self) -> float:
        return self.call_time_s / self.calls if self.calls else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.transitions if self.transitions else 0.0

    @property
    def speedup_estimate(self) -> float | None:
        """Estimated sequential time / this session's call time (see the module docstring)."""
        if not (self.single_request_tokens and self.call_time_s and self.sequential_tokens):
            return None
        per_token = self.single_request_s / self.single_request_tokens
        return self.sequential_tokens * per_token / self.call_time_s

    @property
    def eps_certain_share(self) -> float:
        n = sum(self.eps_counts.values())
        return (self.eps_counts[ACCEPT] + self.eps_counts[REJECT]) / n if n else 0.0

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "text": self.text,
            "tokens": list(self.tokens),
            "status": self.status,
            "calls": self.calls,
            "extend_calls": self.extend_calls,
            "transitions": self.transitions,
            "transitions_per_call": self.transitions_per_call,
            "time_per_call_s": self.time_per_call_s,
            "call_time_s": self.call_time_s,
            "extend_time_s": self.extend_time_s,
            "acceptance_rate": self.acceptance_rate,
            "eps_certain_share": self.eps_certain_share,
            "eps_counts": dict(self.eps_counts),
            "scored_eps_counts": dict(self.scored_counts),
            "requests_issued": self.requests_issued,
            "requests_realized": self.transitions,
            "tokens_generated": self.tokens_generated,
            "speedup_estimate": self.speedup_estimate,
            "rounds": self.rounds,
            "params": self.params,
            **({"error": self.error} if self.error else {}),
        }


def summarize(events) -> SessionSummary:
    s = SessionSummary()
    for ev in events:
        s.update(ev)
    return s
