"""The chains of one prompt side by side (`--chains M`, or chains in the settings): are they mixing?

- a trace plot: every chain's log-target (alpha log p0 of its state) after each
  transition, one colour per chain (Okabe and Ito's palette, the selected
  chain drawn on top), drawn with textual-plotext at the plot's own width
  (`widgets/plots.py`); where a burn-in is set, a line marks where it ends;
- under it, one block's mixing (`state/chains.py`): each chain's autocorrelation
  by lag, and R-hat over the first n kept draws of every chain as n grows,
  both ArviZ's (`autocorrelation`, `running_rhat`);
- beside them the MCMC diagnostics ArviZ computes over the chains (split R-hat,
  bulk and tail ESS, MCSE; `runtime.session.diagnostics`), the warnings, and
  the answer most chains agree on;
- below, the selected chain: its status, acceptance, log-likelihood and
  confidence, and its text.

The chains of a one-shot method (best-of-N, PowerSMC, SPS, ... under `--chains M`) make no
transitions: the plots give their place to every chain's answer and the vote.

The diagnostics read the transitions the selection keeps: the burn-in B and the
thinning T of `--burn-in` and `--thin` (`b` sets them here; the info line says
which).  `e` exports every chain's draws as `run --draws` writes them (a tidy
CSV, ArviZ's NetCDF).  ←/→ select a chain, Enter opens its latest round in the
tree view, Escape (or m) goes back.  Chains are numbered from 1, as everywhere
a person reads them.  A live chat's chains are redrawn as their transitions
arrive (at most four times a second).  The view only reads the app's state.
"""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static
from textual_plotext.plot import Plot

from presto_tui.api.diagnostics import ALL, RHAT_MAX, ChainsReport, Selection, available, chains_report
from presto_tui.api.events import cut_at_eos
from presto_tui.api.params import budget_text, describe
from presto_tui.logs.chains import answer_text, chains_table, report_renderable
from presto_tui.views.dialogs.export import DrawsExportScreen
from presto_tui.views.dialogs.selection import SelectionScreen
from presto_tui.views.screens.drawing import row_ticks, thinned
from presto_tui.views.state import export
from presto_tui.views.state.chains import Mixing, burn_in_ends, mixing, trace_points
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.reducer import AppState, SessionView
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.views.widgets.plots import SeriesPlot

POLL_S = 0.25
MIXING_MIN_HEIGHT = 30  # below this many rows the mixing plots give their rows to the trace plot
# Okabe and Ito's palette: hues that stay apart under red-green colour blindness
CHAIN_COLOURS = ((230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66), (0, 114, 178), (213, 94, 0),
                 (204, 121, 167), (160, 160, 160))
CHAINS = Binding.Group("chain")  # ← → chain: one place in the footer
GREY = (128, 128, 128)  # a threshold, a burn-in's end
LIGHT = (224, 224, 224)  # what belongs to every chain at once (R-hat)


def colour_of(chain: int) -> tuple[int, int, int]:
    return CHAIN_COLOURS[chain % len(CHAIN_COLOURS)]


