"""Parallel power tempering's session as the app shows it (pure; no Textual here): the replicas at their
exponents over the barriers, which state each holds, the swaps proposed and accepted between
neighbours, from its `pt_step` events (`Method.view_state` names `PptRun`; the widget is
`widgets/ppt.py`'s `ReplicaGrid`).

Replicas are shown from the alpha one (the answer's, row 1) down to the hottest; a person reads
replica and barrier numbers from 1.  A state is named by the replica it started at ("from 3": the
state replica 3 began with), so a state's journey up and down the ladder reads along the rows.
Nothing is re-decided here: every number is a recorded one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from presto_tui.api.events import Pieces, SessionSummary, cut_at_eos
from presto_tui.views.state.baseline import MethodRun
from presto_tui.views.state.evolution import DiffStyles, clip, evolution_text


@dataclass
class PptRun(MethodRun):
    """The replicas' records as they come (`steps`), read by level (0: the lowest exponent)."""

    steps: list[Any] = field(default_factory=list)  # its `PtStep`s (the method's own event: `own_events`)
    ladders: list[Any] = field(default_factory=list)  # an adaptive ladder's `PtLadder`s (its moves, then its freeze)
    what = "replica"

    def apply(self, ev: Any) -> None:
        super().apply(ev)
        if isinstance(ev, self.own_events):
            (self.steps if hasattr(ev, "holders") else self.ladders).append(ev)

    @property
    def exponents(self) -> tuple[float, ...]:
        return self.steps[-1].exponents if self.steps else ()

    @property
    def replicas(self) -> int:
        """As the records say (the ladder is the method's to set: `--pt-ladder` or R geometric); 0 before
        the first barrier's record."""
        return len(self.exponents)

    # rows: the alpha replica first
    def level(self, row: int) -> int:
        return self.replicas - 1 - row

    def holder(self, step: int, level: int) -> int | None:
        """The start level of the state `level` holds after record `step` (None: not recorded)."""
        if not 0 <= step < len(self.steps):
            return None
        holders = self.steps[step].holders
        return holders[level] if 0 <= level < len(holders) else None

    def swap_at(self, step: int, level: int) -> tuple[int, float, bool] | None:
        """(the other level, A, swapped) of the pair `level` was in at barrier `step`; None: it proposed none."""
        if not 0 <= step < len(self.steps):
            return None
        st = self.steps[step]
        for i, A, ok in zip(st.pairs, st.accept_probs, st.swapped):
            if level in (i, i + 1):
                return (i + 1 if level == i else i), A, ok
        return None

    def label(self, level: int) -> str:
        """A replica as its row names it: 'r4 a=4'."""
        a = self.exponents[level] if 0 <= level < len(self.exponents) else float("nan")
        return f"r{level + 1} a={a:.3g}"

    def barriers(self) -> int:
        return sum(not st.final for st in self.steps)

    # -- words -------------------------------------------------------------------------------
    def progress(self) -> str:
        if not self.steps:
            return "to the first barrier"
        return f"barrier {self.barriers()}, {self.replicas} replicas"

    def title_extra(self) -> list[str]:
        swaps = sum(sum(st.swapped) for st in self.steps)
        return [f"{swaps} swap{'s' if swaps != 1 else ''}"]

    def legend(self) -> list[str]:
        return ["n: holds the state replica n began with", "⇅ swapped", "× swap refused", "★ answer (the alpha "
                "replica)"]

    def stats_body(self, m: SessionSummary) -> Text:
        t = Text(f"\ntime {m.wall_s:.2f} s  tokens generated {m.tokens_generated}  calls {m.calls}")
        t.append(f"\nreplicas {self.replicas} (alpha {', '.join(f'{a:.3g}' for a in self.exponents)})  "
                 f"barriers {self.barriers()}")
        for line in self.ladder_lines():  # (an adaptive ladder's warm-up, then its frozen ladder's numbers)
            t.append("\n" + line)
        if any(u.frozen for u in self.ladders):
            t.append("\nafter the warm-up (the frozen ladder's barriers):")
        ladder = getattr(m.info, "ladder", None)  # (the method's numbers, worded as `run` and `stats` print them:
        for label, value in (ladder.rows() if ladder is not None else []):  # each pair's mean A top-down, Lambda)
            t.append(f"\n{label}: {value}")
        return t

    def ladder_lines(self) -> list[str]:
        """An adaptive ladder's moves, as recorded: 'ladder after barrier 4 (frozen): 4, 2.6, 1.7, 1 (rejection
        4-3 0.41, 3-2 0.52, 2-1 0.62; Lambda 1.55)', the alpha replica's exponent first as the rows go."""
        return [f"ladder after barrier {u.step}{' (frozen)' if u.frozen else ''}: {u.words(top_down=True)}"
                for u in self.ladders]

    def answer_title(self) -> str:
        if self.choice is None:
            return "no answer yet: the alpha replica's state at the end"
        return clip(f"the answer: {self.choice.rule}", 200)


def cell_text(run: PptRun, step: int, row: int, pieces: Pieces, eos_id: int | None, styles: DiffStyles) -> Text:
    """The inspector for a replica after a barrier: its exponent, the state it holds and where that state
    began, the swap it proposed, its MH acceptance since the record before, and the state's text."""
    if not 0 <= step < len(run.steps) or not 0 <= row < run.replicas:
        return Text("no replica here", style="dim")
    st, level = run.steps[step], run.level(row)
    R = run.replicas
    t = Text()
    where = "at the end" if st.final else f"after barrier {step + 1} (block {st.block + 1}, transition {st.k})"
    t.append(f"replica {level + 1} of {R}, alpha {st.exponents[level]:.4g}, {where}", style="bold")
    if level == R - 1:
        t.append("  ★ the alpha replica" + (": the answer" if step == len(run.steps) - 1 and run.choice else ""))
    h = st.holders[level]
    t.append(f"\nholds the state replica {h + 1} began with" + (" (its own)" if h == level else ""))
    t.append(f"\nlog p0 {st.log_p0[level]:.3f}  log target alpha log p0 {st.exponents[level] * st.log_p0[level]:.3f}")
    swap = run.swap_at(step, level)
    if swap is not None:
        other, A, ok = swap
        t.append(f"\nswap with replica {other + 1} proposed: A = {A:.3f}, {'accepted' if ok else 'refused'}")
    elif not st.final:
        t.append("\nno swap proposed at this barrier")
    n, a = st.transitions[level], st.accepted[level]
    t.append(f"\nMH transitions since the record before: {n}, {a} accepted\n")
    before = run.steps[step - 1].tokens[level] if step else None
    t.append_text(evolution_text(cut_at_eos(list(before), eos_id) if before is not None else None,
                                 cut_at_eos(list(st.tokens[level]), eos_id), pieces, styles=styles))
    return t
