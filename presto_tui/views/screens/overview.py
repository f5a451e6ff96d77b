"""The session overview: the whole chain at a glance, one column per round (or epoch).

- the chain strip: per round, the transitions walked (a bar) and the class of every
  walked decision from top to bottom (✓ ✗ ?), then why the walk stopped (⏸ deferred,
  ○ leaf); the selected column is underlined by ▲;
- the cut strip over the response's token positions: how often the chain cut at each
  position over the whole session (shading), and where the selected round cut;
- acceptance and transitions per call over the rounds, each round's value and the
  running value (SessionSummary's definitions), drawn with textual-plotext; streaming
  sessions plot transitions per second over windows of engine time (state/series.py says why);
- the chain's text after the selected round, with the span it changed marked.

←/→ (or a click) select a round, Enter (or a click on the selected column) opens its
tree, [ ] switch sessions.  A live chat's overview follows new rounds (at most four
updates a second).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static
from textual_plotext import PlotextPlot

from presto_tui.views.screens.drawing import diff_styles, theme_colour, thinned
from presto_tui.views.state.evolution import clip, evolution_text, span_note
from presto_tui.views.state.members import rounds_note
from presto_tui.views.state.reducer import AppState
from presto_tui.views.state.series import ChainSeries
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.views.widgets.strips import MAX_ROWS, ChainStrip, CutStrip

POLL_S = 0.25  # a live session's new rounds reach the overview at most four times a second
PLOTS_MIN_HEIGHT = 28  # below this many rows the plots give way to the strip and the text


class OverviewScreen(Screen[tuple[int, int] | None]):
    """The chain of one session at a glance; dismisses with the (session, round) to open, or None."""

    BINDINGS = [
        Binding("left,h", "move(-1)", "prev", key_display="←"),  # a round or an epoch: the info line says which
        Binding("right,l", "move(1)", "next", key_display="→"),
        Binding("home", "move_to(0)", "first", show=False),
        Binding("end", "move_to(-1)", "last", show=False),
        Binding("pageup", "move(-20)", "-20", show=False),
        Binding("pagedown", "move(20)", "+20", show=False),
        Binding("enter", "open", "open its tree"),
        Binding("left_square_bracket", "session(-1)", "prev session"),
        Binding("right_square_bracket", "session(1)", "next session"),
        Binding("escape,o", "close", "back"),
    ]

    def __init__(self, state: AppState, session: int, round_: int, follow: bool = False) -> None:
        super().__init__()
        self.state = state
        self.session = session
        self.selected = round_
        self.follow = follow  # a live session's newest round stays selected
        self.series = ChainSeries(state.sessions[session])

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="ov-info")
        yield ChainStrip(id="ov-strip")
        yield CutStrip(id="ov-cuts")
        with Horizontal(id="ov-plots"):
            yield PlotextPlot(id="ov-acceptance")
            yield PlotextPlot(id="ov-rate")
        with VerticalScroll(id="ov-text"):
            yield Static(id="ov-text-body")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.series.update()
        if self.follow:
            self.selected = len(self.series.columns) - 1
        self.set_interval(POLL_S, self._poll)
        self.draw()

    def on_resize(self) -> None:
        self.query_one("#ov-plots").display = self.size.height >= PLOTS_MIN_HEIGHT
        self.draw()

    def _poll(self) -> None:
        if self.series.update():
            if self.follow:
                self.selected = len(self.series.columns) - 1
            self.draw()

    # -- drawing ----------------------------------------------------------------------
    def draw(self) -> None:
        cols = self.series.columns
        self.selected = max(0, min(self.selected, len(cols) - 1))
        col = cols[self.selected] if cols else None
        with self.app.batch_update():
            self.query_one("#ov-info", Static).update(self._info())
            rows = max(4, min(MAX_ROWS, self.size.height // 3))  # a third of the screen at most
            self.query_one("#ov-strip", ChainStrip).show(cols, self.selected, rows)
            self.query_one("#ov-cuts", CutStrip).show(self.series, col)
            self._plots()
            self.query_one("#ov-text-body", Static).update(self._text())

    def _info(self) -> Text:
        view = self.state.sessions[self.session]
        p = view.params
        cols = self.series.columns
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(self.state.session_words(self.session), style="bold")
        t.append(f" · {p.get('sampler')} {p.get('prefetch')}/{p.get('inputs')} N={p.get('budget')} "
                 f"K={p.get('steps')} · {len(cols)} {view.unit}s, "
                 f"{sum(c.transitions for c in cols)} transitions · ")
        if cols:
            t.append(f"{view.unit} {self.selected + 1} selected · ")
        t.append("> " + clip(view.start.prompt.replace("\n", " "), 200))
        return t

    def _plots(self) -> None:
        if not self.query_one("#ov-plots").display:
            return  # a short terminal: no plots to draw
        cols = self.series.columns
        xs = [c.round + 1 for c in cols]
        for wid, title, per_round, running, colour in (
            ("#ov-acceptance", f"acceptance (dots: per {self.series.session.unit}; line: running)",
             [c.acceptance for c in cols], [c.cum_acceptance for c in cols], "mh-accept"),
            ("#ov-rate", self.rate_title(self.query_one("#ov-rate").size.width - 4), self.series.rates(),
             [c.cum_rate for c in cols], "mh-uncertain"),
        ):
            plot = self.query_one(wid, PlotextPlot)
            plt = plot.plt
            plt.clear_figure()
            plt.title(title)  # our own words only: plotext's output is parsed as ANSI
            if xs:
                keep = thinned(len(xs), plot.size.width)  # drawing costs what the plot's width shows
                kx = [xs[i] for i in keep]
                plt.scatter(kx, [per_round[i] for i in keep], marker="dot", color=theme_colour(self, colour))
                plt.plot(kx, [running[i] for i in keep], marker="braille", color=theme_colour(self, "mh-cursor"))
                plt.vline(self.selected + 1, color=theme_colour(self, "mh-reject"))
                plt.xlim(0.5, max(xs) + 0.5)
                step = max(1, -(-len(xs) // 6))  # at most about six whole-round ticks
                plt.xticks(list(range(1, len(xs) + 1, step)))
            plot.refresh()

    def rate_title(self, width: int = 1000) -> str:
        """What the rate plot's dots and line are (an epoch's own span is never divided by), in at
        most `width` characters where it can: plotext drops a title wider than its plot."""
        if not self.series.per_second:
            return f"{self.series.rate_name} (dots: per {self.series.session.unit}; line: running)"
        w = f"{self.series.window_s:g} s"
        titles = (f"tr/s over {w} of engine time (dots); running (line)", f"tr/s over {w} windows; running (line)",
                  f"tr/s, {w} windows")
        return next((t for t in titles if len(t) <= width), titles[-1])

    def _text(self) -> Text:
        cols = self.series.columns
        view = self.state.sessions[self.session]
        if not cols:
            return Text(rounds_note(view.method_run) if view.method_run is not None else f"no {view.unit}s yet",
                        style="dim")
        rd = view.rounds[self.selected]
        before, after = rd.tree.root.tokens, rd.tree.final_state.tokens
        t = Text()
        t.append(f"after {view.unit} {self.selected + 1} (block {rd.block + 1}, k {rd.k_before}->{rd.k_after}): "
                 f"{span_note(before, after)}\n", style="bold")
        t.append_text(evolution_text(before, after, self.state.pieces,
                                     eos_id=view.start.backend_info.get("eos_id"), styles=diff_styles(self)))
        return t

    # -- keys and clicks -----------------------------------------------------------------
    def action_move(self, step: int) -> None:
        self.selected = max(0, min(len(self.series.columns) - 1, self.selected + step))
        self.follow = self.selected == len(self.series.columns) - 1
        self.draw()

    def action_move_to(self, i: int) -> None:
        self.action_move((i % max(1, len(self.series.columns))) - self.selected)

    def action_session(self, step: int) -> None:
        s = max(0, min(len(self.state.sessions) - 1, self.session + step))
        if s != self.session:
            self.session, self.selected = s, 0
            self.series = ChainSeries(self.state.sessions[s])
            self.series.update()
            self.draw()

    def action_open(self) -> None:
        self.dismiss((self.session, self.selected) if self.series.columns else None)

    def action_close(self) -> None:
        self.dismiss(None)

    def on_chain_strip_picked(self, message: ChainStrip.Picked) -> None:
        if message.open:
            self.action_open()
        else:
            self.action_move(message.column - self.selected)
