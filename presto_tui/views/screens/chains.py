"""The chains of one prompt side by side (`--chains M`, or chains in the settings): are they mixing?

- a trace plot: every chain's log-target (alpha log p0 of its state) after each
  transition, one colour per chain (Okabe and Ito's palette, the selected
  chain drawn on top), drawn with textual-plotext;
- beside it the MCMC diagnostics ArviZ computes over the chains (split R-hat,
  bulk and tail ESS, MCSE; `runtime.session.diagnostics`), the warnings, and
  the answer most chains agree on;
- below, the selected chain: its status, acceptance, log-likelihood and
  confidence, and its text.

←/→ select a chain, Enter opens its latest round in the tree view, Escape (or m)
goes back.  A live chat's chains are redrawn as their transitions arrive (at
most four times a second).  The view only reads the app's state.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static
from textual_plotext import PlotextPlot

from presto_tui.api.diagnostics import ChainsReport, chains_report
from presto_tui.api.events import cut_at_eos
from presto_tui.api.params import budget_text
from presto_tui.logs.chains import report_renderable
from presto_tui.views.screens.drawing import thinned
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.reducer import AppState, SessionView

POLL_S = 0.25
# Okabe and Ito's palette: hues that stay apart under red-green colour blindness
CHAIN_COLOURS = ((230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66), (0, 114, 178), (213, 94, 0),
                 (204, 121, 167), (160, 160, 160))


def colour_of(chain: int) -> tuple[int, int, int]:
    return CHAIN_COLOURS[chain % len(CHAIN_COLOURS)]


def trace_points(view: SessionView) -> tuple[list[int], list[float]]:
    """(transition number from 1, log-target after it) over every block of the chain."""
    draws = view.summary.draws
    return list(range(1, len(draws) + 1)), [d.log_target for d in draws]


class ChainsScreen(Screen[tuple[int, int] | None]):
    """A prompt's chains; dismisses with the (session, round) to open, or None."""

    BINDINGS = [
        Binding("left,h,left_square_bracket", "move(-1)", "prev chain", key_display="←"),
        Binding("right,l,right_square_bracket", "move(1)", "next chain", key_display="→"),
        Binding("enter", "open", "open its tree"),
        Binding("escape,m", "close", "back"),
    ]

    def __init__(self, state: AppState, session: int) -> None:
        super().__init__()
        self.state = state
        self.members = state.chains_of(session)
        self.selected = self.members.index(session)
        self._seen: tuple = ()
        self._report: tuple[tuple, ChainsReport] | None = None  # (the _seen it was computed for, the report)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="ch-info")
        yield Static(id="ch-legend")
        with Horizontal(id="ch-main"):
            yield PlotextPlot(id="ch-plot")
            with VerticalScroll(id="ch-side"):
                yield Static(id="ch-diagnostics")
        with VerticalScroll(id="ch-text"):
            yield Static(id="ch-text-body")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        self.draw()

    @property
    def views(self) -> list[SessionView]:
        return [self.state.sessions[i] for i in self.members]

    def _key(self, members: list[int]) -> tuple:
        """What the screen shows depends on: the chains, their draws so far, their status."""
        return tuple(members), tuple((len(v.summary.draws), v.status) for v in map(self.state.sessions.__getitem__,
                                                                                    members))

    def _poll(self) -> None:
        """Redraw when a chain started, moved or ended (a live chat)."""
        members = self.state.chains_of(self.members[self.selected])
        if self._key(members) != self._seen:
            self.members = members
            self.draw()

    # -- drawing ----------------------------------------------------------------------------------
    def draw(self) -> None:
        views = self.views
        self._seen = self._key(self.members)
        with self.app.batch_update():
            self.query_one("#ch-info", Static).update(self._info(views))
            self.query_one("#ch-legend", Static).update(self._legend(views))
            self._plot(views)
            self.query_one("#ch-diagnostics", Static).update(self._diagnostics(views))
            self.query_one("#ch-text-body", Static).update(self._text(views[self.selected]))

    def _diagnostics(self, views: list[SessionView]):
        if not any(v.summary.draws for v in views):
            if any(v.summary.transitions for v in views):  # a trace from before the transition events
                return Text("this trace records no state per transition (it predates them): nothing to diagnose",
                            style="dim")
            return Text("no transitions yet", style="dim")
        if self._report is None or self._report[0] != self._seen:  # ArviZ once per change of the draws,
            self._report = (self._seen, chains_report([v.summary for v in views]))  # not per chain switched to
        parts: list = [report_renderable(self._report[1], compact=True)]
        if len(views) < 2:
            parts.insert(0, Text("one chain: R-hat compares two or more (--chains M, or chains in ctrl+s)",
                                 style="dim"))
        return Group(*parts)

    def _info(self, views: list[SessionView]) -> Text:
        v = views[self.selected]
        p = v.params
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"chain {v.start.chain} of {len(views)}", style="bold")
        t.append(f" · {p.get('sampler')} {p.get('prefetch')} N={budget_text(p)} K={p.get('steps')} alpha="
                 f"{p.get('alpha')} · log-target per transition · ")
        t.append("> " + clip(v.start.prompt.replace("\n", " "), 200))
        return t

    def _legend(self, views: list[SessionView]) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        for i, v in enumerate(views):
            r, g, b = colour_of(v.start.chain)
            mark = "━━" if i != self.selected else "██"
            t.append(f"{mark} ", style=f"rgb({r},{g},{b})")
            t.append(f"chain {v.start.chain}{' (selected)' if i == self.selected else ''}  ",
                     style="bold" if i == self.selected else "")
        return t

    def _plot(self, views: list[SessionView]) -> None:
        plot = self.query_one("#ch-plot", PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        plt.title("log-target alpha log p0(x) after each transition")  # our words only: plotext parses ANSI
        order = [i for i in range(len(views)) if i != self.selected] + [self.selected]  # the selected on top
        longest = 1
        for i in order:
            xs, ys = trace_points(views[i])
            if not xs:
                continue
            longest = max(longest, len(xs))
            keep = thinned(len(xs), plot.size.width)  # the cost follows the plot's width
            plt.plot([xs[j] for j in keep], [ys[j] for j in keep], marker="braille",
                     color=colour_of(views[i].start.chain))
        plt.xlim(0.5, longest + 0.5)
        step = max(1, -(-longest // 6))  # at most about six whole-transition ticks
        plt.xticks(list(range(1, longest + 1, step)))
        plt.xlabel("transition")
        plot.refresh()

    def _text(self, v: SessionView) -> Text:
        s = v.summary
        t = Text()
        last = s.draws[-1] if s.draws else None
        t.append(f"chain {v.start.chain} (seed {v.params.get('seed')}): {s.status}, {s.transitions} transitions, "
                 f"acceptance {s.acceptance_rate:.2f}", style="bold")
        if last is not None:
            t.append(f", log-likelihood {last.loglik:.3f}, confidence {last.confidence:.3f}, first change at "
                     f"token {last.first_diff}", style="bold")
        t.append("\n")
        t.append(clip("".join(self.state.pieces(cut_at_eos(s.tokens, v.start.backend_info.get("eos_id")))), 20_000))
        return t

    # -- keys ---------------------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        self.selected = max(0, min(len(self.members) - 1, self.selected + step))
        self.draw()

    def action_open(self) -> None:
        i = self.members[self.selected]
        rounds = len(self.state.sessions[i].rounds)
        self.dismiss((i, rounds - 1) if rounds else None)

    def action_close(self) -> None:
        self.dismiss(None)

