"""A population's members as chains (pure; no Textual here): a tempering replica's or a resample-move
particle's records, one row per barrier or block, and every member's trace for the plots (`m`).

What a population's trace holds of a member is what its method records at its barriers: tempering's
`pt_step` gives each level (a replica, at its exponent) the state it holds after each barrier, its
log p0, the swap it proposed and its MH transitions and acceptances since the record before;
resample-move's `rm_step` gives each particle slot its extension, weight, parent and its moves'
transitions and acceptances per block.  The alpha replica's every transition is in the trace too (its
`transition` events: the session's draws).  From schema 1.4 every member's own events are recorded as
well (`member` lines: its rounds or epochs and every transition), folded into a session view of its own
(`SessionView.members`): its every transition is plotted, and its rounds open as any chain's (`r`).  A
trace written before shows a member at its barriers only.  Nothing is re-decided here: every number is
a recorded one.  Members and records count from 1 in every word shown (docs/numbering.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from presto_tui.api.events import Transition
from presto_tui.views.state.baseline import NO_ROUNDS, MethodRun, SmcRun, shares
from presto_tui.views.state.ppt import PptRun
from presto_tui.views.state.resample_move import RmRun

NO_MEMBER_ROUNDS = ("no rounds of its own: a population's are its members' (Enter on one, then r, where the trace "
                    "records them)")
MEMBERS_NOT_RECORDED = ("this trace does not record its members' own rounds (written before schema 1.4): a "
                        "member is shown at its barriers")


@dataclass(frozen=True)
class MemberRow:
    """One record of a member: the grid's column it is, and its cells as the member's table shows them."""

    column: int  # the grid's column (barrier or block, from 0)
    cells: tuple[str, ...]
    value: float | None  # what the member's plot draws at this record (None: nothing recorded)


@dataclass(frozen=True)
class MemberChain:
    """A member's chain as its records give it (see the module docstring)."""

    member: int  # the grid's member: a level (0: the lowest exponent) or a particle slot, from 0
    row: int  # its row in the grid (tempering's rows run from the alpha replica down)
    title: str  # "replica 4 of 4 (alpha 4, the alpha replica)"
    columns: tuple[str, ...]
    rows: tuple[MemberRow, ...]
    value_name: str  # what the plot's y is
    transitions: int  # its MH transitions over the session, and how many accepted
    accepted: int
    draws: tuple[Transition, ...] = ()  # every transition of its chain, where the trace records them
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.transitions if self.transitions else None


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def is_population(run: MethodRun | None) -> bool:
    """Whether a session's view is a population of MH chains, one a grid's row (tempering's replicas,
    resample-move's particles; PowerSMC's particles make no MH moves: a one-shot method's)."""
    return isinstance(run, (PptRun, RmRun))


def rounds_note(run: MethodRun | None) -> str:
    """What a session with a view of its own says where rounds are asked for."""
    return NO_MEMBER_ROUNDS if is_population(run) else NO_ROUNDS


def members(run: MethodRun) -> int:
    if isinstance(run, PptRun):
        return run.replicas
    if isinstance(run, SmcRun):
        return run.particles
    return 0


def member_of_row(run: MethodRun, row: int) -> int:
    """The member a grid's row shows (tempering: the alpha replica first)."""
    return run.level(row) if isinstance(run, PptRun) else row


def row_of_member(run: MethodRun, member: int) -> int:
    return run.level(member) if isinstance(run, PptRun) else member  # (the order reverses itself)


def answer_member(run: MethodRun) -> int:
    """The member the answer is: the alpha replica, or the particle the choice drew (0 before it)."""
    if isinstance(run, PptRun):
        return max(0, run.replicas - 1)
    return run.choice.index if run.choice is not None and 0 <= run.choice.index < members(run) else 0


def member_chain(run: MethodRun, member: int, events: list | tuple = (),
                 own: list | tuple | None = None) -> MemberChain:
    """Member `member`'s chain from its session's fold (`events`: the session's events, for the alpha
    replica's transitions; `own`: the member's own recorded events, None where the trace has none)."""
    if isinstance(run, PptRun):
        return _replica(run, member, events, own)
    assert isinstance(run, SmcRun)
    return _particle(run, member, own)


def _transitions(events: list | tuple) -> tuple[Transition, ...]:
    return tuple(e for e in events if isinstance(e, Transition))


def _own_notes(own: list | tuple | None) -> list[str]:
    if own is None:
        return [MEMBERS_NOT_RECORDED]
    return ["r: its own rounds (its epochs under the streaming rule), with the tree, the inspector, t and H"]


