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
from presto_tui.api.params import applies, param_table, sampler_table
from presto_tui.views.state.evolution import PLAIN_DIFF, TEXT_BUDGET, DiffStyles, Writer, clip
from presto_tui.views.state.reducer import SessionView

# the parameters in the specification's order, then anything else a trace holds


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


def _reads(name: str, session: SessionView) -> bool:
    """Whether `session`'s sampler and rule read parameter `name` (a name the specification does not
    know, from an older trace: shown as it is)."""
    table = param_table()
    return name not in table or applies(table[name], session.params)


def param_rows(a: SessionView, b: SessionView) -> list[ParamRow]:
    """Every parameter that either session's sampler and rule read, then the backend, model and
    prompt.  A session that does not read one shows - (a baseline has no K, budget or prefetch
    rule): it is never "the same in both" because both traces hold the default."""
    keys = [k for k in (p.name for p in sampler_table()) if k in a.params or k in b.params]
    keys += sorted((set(a.params) | set(b.params)) - set(keys))
    # only what either session's sampler and rule read (`--beta` changes nothing in a PowerMH chain)
    keys = [k for k in keys if _reads(k, a) or _reads(k, b)]
    shown = lambda k, s: _shown(s.params.get(k)) if _reads(k, s) else "-"
    rows = [ParamRow(k, shown(k, a), shown(k, b)) for k in keys]
    for name, get in (("backend", lambda s: s.start.backend), ("model", lambda s: s.start.model),
                      ("prompt", lambda s: s.start.prompt.replace("\n", " ⏎ "))):
        rows.append(ParamRow(name, _shown(get(a)), _shown(get(b))))
    return rows


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def answer_tokens(s: SessionView) -> int:
    """The answer's length: the response a person gets, up to its first EOS (every method's)."""
    return len(cut_at_eos(s.summary.tokens, s.start.backend_info.get("eos_id")))


# (name, value of an MH chain's summary): what the stats panel and `stats` show of a chain
CHAIN_OUTCOMES = (
    ("transitions", lambda m: str(m.transitions)),
    ("acceptance", lambda m: f"{m.acceptance_rate:.2f}"),
    ("model calls", lambda m: str(m.calls)),
    ("tr/call", lambda m: f"{m.transitions_per_call:.2f}" if m.calls else "-"),
    ("tr/s", lambda m: f"{m.transitions_per_s:.2f}"),
    ("speedup est.", lambda m: "-" if m.speedup_estimate is None else f"{m.speedup_estimate:.2f}x"),
)


def outcome_rows(a: SessionView, b: SessionView) -> list[ParamRow]:
    """What each session came to, as `stats` tables it: an MH chain's transitions, acceptance and
    speed (- for a baseline, which makes no transitions), then every session's time, tokens, answer
    and its log-likelihood per token and confidence (eqs. 21-22), and what a baseline drew."""
    out = [ParamRow("status", a.status, b.status)]
    if a.method_run is None or b.method_run is None:
        for name, get in CHAIN_OUTCOMES:
            out.append(ParamRow(name, *(get(s.summary) if s.method_run is None else "-" for s in (a, b))))
    for name, of in (("time s", lambda s: f"{s.summary.wall_s:.2f}"),
                     ("tokens generated", lambda s: str(s.summary.tokens_generated)),
                     ("answer tokens", lambda s: str(answer_tokens(s))),
                     ("log-lik/token", lambda s: _opt(s.summary.answer_loglik, ".3f")),
                     ("confidence", lambda s: _opt(s.summary.answer_confidence, ".3f"))):
        out.append(ParamRow(name, of(a), of(b)))
    if a.method_run is not None or b.method_run is not None:
        out.append(ParamRow("drawn", *(s.summary.info.drawn() if s.method_run is not None else "-"
                                       for s in (a, b))))
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