def whole_ticks(top: int) -> list[float]:
    """At most about six whole-number ticks from 1 to `top`."""
    return [float(x) for x in range(1, top + 1, max(1, -(-top // 6)))]


class ChainsScreen(Screen[tuple[int, int] | None]):
    """A prompt's chains; dismisses with the (session, round) to open, or None."""

    BINDINGS = [
        Binding("left,h,left_square_bracket", "move(-1)", "prev chain", key_display="←", group=CHAINS),
        Binding("right,l,right_square_bracket", "move(1)", "next chain", key_display="→", group=CHAINS),
        Binding("enter", "open", "open its tree"),
        Binding("b", "selection", "burn-in/thin"),
        Binding("e", "export", "export draws"),
        Binding("escape,m", "close", "back"),
    ]

    def __init__(self, state: AppState, session: int, export_dir: Path = Path("exports"),
                 selection: Selection = ALL) -> None:
        super().__init__()
        self.state = state
        self.members = state.chains_of(session)
        self.selected = self.members.index(session)
        self.export_dir = export_dir
        self.selection = selection  # which transitions the diagnostics read (b)
        self._seen: tuple = ()
        self._report: tuple[tuple, ChainsReport] | None = None  # (what it was computed for, the report)
        self._mixing: tuple[tuple, Mixing | None] | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="ch-info")
        yield Static(id="ch-legend")
        with Horizontal(id="ch-main"):
            with Vertical(id="ch-plots"):
                yield SeriesPlot(id="ch-plot")
                with Horizontal(id="ch-mixing"):
                    yield SeriesPlot(id="ch-acf")
                    yield SeriesPlot(id="ch-rhat")
            with VerticalScroll(id="ch-side"):
                yield Static(id="ch-diagnostics")
        with VerticalScroll(id="ch-text"):
            yield Static(id="ch-text-body")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        self.draw()

    def on_resize(self) -> None:
        self.query_one("#ch-mixing").display = self.size.height >= MIXING_MIN_HEIGHT

    @property
    def views(self) -> list[SessionView]:
        return [self.state.sessions[i] for i in self.members]

    @property
    def steps(self) -> int:
        return int(self.views[0].params.get("steps") or 1)

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

    # -- what is computed once per change of the draws (not per chain switched to) ------------------
    def report(self) -> ChainsReport:
        key = (self._seen, self.selection)
        if self._report is None or self._report[0] != key:
            self._report = (key, chains_report([v.summary for v in self.views], self.selection))
        return self._report[1]

    def mixing(self) -> Mixing | None:
        key = (self._seen, self.selection)
        if self._mixing is None or self._mixing[0] != key:
            self._mixing = (key, mixing([v.summary for v in self.views], self.selection))
        return self._mixing[1]

    # -- drawing ----------------------------------------------------------------------------------
    def draw(self) -> None:
        views = self.views
        self._seen = self._key(self.members)
        with self.app.batch_update():
            self.query_one("#ch-plots").display = not self.one_shot
            self.query_one("#ch-info", Static).update(self._info(views))
            self.query_one("#ch-legend", Static).update(self._legend(views))
            self.query_one("#ch-plot", SeriesPlot).show(self._trace_drawing(views))
            self._draw_mixing(views)
            self.query_one("#ch-diagnostics", Static).update(self._diagnostics(views))
            self.query_one("#ch-text-body", Static).update(self._text(views[self.selected]))

    @property
    def one_shot(self) -> bool:
        return self.views[0].method_run is not None

    def _diagnostics(self, views: list[SessionView]):
        if self.one_shot:  # no transitions: every chain's answer and the vote
            return Group(chains_table([v.summary for v in views]), Text(""), answer_text(self.report()))
        if not any(v.summary.draws for v in views):
            if any(v.summary.transitions for v in views):  # a trace from before the transition events
                return Text("this trace records no state per transition (it predates them): nothing to diagnose",
                            style="dim")
            return Text("no transitions yet", style="dim")
        parts: list = [report_renderable(self.report(), compact=True)]
        if len(views) < 2:
            parts.insert(0, Text("one chain: R-hat compares two or more (--chains M, or chains in ctrl+s)",
                                 style="dim"))
        return Group(*parts)

    def _info(self, views: list[SessionView]) -> Text:
        v = views[self.selected]
        p = v.params
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"chain {v.start.chain + 1} of {len(views)}", style="bold")
        if self.one_shot:
            t.append(f" · {describe(p)} alpha={p.get('alpha')} · ")
        else:
            t.append(f" · {p.get('sampler')} {p.get('prefetch')} N={budget_text(p)} K={p.get('steps')} alpha="
                     f"{p.get('alpha')} · ")
            t.append(f"burn-in {self.selection.burn_in}, thin {self.selection.thin}", style="bold")
            t.append(" (b) · ")
        t.append("> " + clip(v.start.prompt.replace("\n", " "), 200))
        return t

    def _legend(self, views: list[SessionView]) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        for i, v in enumerate(views):
            r, g, b = colour_of(v.start.chain)
            mark = "━━" if i != self.selected else "██"
            t.append(f"{mark} ", style=f"rgb({r},{g},{b})")
            t.append(f"chain {v.start.chain + 1}{' (selected)' if i == self.selected else ''}  ",
                     style="bold" if i == self.selected else "")
        return t

    def _order(self, views: list[SessionView]) -> list[int]:
        return [i for i in range(len(views)) if i != self.selected] + [self.selected]  # the selected on top

    def _trace_drawing(self, views: list[SessionView]):
        series = [(trace_points(views[i]), colour_of(views[i].start.chain)) for i in self._order(views)]
        ends = burn_in_ends(views[self.selected], self.selection)

        def drawing(plt: Plot, width: int) -> None:
            # our words only: plotext parses ANSI
            plt.title("log-target alpha log p0(x) per transition" + (" (| burn-in ends)" if ends else ""))
            longest = 1
            for (xs, ys), colour in series:
                if not xs:
                    continue
                longest = max(longest, len(xs))
                keep = thinned(len(xs), width)  # the cost follows the plot's width, as it is drawn
                plt.plot([xs[j] for j in keep], [ys[j] for j in keep], marker="braille", color=colour)
            for x in ends:
                plt.vline(x, color=GREY)
            plt.xlim(0.5, longest + 0.5)
            plt.xticks(whole_ticks(longest))
            plt.xlabel("transition")

        return drawing

    def _draw_mixing(self, views: list[SessionView]) -> None:
        mix = self.mixing()
        acf, rhat = self.query_one("#ch-acf", SeriesPlot), self.query_one("#ch-rhat", SeriesPlot)
        if mix is None:
            why = "no block every chain has reached yet" if available() else "needs arviz-stats"
            acf.show(lambda plt, width: plt.title(f"autocorrelation: {why}"))
            rhat.show(lambda plt, width: plt.title(f"running R-hat: {why}"))
            return
        order = self._order(views)
        where = f"block {mix.block + 1}"

        def acf_drawing(plt: Plot, width: int) -> None:
            plt.title(f"autocorrelation, {where}")
            lags, low = 0, 0.0
            for i in order:
                xs, ys = mix.acf_points(i)
                if xs:
                    plt.plot(xs, ys, marker="braille", color=colour_of(views[i].start.chain))
                    lags, low = max(lags, xs[-1]), min(low, *ys)
            plt.hline(0.0, color=GREY)
            # from the lowest value (or 0) to 1, the lag-0 value: 0 is a tick, on the zero line
            bottom, top, ticks, labels = row_ticks(max(-1.0, low), 1.0, acf.canvas_rows())
            plt.ylim(bottom, top)
            plt.yticks(ticks, labels)
            plt.xticks([float(x) for x in range(0, lags + 1, max(1, -(-lags // 6)))])  # lags from 0
            plt.xlabel("lag")

        def rhat_drawing(plt: Plot, width: int) -> None:
            xs, ys = mix.rhat_points()
            if len(views) < 2:
                plt.title("running R-hat: needs two chains or more")
                return
            infinite = [n for n, r in mix.rhat if r is not None and math.isinf(r)]
            # an infinite R-hat (no chain varies within itself) is said, not drawn: it has no place on an axis
            title = f"running R-hat, {where}" + ("" if not infinite else ": inf" if not xs else
                                                 f"; inf to n={max(infinite)}")
            plt.title(title[:max(1, width - 2)])  # (plotext drops a title wider than the plot)
            if xs:
                plt.plot(xs, ys, marker="braille", color=LIGHT)
                plt.hline(RHAT_MAX, color=GREY)
                bottom, top, ticks, labels = row_ticks(min(1.0, *ys), max(RHAT_MAX, *ys), rhat.canvas_rows())
                plt.ylim(bottom, top)
                plt.yticks(ticks, labels)
                plt.xlim(min(xs) - 0.5, max(xs) + 0.5)
                plt.xticks([float(n) for n in range(xs[0], xs[-1] + 1, max(1, -(-(xs[-1] - xs[0] + 1) // 6)))])
            plt.xlabel(f"first n draws (line: {RHAT_MAX})")

        acf.show(acf_drawing)
        rhat.show(rhat_drawing)

    def _text(self, v: SessionView) -> Text:
        s = v.summary
        t = Text()
        last = s.draws[-1] if s.draws else None
        did = f"drawn {s.info.drawn()}" if self.one_shot else \
            f"{s.transitions} transitions, acceptance {s.acceptance_rate:.2f}"
        t.append(f"chain {v.start.chain + 1} (seed {v.params.get('seed')}): {s.status}, {did}", style="bold")
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

    def _no_draws(self) -> bool:
        if self.one_shot:
            self.notify("one-shot sessions make no transitions: no draws to thin or export", timeout=4)
        return self.one_shot

    def action_selection(self) -> None:
        """`b`: the burn-in and thinning the diagnostics read."""
        if self._no_draws():
            return
        def done(chosen: Selection | None) -> None:
            if chosen is not None and chosen != self.selection:
                self.selection = chosen
                self.draw()
                self.notify(f"diagnostics over {chosen.words}", timeout=4)

        self.app.push_screen(SelectionScreen(self.selection, self.steps), done)

    def action_export(self) -> None:
        """`e`: every chain's draws, as `run --draws` writes them."""
        if self._no_draws():
            return
        def done(result: tuple[str, Path] | None) -> None:
            if result is not None:
                self.export(*result)

        self.app.push_screen(DrawsExportScreen(self.export_dir), done)

    def export(self, kind: str, folder: Path) -> None:
        """Write the draws as `kind` (csv, nc, both) into `folder`; one toast either way."""
        self.export_dir = folder
        stem = f"s{self.members[0] + 1}-draws"  # named after the prompt's first chain's session
        try:
            paths = export.write_draws(folder, stem, export.chain_draws(self.state, self.members), self.selection,
                                       kind)
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify("wrote " + " and ".join(clip(str(p), 200) for p in paths) + f" ({self.selection.words})",
                    timeout=6, markup=False)
