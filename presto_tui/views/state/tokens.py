"""A scored node's MH ratio split by token (pure): which tokens drive the decision.

A node's decision resamples the state x from its cut c on: the proposal y and
the suffix x_{c:T} it would replace have the same length (proposals run to the
horizon), so position i of one stands against position i of the other.  Per
position the split lists both tokens with their log p0 and log q_tau, and the
running sums of the two terms every sampler's ratio starts from:

    target   = alpha * (log p0(y) - log p0(x_{c:T}))   (sums over the tokens)
    proposal = log q(x_{c:T}) - log q(y)

Their totals are the node's recorded terms: exactly for a live tree (the same
values summed with `math.fsum`, as core.mh.score sums them), within the
rounding of the trace's 4-decimal values for a replayed one.  What the split
does not cover is said, not hidden: EntropyCut's reverse-move term weighs every
position's entropy, which is not recorded per token; MultiTryMH's proposal term
is the mixture over temperatures, log Q(x) - log Q(y), which does not split by
token.  Traces recorded before schema 1.2 hold no per-token values at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from presto_tui.api.events import NodeView, RoundTree, Score
from presto_tui.logs.schema import PER_TOKEN_DECIMALS

NOT_RECORDED = "per-token values not recorded in this trace"
ROUNDING = 0.5 * 10.0 ** -PER_TOKEN_DECIMALS  # the most a recorded value is off from the engine's


@dataclass(frozen=True)
class TokenRow:
    pos: int  # position in the response (0-based over generated tokens)
    y: int  # the proposal's token here
    y_logp: float
    y_logq: float
    x: int  # the token of the state it would replace
    x_logp: float
    x_logq: float
    target: float  # the target term summed up to and including this position
    proposal: float | None  # the proposal term so far (None where it does not split by token)
    delta: float  # this position's share of log r: its target share, plus its proposal share where it splits


@dataclass(frozen=True)
class Check:
    """A total from the tokens against the node's recorded term."""

    name: str
    total: float
    recorded: float
    tolerance: float  # the rounding of the recorded values can account for this much

    @property
    def agrees(self) -> bool:
        if not (math.isfinite(self.total) and math.isfinite(self.recorded)):
            return self.total == self.recorded or (math.isnan(self.total) and math.isnan(self.recorded))
        return abs(self.total - self.recorded) <= self.tolerance + 1e-9 * max(1.0, abs(self.recorded))


@dataclass(frozen=True)
class TokenSplit:
    node: NodeView
    score: Score
    cut: int
    T: int
    alpha: float
    ratio: RatioKind  # which terms its MH ratio has (read from the score itself)
    rows: tuple[TokenRow, ...]
    recorded: bool  # the tree holds per-token values
    checks: tuple[Check, ...]  # empty when nothing is recorded
    notes: tuple[str, ...]  # what the split covers and what it does not

    def drivers(self, n: int = 3) -> list[int]:
        """Row indices of the (at most) n positions with the largest share of log r, largest first;
        a share that rounds to 0.000 drives nothing."""
        if not self.recorded:
            return []
        moving = [i for i, r in enumerate(self.rows) if math.isfinite(r.delta) and abs(r.delta) >= 5e-4]
        return sorted(moving, key=lambda i: -abs(self.rows[i].delta))[:n]


class RatioKind(StrEnum):
    """Which terms a score's MH ratio has, read from the score (as the inspector reads it: state/ratio.py):
    the plain ratio of a uniform cut, with a state-dependent cut law's reverse-move term, or a
    multiple-try ratio over candidates."""

    PLAIN = "plain MH ratio"
    REVERSE_MOVE = "MH ratio + reverse move"
    MULTIPLE_TRY = "multiple-try MH ratio"


def ratio_of(sc: Score) -> RatioKind:
    if sc.candidates:
        return RatioKind.MULTIPLE_TRY
    return RatioKind.REVERSE_MOVE if sc.log_cut_x or sc.log_cut_y else RatioKind.PLAIN


def token_split(tree: RoundTree, v: NodeView, alpha: float) -> TokenSplit | None:
    """The split of node v's ratio; None for a node without a score or without a proposal (or, in a
    damaged trace, a proposal that does not replace the state's suffix token for token)."""
    sc, d = v.score, v.decision
    if sc is None or d is None or d.request is None:
        return None
    req = tree.requests[d.request]
    if req.done is not None:
        return None  # not finished: scored only once it is
    state = tree.state_of(v.src)
    cut, y = d.cut, req.proposal
    if len(y.tokens) != state.T - cut or len(y.logp) != len(y.tokens):
        return None  # (a trace whose proposal does not cover the state's suffix: nothing to split token by token)
    ratio = ratio_of(sc)
    per_token_q = ratio is not RatioKind.MULTIPLE_TRY
    x_q, x_p = state.logq[cut:], state.logp[cut:]
    recorded = not any(math.isnan(a) for a in (*y.logp, *x_p))
    rows, target, proposal = [], 0.0, 0.0
    for i, tok in enumerate(y.tokens):
        d_target = alpha * (y.logp[i] - x_p[i])
        d_proposal = x_q[i] - y.logq[i]
        target += d_target
        proposal += d_proposal
        rows.append(TokenRow(cut + i, tok, y.logp[i], y.logq[i], state.tokens[cut + i], x_p[i], x_q[i], target,
                             proposal if per_token_q else None, d_target + (d_proposal if per_token_q else 0.0)))
    checks: list[Check] = []
    notes: list[str] = []
    n = len(y.tokens)
    if recorded:
        # each recorded value is off by at most ROUNDING: a sum of 2n of them by 2n times that
        checks.append(Check("target", alpha * (math.fsum(y.logp) - math.fsum(x_p)), sc.log_target,
                            alpha * 2 * n * ROUNDING))
        if per_token_q:
            checks.append(Check("proposal", math.fsum(x_q) - math.fsum(y.logq), sc.log_proposal, 2 * n * ROUNDING))
    else:
        notes.append(NOT_RECORDED + " (recorded from schema 1.2 on): tokens only")
    if ratio is RatioKind.REVERSE_MOVE:
        notes.append("The cut law's reverse-move term log λ(c; y) - log λ(c; x) = "
                     f"{sc.log_cut_y - sc.log_cut_x:.3f} weighs the entropy at every position, which is not "
                     "recorded per token: it is the recorded value")
    elif ratio is RatioKind.MULTIPLE_TRY:
        notes.append("Multiple-try MH: the target column adds up to the selected candidate's target term; its proposal "
                     "term log Q(x) - log Q(y) is a mixture over temperatures that does not split by token, so "
                     "log q is shown at the temperature each token was drawn at and Δ is the target share alone; "
                     "log r = log W - log(1 + W - w_J) comes from every candidate's weight (the inspector's table)")
    return TokenSplit(v, sc, cut, tree.T, alpha, ratio, tuple(rows), recorded, tuple(checks), tuple(notes))
