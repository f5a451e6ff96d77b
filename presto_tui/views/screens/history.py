"""A session's whole chain (`H` on a round view): the log-target and log-likelihood over every
transition, the distinct states it visited, and their export (`state/history.py` computes them)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static
from textual_plotext import PlotextPlot

from presto_tui.api.events import cut_at_eos
from presto_tui.views.dialogs.export import HistoryExportScreen
from presto_tui.views.screens.drawing import number_cell, theme_colour, thinned
from presto_tui.views.state import export
from presto_tui.views.state.evolution import Writer, clip
from presto_tui.views.state.history import ChainHistory, chain_history
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.words import count

CONTEXT_TOKENS = 4  # tokens of a visited state shown before where it differs from its block's start


class HistoryScreen(Screen[None]):
    """The log-target and log-likelihood over every transition (accepted ones marked), and the
    distinct states the chain visited: how often, first and last visit, their text."""

    BINDINGS = [
        Binding("escape,H", "close", "back"),
        Binding("e", "export", "export"),
    ]

    def __init__(self, state: AppState, session: int, folder: Path) -> None:
        super().__init__()
        self.state, self.session, self.folder = state, session, folder
        self.view = state.sessions[session]
        self.history: ChainHistory = chain_history(self.view)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="hist-info")
        with Horizontal(id="hist-plots"):
            yield PlotextPlot(id="hist-target")
            yield PlotextPlot(id="hist-loglik")
        yield DataTable(id="hist-states", cursor_type="row", zebra_stripes=True)
        yield FittedFooter()

    def on_mount(self) -> None:
        h, p = self.history, self.view.params
        info = Text()
        info.append(self.state.session_words(self.session), style="bold")
        alike = sum(v.twin_from is not None for v in h.states)
        info.append(f" · {p.get('sampler')} {p.get('prefetch')}/{p.get('inputs')} alpha {p.get('alpha'):g} · "
                    f"{count(len(h.steps), 'transition')}, {h.accepted} accepted · "
                    f"{count(len(h.states), 'distinct state')}"
                    + (f" ({alike} read alike up to EOS: their text shows where they differ after it)"
                       if alike else ""))
        info.append("\n> " + clip(self.view.start.prompt.replace("\n", " ⏎ "), 200), style="dim")
        if not h.diagnostics:
            info.append("\nlog-target and log-likelihood not recorded in this trace (transition events, schema 1.2): "
                        "the plot shows which state the chain was in", style="bold")
        self.query_one("#hist-info", Static).update(info)
        table = self.query_one("#hist-states", DataTable)
        for name in ("state", "visits", "first", "last", "log-target", "differs from", "text (from a little before)"):
            table.add_column(name, key=name)
        eos = self.view.start.backend_info.get("eos_id")
        for j, v in enumerate(h.states):
            # states of a chain share long prefixes: the text starts a little before where it leaves the
            # block's start (the export holds the whole text)
            text = Text(no_wrap=True, overflow="ellipsis")
            answer = cut_at_eos(v.tokens, eos)
            lead = max(0, v.from_start - CONTEXT_TOKENS) if v.from_start < len(answer) else 0
            if v.twin_from is not None:  # what tells it apart lies after EOS: the answer's end is context enough
                lead = max(lead, len(answer) - CONTEXT_TOKENS)
            if lead:
                text.append("…", style="dim")
            Writer(text, self.state.pieces, 200).tokens(answer[lead:])
            if len(answer) < len(v.tokens):
                text.append(" [EOS]", style="dim")
            if v.twin_from is not None:  # another state reads the same: the tokens after EOS that tell them apart
                text.append(f" · after EOS, from token {v.twin_from}: ", style="dim")
                Writer(text, self.state.pieces, 200).tokens(v.tokens[v.twin_from:])
            differs = "-" if v.from_start >= len(v.tokens) else str(v.from_start)
            table.add_row(*(Text(str(x), justify="right") for x in (j + 1, v.visits, v.first, v.last)),
                          number_cell(v.log_target, 2), Text(differs, justify="right"), text, key=str(j))
        table.focus()
        self._plots()

    def on_resize(self) -> None:
        self._plots()

    def _plots(self) -> None:
        h = self.history
        xs = [s.n for s in h.steps]
        accepted = theme_colour(self, "mh-accept")
        line = theme_colour(self, "mh-cursor")
        series: tuple[tuple[str, str, list[float | None]], ...]
        if h.diagnostics:
            series = (("#hist-target", "log-target alpha log p0(x) (dots: accepted)",
                       [s.log_target for s in h.steps]),
                      ("#hist-loglik", "log-likelihood per token (eq. 21)", [s.loglik for s in h.steps]))
        else:  # no diagnostics to plot: which state the chain was in, over the whole width
            self.query_one("#hist-loglik").display = False
            series = (("#hist-target", "state visited (dots: accepted)", [s.state + 1.0 for s in h.steps]),)
        for wid, title, ys in series:
            plot = self.query_one(wid, PlotextPlot)
            plt = plot.plt
            plt.clear_figure()
            plt.title(title)  # our own words only: plotext's output is parsed as ANSI
            keep = [i for i in thinned(len(xs), plot.size.width) if ys and ys[i] is not None
                    and math.isfinite(ys[i])]  # type: ignore[arg-type]
            if keep:
                plt.plot([xs[i] for i in keep], [ys[i] for i in keep], marker="braille", color=line)
                acc = [i for i in keep if h.steps[i].accepted]
                if acc and wid == "#hist-target":
                    plt.scatter([xs[i] for i in acc], [ys[i] for i in acc], marker="dot", color=accepted)
                plt.xlim(0.5, max(xs) + 0.5)
                plt.xticks(list(range(1, max(xs) + 1, max(1, -(-max(xs) // 6)))))
                plt.xlabel("transition")
            plot.refresh()

    def action_export(self) -> None:
        def done(result: tuple[str, Path] | None) -> None:
            if result is not None:
                self.export(*result)

        self.app.push_screen(HistoryExportScreen(self.folder), done)

    def export(self, kind: str, folder: Path) -> None:
        """Write the history as JSON or CSV into `folder`; one toast either way."""
        self.folder = folder
        unit = self.view.unit
        stem = f"{self.state.stem(self.session)}-history"
        try:
            if kind == "json":
                paths = [export.write(folder, export.file_name(stem, None, "json", unit),
                                      export.history_as_json(self.state, self.view, self.session, self.history))]
            else:
                steps, states = export.history_as_csv(self.state, self.view, self.history)
                paths = [export.write(folder, export.file_name(stem, None, "csv", unit), steps),
                         export.write(folder, export.file_name(f"{self.state.stem(self.session)}-states", None, "csv",
                                                               unit),
                                      states)]
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify("wrote " + " and ".join(clip(str(p), 200) for p in paths), timeout=5, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