def _replica(run: PptRun, level: int, events: list | tuple, own: list | tuple | None) -> MemberChain:
    R = run.replicas
    rows = []
    for s, st in enumerate(run.steps):
        if not 0 <= level < len(st.holders):
            continue
        swap = run.swap_at(s, level)
        said = "-" if swap is None else f"{'⇅' if swap[2] else '×'} r{swap[0] + 1} A {swap[1]:.3f}"
        lp = st.log_p0[level]
        rows.append(MemberRow(s, ("end" if st.final else f"b{s + 1}", str(st.block + 1), str(st.k),
                                  f"{st.exponents[level]:.3g}", f"s{st.holders[level] + 1}", _num(lp),
                                  _num(st.exponents[level] * lp), str(st.transitions[level]),
                                  str(st.accepted[level]), said), lp if math.isfinite(lp) else None))
    alpha = level == R - 1
    a = run.exponents[level] if 0 <= level < R else float("nan")
    draws = _transitions(own if own is not None else events if alpha else ())  # (the alpha's: the session's)
    notes = ["s n: the state replica n began with; ⇅ swapped with, × refused"]
    if alpha:
        notes.append("its every transition is the session's draws (transition events): the plot on the right")
    elif own is not None:
        notes.append("its every transition: the plot on the right")
    notes += _own_notes(own)
    return MemberChain(level, run.level(level), f"replica {level + 1} of {R} (alpha {a:.3g}"
                       + (", the alpha replica: the answer's)" if alpha else ")"),
                       ("record", "block", "k", "alpha", "holds", "log p0", "a log p0", "tr", "acc", "swap"),
                       tuple(rows), "log p0 of the state it holds", sum(st.transitions[level] for st in run.steps
                                                                       if level < len(st.transitions)),
                       sum(st.accepted[level] for st in run.steps if level < len(st.accepted)), draws, tuple(notes))


def _particle(run: SmcRun, i: int, own: list | tuple | None) -> MemberChain:
    rows = []
    moves = [0, 0]
    K = run.params.get("steps")  # (a trace written before each particle's own count was: K a block)
    for s, st in enumerate(run.steps):
        if not 0 <= i < len(st.tokens):
            continue
        parent = run.parent(s, i) if run.resampled_into(s) else None
        acc = getattr(st, "accepted", None)  # (resample-move's moves; PowerSMC makes none)
        tr = getattr(st, "transitions", None) or ((K,) * len(acc) if acc is not None and isinstance(K, int) else ())
        n = tr[i] if i < len(tr) else None
        a = acc[i] if acc is not None and i < len(acc) else None
        moves[0] += n or 0
        moves[1] += a or 0
        w = st.log_weights[i]
        dropped = st.resampled and run.copies(s)[i] == 0
        rows.append(MemberRow(s, (f"b{s + 1}", str(st.t), "-" if parent is None else f"p{parent + 1}",
                                  f"{shares(st.log_weights)[i]:.3f}", _num(w),
                                  ("dropped" if dropped else "⟳") if st.resampled else "-",
                                  "-" if n is None else str(n), "-" if a is None else str(a)),
                              w if math.isfinite(w) else None))
    P = run.particles
    notes = ["from pj: resampled from particle j of the block before; ⟳ the block resampled"]
    if not any(hasattr(st, "accepted") for st in run.steps):
        notes.append("PowerSMC's particles make no MH moves: a particle is its extensions and its weights")
    else:
        notes.append("the trace records each particle per block (rm_step): its weight, its parent and its "
                     "moves' counts" + ("; its every move: the plot on the right" if own is not None else ""))
        notes += _own_notes(own)
    draws = _transitions(own or ())
    return MemberChain(i, i, f"particle {i + 1} of {P}", ("block", "t", "from", "share", "log w", "resampled",
                                                          "moves", "acc"),
                       tuple(rows), "log weight after the block", moves[0], moves[1], draws, tuple(notes))


def member_series(run: MethodRun) -> list[tuple[str, list[tuple[int, float]]]]:
    """Every member's trace for `m`: (its label, [(record from 1, value)]) with tempering's log p0 of
    the state each replica holds per barrier, the particles' log weights per block; the alpha replica
    (or the answer's particle) first."""
    out = []
    n = members(run)
    first = answer_member(run)
    for m in [first, *(j for j in reversed(range(n)) if j != first)] if isinstance(run, PptRun) \
            else [first, *(j for j in range(n) if j != first)]:
        chain = member_chain(run, m)
        label = run.label(m) if isinstance(run, PptRun) else f"p{m + 1}"
        out.append((label, [(r.column + 1, r.value) for r in chain.rows if r.value is not None]))
    return out


def member_table(run: MethodRun) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The members side by side (`m`'s table): one row per member, in the grid's order."""
    rows: list[tuple[str, ...]] = []
    for row in range(members(run)):
        m = member_of_row(run, row)
        c = member_chain(run, m)
        values = [r.value for r in c.rows if r.value is not None]
        label = run.label(m) if isinstance(run, PptRun) else f"p{m + 1}"
        rate = c.acceptance
        rows.append((("★ " if m == answer_member(run) and (isinstance(run, PptRun) or run.choice) else "  ") + label,
                     str(c.transitions), str(c.accepted), "-" if rate is None else f"{rate:.2f}",
                     _num(values[-1] if values else None), _num(sum(values) / len(values) if values else None)))
    last = "log p0 last" if isinstance(run, PptRun) else "log w last"  # (the plot's value)
    mean = "log p0 mean" if isinstance(run, PptRun) else "log w mean"
    columns: tuple[str, ...] = ("member", "tr", "acc", "rate", last, mean)
    return columns, rows
