"""Two sessions side by side (pure): their parameters, acceptance curves and answers.

The answers are diffed token by token (difflib's longest matching blocks over
token ids), so two answers that share words in different places show each
shared run once; the text is written with the answer-evolution's own writer
(evolution.py: visible text, a character budget) and styles.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from presto_tui.api.events import Pieces, cut_at_eos
from presto_tui.api.params import PARAMS, SAMPLER_PARAMS
from presto_tui.views.state.evolution import PLAIN_DIFF, TEXT_BUDGET, DiffStyles, Writer, clip
from presto_tui.views.state.reducer import SessionView

# the parameters in the specification's order, then anything else a trace holds
PARAM_ORDER = tuple(p.name for p in SAMPLER_PARAMS)


@dataclass(frozen=True)
class ParamRow:
    name: str
    a: str
    b: str

    @property
    def differs(self) -> bool:
        return self.a != self.b


def _shown(v: object) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else clip(str(v), 60)


def param_rows(a: SessionView, b: SessionView) -> list[ParamRow]:
    """Every parameter that either session's sampler and rule read (a missing one shows as -), then
    the backend, model and prompt."""
    keys = [k for k in PARAM_ORDER if k in a.params or k in b.params]
    keys += sorted((set(a.params) | set(b.params)) - set(keys))
    # only what either session's sampler and rule read (`--beta` changes nothing in a PowerMH chain)
    keys = [k for k in keys if k not in PARAMS or PARAMS[k].applies(a.params) or PARAMS[k].applies(b.params)]
    rows = [ParamRow(k, _shown(a.params.get(k)), _shown(b.params.get(k))) for k in keys]
    for name, get in (("backend", lambda s: s.start.backend), ("model", lambda s: s.start.model),
                      ("prompt", lambda s: s.start.prompt.replace("\n", " ⏎ "))):
        rows.append(ParamRow(name, _shown(get(a)), _shown(get(b))))
    return rows


def outcome_rows(a: SessionView, b: SessionView) -> list[ParamRow]:
    """What each session came to: the numbers the stats panel shows."""
    out = []
    for name, get in (("status", lambda m: m.status), ("transitions", lambda m: str(m.transitions)),
                      ("acceptance", lambda m: f"{m.acceptance_rate:.2f}"),
                      ("model calls", lambda m: str(m.calls)),
                      ("tr/call", lambda m: f"{m.transitions_per_call:.2f}" if m.calls else "-"),
                      ("tr/s", lambda m: f"{m.transitions_per_s:.2f}"),
                      ("speedup est.", lambda m: "-" if m.speedup_estimate is None else f"{m.speedup_estimate:.2f}x")):
        out.append(ParamRow(name, get(a.summary), get(b.summary)))
    return out


def acceptance_curve(session: SessionView) -> list[float]:
    """The running acceptance rate after each transition of the session, from its rounds' walks
    (every round rule and streaming records them; the baselines make no transitions)."""
    out: list[float] = []
    accepted = 0
    for rd in session.rounds:
        for s in rd.tree.steps:
            accepted += s.accepted
            out.append(accepted / (len(out) + 1))
    return out


@dataclass(frozen=True)
class AnswerDiff:
    text: Text
    common: int  # tokens in runs both answers share
    only_a: int
    only_b: int

    @property
    def title(self) -> str:
        shared = f"{self.common} token{'' if self.common == 1 else 's'} shared"
        return f"diff: {shared} · struck: only in A ({self.only_a}) · underlined: only in B ({self.only_b})"


def answer_diff(a: Sequence[int], b: Sequence[int], pieces: Pieces, *, eos_a: int | None = None,
                eos_b: int | None = None, styles: DiffStyles = PLAIN_DIFF, budget: int = TEXT_BUDGET) -> AnswerDiff:
    """B's answer against A's (each up to its first EOS): A's tokens that B lacks struck through,
    B's tokens that A lacks underlined, shared runs plain."""
    ta, tb = cut_at_eos(a, eos_a), cut_at_eos(b, eos_b)
    text = Text()
    w = Writer(text, pieces, budget)
    common = only_a = only_b = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op == "equal":
            w.tokens(ta[i1:i2])
            common += i2 - i1
            continue
        w.tokens(ta[i1:i2], styles.removed)
        w.tokens(tb[j1:j2], styles.added)
        only_a += i2 - i1
        only_b += j2 - j1
    if not ta and not tb:
        w.note("(both answers are empty)")
    return AnswerDiff(text, common, only_a, only_b)
