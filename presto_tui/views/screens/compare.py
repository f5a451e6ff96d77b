"""Two sessions side by side (`c` on a round view, or `replay --compare`): parameters, outcomes,
acceptance curves, both answers and a token-level diff of them.

It draws what `state/compare.py` computes from the sessions it is given, and holds no sampling
logic; every string from a model or a trace goes through `visible()` (via `clip` and the
evolution writer) into a `rich.text.Text`.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from presto_tui.views.screens.drawing import diff_styles, theme_colour, thinned
from presto_tui.views.state import export
from presto_tui.views.state.compare import ParamRow, acceptance_curve, answer_diff, outcome_rows, param_rows
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.reducer import AppState, SessionView
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.views.widgets.plots import SeriesPlot


class CompareScreen(Screen[None]):
    """Sessions A and B: parameters (those that differ first, marked ≠), outcomes, acceptance
    curves over transitions in one plot, both answers and a token-level diff of them."""

    BINDINGS = [
        Binding("escape,c", "close", "back"),
        Binding("x", "swap", "swap A and B"),
    ]
    COMPONENT_CLASSES = {"cmp--differs"}

    def __init__(self, state: AppState, a: int, b: int) -> None:
        super().__init__()
        self.state, self.a, self.b = state, a, b

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="cmp-info")
        with Horizontal(id="cmp-top"):
            with VerticalScroll(id="cmp-params"):
                yield Static(id="cmp-params-body")
            yield SeriesPlot(id="cmp-plot")
        with Horizontal(id="cmp-answers"):
            with VerticalScroll(id="cmp-answer-a"):
                yield Static(id="cmp-answer-a-body")
            with VerticalScroll(id="cmp-answer-b"):
                yield Static(id="cmp-answer-b-body")
        with VerticalScroll(id="cmp-diff"):
            yield Static(id="cmp-diff-body")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.draw()

    def sessions(self) -> tuple[SessionView, SessionView]:
        return self.state.sessions[self.a], self.state.sessions[self.b]

    def draw(self) -> None:
        sa, sb = self.sessions()
        with self.app.batch_update():
            info = Text(no_wrap=True, overflow="ellipsis")
            info.append(f"A: session {self.a + 1}  B: session {self.b + 1}", style="bold")
            info.append(" · ≠ marks what differs · x swaps A and B · escape goes back")
            self.query_one("#cmp-info", Static).update(info)
            self.query_one("#cmp-params-body", Static).update(self._params(sa, sb))
            self._plot(sa, sb)
            for key, s, name in (("a", sa, "A"), ("b", sb, "B")):
                scroll = self.query_one(f"#cmp-answer-{key}", VerticalScroll)
                scroll.border_title = f"{name}: answer of session {(self.a, self.b)[key == 'b'] + 1}"
                self.query_one(f"#cmp-answer-{key}-body", Static).update(self._answer(s))
            d = answer_diff(sa.summary.tokens, sb.summary.tokens, self.state.pieces,
                            eos_a=sa.start.backend_info.get("eos_id"), eos_b=sb.start.backend_info.get("eos_id"),
                            styles=diff_styles(self))
            self.query_one("#cmp-diff", VerticalScroll).border_title = d.title
            self.query_one("#cmp-diff-body", Static).update(d.text)

    def _params(self, sa: SessionView, sb: SessionView) -> Group:
        """The parameters that differ (≠), the ones both share on a line, then what each came to."""
        rows = param_rows(sa, sb)
        differs = self.get_component_rich_style("cmp--differs")
        width = max(len(r.name) for r in rows) + 2

        def grid(title: str, rows: list[ParamRow]) -> Table:
            g = Table.grid(padding=(0, 1))
            g.add_column(no_wrap=True, min_width=width)
            g.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
            g.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
            g.add_row(Text(title, style="bold"), Text("A", style="bold"), Text("B", style="bold"))
            for r in rows:
                style = differs if r.differs else ""
                g.add_row(Text(("≠ " if r.differs else "  ") + r.name, style=style), Text(r.a, style=style),
                          Text(r.b, style=style))
            return g

        same = [r for r in rows if not r.differs]
        shared = Text("same in both: " + (" · ".join(f"{r.name} {r.a}" for r in same) or "nothing"), style="dim")
        return Group(grid("parameter", [r for r in rows if r.differs]), shared, Text(""),
                     grid("outcome", outcome_rows(sa, sb)))

    def _plot(self, sa: SessionView, sb: SessionView) -> None:
        """The running acceptance of each MH chain; no plot where neither session is one (the
        baselines make no transitions: their outcomes are in the table)."""
        plot = self.query_one("#cmp-plot", SeriesPlot)
        curves = [(name, acceptance_curve(s), theme_colour(self, var), marker)
                  for name, s, var, marker in (("A", sa, "mh-accept", "braille"), ("B", sb, "mh-reject", "dot"))
                  if s.method_run is None]
        plot.display = bool(curves)
        if not curves:
            return
        # our own words only (plotext's output is parsed as ANSI); the markers are named in the title,
        # not in a legend, which plotext draws over the curves' start
        title = "running acceptance: " + ", ".join(f"{n} {'line' if m == 'braille' else 'dots'}"
                                                   for n, _, _, m in curves)
        if len(curves) == 1:
            title += f" ({'B' if curves[0][0] == 'A' else 'A'}: a baseline)"

        def drawing(plt, width: int) -> None:
            plt.title(title)
            top = 0
            for _, ys, colour, marker in curves:
                if not ys:
                    continue
                keep = thinned(len(ys), width)
                plt.plot([i + 1 for i in keep], [ys[i] for i in keep], marker=marker, color=colour)
                top = max(top, len(ys))
            if top:
                plt.ylim(0, 1)
                plt.xlim(0.5, top + 0.5)
                plt.xticks(list(range(1, top + 1, max(1, -(-top // 6)))))  # about six whole transitions
                plt.xlabel("transition")

        plot.show(drawing)

    def _answer(self, s: SessionView) -> Text:
        t = Text()
        t.append("> " + clip(s.start.prompt.replace("\n", " ⏎ "), 200) + "\n", style="dim")
        answer = export.answer_text(self.state, s, s.summary.tokens)
        t.append(clip(answer, 4000) if answer else "(no answer)")
        return t

    def action_swap(self) -> None:
        self.a, self.b = self.b, self.a
        self.draw()

    def action_close(self) -> None:
        self.dismiss(None)
