"""A Scalable Power Sampling session as the app shows it, folded from its events (pure; no Textual).

Each `SpsStep` (SPS's own event, runtime/methods/sps.py) holds one step: the candidate chunks, each with its log
p0, its rollouts' log weights, log zeta_hat, the plug-in and jackknife estimates and the
probability it was drawn with, and which one was drawn.  `SpsRun` keeps them and answers what the
view asks: the path (the chunks drawn, in order), a candidate's numbers, the text before a step.
Nothing is re-decided here: every number shown is a recorded one.  A trace is untrusted, so an
index that points nowhere gives nothing instead of raising.

The words of the panels (title, stats, inspector, answer) for such a session are here too, as
plain Rich text, so the screen (`sps_view`) only draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from presto_tui.api.events import Event, Pieces, SessionSummary
from presto_tui.views.state.baseline import MethodRun
from presto_tui.views.state.evolution import DiffStyles, clip, evolution_text


@dataclass(frozen=True)
class Candidate:
    """One candidate of one step, as recorded."""

    step: int
    index: int
    tokens: tuple[int, ...]
    log_p0: float
    log_weights: tuple[float, ...]  # its rollouts' log p0^alpha - log q; () without a future
    log_zeta: float
    plain: float
    jackknife: float | None  # None: the step used no jackknife
    prob: float  # what it was drawn with
    chosen: bool


@dataclass
class SpsRun(MethodRun):
    """The steps of one SPS session, as they arrive (live) or as a trace holds them."""

    steps: list[Any] = field(default_factory=list)  # its `SpsStep`s (its method's own event: `own_events`)

    def apply(self, ev: Event) -> None:
        super().apply(ev)
        if isinstance(ev, self.own_events):
            self.steps.append(ev)

    @property
    def width(self) -> int:
        """The most candidates any step had."""
        return max((len(st.candidates) for st in self.steps), default=0)

    @property
    def rollouts(self) -> int:
        return sum(len(row) for st in self.steps for row in st.log_weights)

    def candidate(self, step: int, k: int) -> Candidate | None:
        if not 0 <= step < len(self.steps):
            return None
        st = self.steps[step]
        if not 0 <= k < len(st.candidates):
            return None
        at = lambda values, default=math.nan: values[k] if k < len(values) else default
        return Candidate(step, k, st.candidates[k], at(st.log_p0), at(st.log_weights, ()), at(st.log_zeta),
                         at(st.plain), at(st.jackknife) if st.jackknife else None, at(st.probs), k == st.chosen)

    def chosen(self, step: int) -> tuple[int, ...]:
        """The chunk drawn at `step` (empty where the trace points nowhere)."""
        if not 0 <= step < len(self.steps):
            return ()
        st = self.steps[step]
        return st.candidates[st.chosen] if 0 <= st.chosen < len(st.candidates) else ()

    def path(self, upto: int | None = None) -> tuple[int, ...]:
        """The tokens drawn before step `upto` (every step's: None)."""
        end = len(self.steps) if upto is None else max(0, min(upto, len(self.steps)))
        return tuple(t for s in range(end) for t in self.chosen(s))

    # -- the panels' words -----------------------------------------------------------------------
    def progress(self) -> str:
        n, chunk = self.params.get("max_new_tokens"), self.params.get("sps_chunk")
        most = -(-n // chunk) if isinstance(n, int) and isinstance(chunk, int) and chunk > 0 else None
        return f"step {len(self.steps)}{f' of at most {most}' if most else ''}, {len(self.path())} tokens"

    def legend(self) -> list[str]:
        return ["bar: probability drawn with", "★ drawn", "∎ EOS", "rows: steps",
                "columns: candidates, most likely first"]

    def stats_body(self, m: SessionSummary) -> Text:
        t = Text(f"\ntime {m.wall_s:.2f} s  tokens generated {m.tokens_generated}  calls {m.calls}")
        t.append(f"\n{self.progress()}  rollouts {self.rollouts}")
        if self.steps:
            st = self.steps[-1]
            t.append(f"\nlast step: {len(st.candidates)} candidates from {st.draws} draws ({st.reused} kept)")
        return t

    def answer_title(self) -> str:
        if self.choice is None:
            return "no answer yet: the path so far"
        return clip(f"the answer: {self.choice.rule}", 200)


def _p(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else str(x)


def cell_text(run: SpsRun, step: int, k: int, pieces: Pieces, eos_id: int | None, styles: DiffStyles) -> Text:
    """The inspector for candidate k of a step: its chunk, log p0, zeta and the estimates, its
    rollouts' weights, and the text before the step with the chunk after it marked."""
    c = run.candidate(step, k)
    if c is None:
        return Text("no candidate here", style="dim")
    st = run.steps[step]
    t = Text()
    t.append(f"step {step + 1} of {len(run.steps)} at token {st.position}: candidate {k + 1} of "
             f"{len(st.candidates)}", style="bold")
    if c.chosen:
        t.append("  ★ drawn")
    t.append(f"\nlog p0 of the chunk {c.log_p0:.3f} ({len(c.tokens)} token{'s' if len(c.tokens) != 1 else ''})")
    if c.log_weights:
        w = c.log_weights
        t.append(f"\nlog zeta_hat {c.log_zeta:.3f} from {len(w)} rollouts (eq. 3); their log weights "
                 f"{min(w):.2f} .. {max(w):.2f}")
    else:
        t.append("\nzeta = 1: no future (EOS or the response's end)" if len(st.candidates) > 1 else
                 "\nthe only candidate: drawn without rollouts")
    t.append(f"\nplug-in (eq. 4) {_p(c.plain)}")
    if c.jackknife is not None:
        t.append(f"  jackknife (eq. 5) {_p(c.jackknife)}")
    t.append(f"\ndrawn with probability {_p(c.prob)}  (uniform {st.u:.4f})")
    t.append(f"\n{st.draws} draws ({st.reused} kept from the step before), {st.wall_s:.2f} s of engine time\n")
    before = run.path(step)
    t.append_text(evolution_text(before, before + c.tokens, pieces, eos_id=eos_id, styles=styles))
    return t
