"""A researcher's screens over the sessions of a round view: two sessions side by side (`c`),
a scored node's ratio per token (`t`) and a session's whole chain history (`H`).

They draw what the pure modules compute (compare.py, tokens.py, history.py) and
hold no sampling logic; every string from a model or a trace goes through
`visible()` (via `clip` and the evolution writer) into a `rich.text.Text`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static
from textual_plotext import PlotextPlot

from presto_tui.runtime.core.types import cut_at_eos
from presto_tui.safetext import visible
from presto_tui.views import export
from presto_tui.views.compare import ParamRow, acceptance_curve, answer_diff, outcome_rows, param_rows
from presto_tui.views.evolution import DiffStyles, Writer, clip
from presto_tui.views.history import ChainHistory, chain_history
from presto_tui.views.layout import symbol
from presto_tui.views.screens import ChoiceExportScreen, export_bindings
from presto_tui.views.state import AppState, SessionView
from presto_tui.views.tokens import NOT_RECORDED, TokenSplit, token_split
from presto_tui.views.widgets import ratio_terms

if TYPE_CHECKING:
    from presto_tui.views.round_screen import RoundScreen

TOKEN_TEXT = 14  # characters of a token's text in a table cell
DRIVERS = 3  # positions marked as the largest shares of log r
CONTEXT_TOKENS = 4  # tokens of a visited state shown before where it differs from its block's start


def _index_of(state: AppState, session: SessionView) -> int:
    return next(i for i, s in enumerate(state.sessions) if s is session)


def _colour(screen: Screen, var: str) -> tuple[int, int, int]:
    return Color.parse(screen.app.theme_variables.get(var, "#888888")).rgb


def _diff_styles(screen: Screen) -> DiffStyles:
    hexa = lambda var: Color(*_colour(screen, var)).hex
    return DiffStyles(removed=Style(color=hexa("mh-reject"), strike=True),
                      added=Style(color=hexa("mh-accept"), bold=True, underline=True))


def _thinned(n: int, width: int) -> list[int]:
    """At most about two indices per plot column (braille resolution), the last one kept: the cost
    of drawing follows the plot's width, not the session's length."""
    stride = max(1, -(-n // max(1, 2 * width)))
    keep = list(range(0, n, stride))
    if keep and keep[-1] != n - 1:
        keep.append(n - 1)
    return keep


# -- the keys on a round view ----------------------------------------------------------------------

def mark_or_compare(screen: RoundScreen) -> None:
    """`c`: mark the session on screen; on another session, open the two side by side."""
    session = screen.shown_session()
    if session is None:
        screen.notify("no session yet: c marks a session for comparison", timeout=3)
        return
    s = _index_of(screen.state, session)
    mark = screen.compare_mark
    if mark == s:
        screen.compare_mark = None
        screen.notify(f"session {s + 1} is no longer marked for comparison", timeout=3)
    elif mark is None:
        screen.compare_mark = s
        screen.notify(f"session {s + 1} marked: press c on another session to compare them "
                      "(g S:N goes to session S; c here again unmarks)", timeout=6)
    else:
        screen.compare_mark = None
        screen.app.push_screen(CompareScreen(screen.state, mark, s))


def open_tokens(screen: RoundScreen) -> None:
    """`t`: the selected node's ratio per token."""
    tree, session = screen.shown_tree(), screen.shown_session()
    v = tree.node(screen.tree_view.selected) if tree is not None else None
    split = token_split(tree, v, float(session.params["alpha"])) if (
        tree is not None and v is not None and session is not None) else None
    if split is None:
        what = f"node #{v.id} is {v.status}" if v is not None else "no node is selected"
        screen.notify(f"t: the per-token view needs a scored node with its proposal ({what})", timeout=4)
        return
    where = ""
    rd = screen.current_round()
    if screen.cursor is not None and rd is not None and rd.tree is tree:  # not a live epoch still growing
        s, r = screen.cursor
        where = f"session {s + 1} · {screen.state.sessions[s].unit} {r + 1} · "
    screen.app.push_screen(TokenScreen(split, screen.state, where))


def open_history(screen: RoundScreen) -> None:
    """`H`: the whole chain of the session on screen."""
    session = screen.shown_session()
    if session is None or not session.rounds:
        screen.notify("H: the chain's history needs a session with transitions", timeout=3)
        return
    screen.app.push_screen(HistoryScreen(screen.state, _index_of(screen.state, session), screen.export_dir))


# -- two sessions side by side ---------------------------------------------------------------------

class CompareScreen(Screen[None]):
    """Sessions A and B: parameters (those that differ first, marked ≠), outcomes, acceptance
    curves over transitions in one plot, both answers and a token-level diff of them."""

    BINDINGS = [
        Binding("escape,c", "close", "back"),
        Binding("x", "swap", "swap A and B"),
    ]
    DEFAULT_CSS = """
    CompareScreen { layout: vertical; overflow: hidden; }
    #cmp-info { height: 1; color: $text-muted; padding: 0 1; }
    #cmp-top { height: 2fr; min-height: 8; }
    #cmp-params { width: 1fr; padding: 0 1; }
    #cmp-plot { width: 1fr; }
    #cmp-answers { height: 1fr; min-height: 4; border-top: solid $primary 40%; }
    #cmp-answers VerticalScroll { width: 1fr; padding: 0 1; }
    #cmp-answer-a { border-right: solid $primary 40%; }
    #cmp-diff { height: 1fr; min-height: 3; border-top: solid $primary 40%; padding: 0 1; }
    CompareScreen > .cmp--differs { color: $warning; text-style: bold; }
    """
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
            yield PlotextPlot(id="cmp-plot")
        with Horizontal(id="cmp-answers"):
            with VerticalScroll(id="cmp-answer-a"):
                yield Static(id="cmp-answer-a-body")
            with VerticalScroll(id="cmp-answer-b"):
                yield Static(id="cmp-answer-b-body")
        with VerticalScroll(id="cmp-diff"):
            yield Static(id="cmp-diff-body")
        yield Footer()

    def on_mount(self) -> None:
        self.draw()

    def on_resize(self) -> None:
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
                            styles=_diff_styles(self))
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
        plot = self.query_one("#cmp-plot", PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        # our own words only (plotext's output is parsed as ANSI); the markers are named in the title,
        # not in a legend, which plotext draws over the curves' start
        plt.title("running acceptance: A line, B dots")
        top = 0
        for s, var, marker in ((sa, "mh-accept", "braille"), (sb, "mh-reject", "dot")):
            ys = acceptance_curve(s)
            if not ys:
                continue
            keep = _thinned(len(ys), plot.size.width)
            plt.plot([i + 1 for i in keep], [ys[i] for i in keep], marker=marker, color=_colour(self, var))
            top = max(top, len(ys))
        if top:
            plt.ylim(0, 1)
            plt.xlim(0.5, top + 0.5)
            plt.xticks(list(range(1, top + 1, max(1, -(-top // 6)))))  # about six whole transitions
            plt.xlabel("transition")
        plot.refresh()

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


# -- a node's ratio per token ----------------------------------------------------------------------

def token_label(piece: str) -> str:
    """A token's text in a table cell: line breaks and tabs as ⏎ and ⇥, a token of spaces as ␣
    (a blank cell says nothing), everything else as visible() shows it, cut to TOKEN_TEXT."""
    shown = piece.replace("\n", "⏎").replace("\t", "⇥")
    if shown and not shown.strip():
        shown = shown.replace(" ", "␣")
    return clip(visible(shown, keep_newlines=False), TOKEN_TEXT)


def _num(x: float | None, digits: int = 4) -> Text:
    s = "—" if x is None or math.isnan(x) else f"{x:.{digits}f}"
    return Text(s, justify="right")


class TokenScreen(Screen[None]):
    """Per position from the cut: the proposal's token with log p0 and log q_tau, the replaced
    state's token with its own, the running target and proposal terms and the position's share of
    log r; the totals against the node's recorded terms below."""

    BINDINGS = [
        Binding("escape,t", "close", "back"),
        Binding("s", "sort", "sort: position / share"),
    ]
    DEFAULT_CSS = """
    TokenScreen { layout: vertical; }
    #tok-info { height: auto; padding: 0 1; }
    #tok-table { height: 1fr; }
    #tok-totals { height: auto; max-height: 14; padding: 0 1; border-top: solid $primary 40%; }
    TokenScreen > .tok--driver { color: $warning; text-style: bold; }
    TokenScreen > .tok--same { color: $text-muted; }
    TokenScreen > .tok--bad { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES = {"tok--driver", "tok--same", "tok--bad"}
    COLUMNS = ("pos", "proposal y", "log p0", "log q", "replaced x", "log p0 ", "log q ", "Σ target", "Σ proposal",
               "Δ log r")

    def __init__(self, split: TokenSplit, state: AppState, where: str = "") -> None:
        super().__init__()
        self.split, self.state, self.where = split, state, where
        self.by_share = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="tok-info")
        yield DataTable(id="tok-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="tok-totals"):
            yield Static(id="tok-totals-body")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        delta = "Δ log r" if self.split.sampler != "multitry" else "Δ target"
        for name in self.COLUMNS:
            table.add_column(delta if name == "Δ log r" else name.strip(), key=name)
        self.query_one("#tok-info", Static).update(self._info())
        self.query_one("#tok-totals-body", Static).update(self._totals())
        self._fill()
        table.focus()

    def _info(self) -> Text:
        sp, v = self.split, self.split.node
        d = v.decision
        t = Text()
        t.append(f"{self.where}node #{v.id} ({symbol(sp.score.eps_class)} {sp.score.eps_class}, depth {v.depth})",
                 style="bold")
        t.append(f" · decision k={d.index if d else '?'} · cut {sp.cut} of T={sp.T} · alpha {sp.alpha:g} · "
                 f"{sp.sampler}")
        t.append(f"\nthe proposal y ({len(sp.rows)} tokens from the cut) against the suffix x of the state it would "
                 "replace; target = alpha (log p0(y) - log p0(x)), proposal = log q(x) - log q(y)", style="dim")
        if not sp.recorded:
            t.append(f"\n{NOT_RECORDED}: the tokens are listed, their values are not",
                     style=self.get_component_rich_style("tok--bad"))
        return t

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        sp = self.split
        drivers = set(sp.drivers(DRIVERS))
        order: list[int] = list(range(len(sp.rows)))
        if self.by_share and sp.recorded:
            order = sorted(order, key=lambda i: -abs(sp.rows[i].delta) if math.isfinite(sp.rows[i].delta) else 0.0)
        driver_style = self.get_component_rich_style("tok--driver")
        same_style = self.get_component_rich_style("tok--same")
        for i in order:
            r = sp.rows[i]
            # the same token in both: dim (it moves log r only through its context)
            style = same_style if r.x == r.y else ""
            tok = lambda t, style=style: Text(token_label(self.state.pieces([t])[0]), style=style)
            delta = _num(r.delta, 3) if sp.recorded else _num(None)
            if i in drivers:
                delta.stylize(driver_style)
                delta = Text("◆ ", style=driver_style) + delta
            table.add_row(Text(str(r.pos), justify="right"), tok(r.y), _num(r.y_logp), _num(r.y_logq), tok(r.x),
                          _num(r.x_logp), _num(r.x_logq), _num(r.target if sp.recorded else None, 3),
                          _num(r.proposal if sp.recorded else None, 3), delta, key=str(i))

    def _totals(self) -> Text:
        sp, sc = self.split, self.split.score
        bad = self.get_component_rich_style("tok--bad")
        t = Text()
        for c in sp.checks:
            t.append(f"{c.name:<9} Σ over the tokens {c.total:9.3f}   recorded {c.recorded:9.3f}   ")
            if c.agrees:
                exact = "equal" if c.total == c.recorded else f"equal within the values' rounding (±{c.tolerance:.4f})"
                t.append(f"✓ {exact}\n")
            else:
                t.append(f"✗ differ by {c.total - c.recorded:.4f}: the trace is inconsistent\n", style=bad)
        # the inspector's own equation: the same named terms, which add up to log r
        terms = ratio_terms(sc)
        t.append(f"log r = {sc.log_ratio:.3f} =" + "".join(
            f"{' ' + sign if i else ''} {name} {value:.3f}" for i, (sign, name, value) in enumerate(terms)) + "   ")
        t.append(f"A = {sc.accept_prob:.4f}", style="bold")
        drivers = sp.drivers(DRIVERS)
        if drivers:
            t.append("\nlargest shares (◆): ")
            for n, i in enumerate(drivers):
                r = sp.rows[i]
                t.append(("  " if n else "") + f"pos {r.pos} {token_label(self.state.pieces([r.y])[0])} {r.delta:+.3f}")
        for note in sp.notes:
            t.append("\n" + note, style="dim")
        return t

    def action_sort(self) -> None:
        if not self.split.recorded:
            self.notify(f"{NOT_RECORDED}: there are no shares to sort by", timeout=3)
            return
        self.by_share = not self.by_share
        self._fill()
        self.notify("sorted by the size of each position's share" if self.by_share else "sorted by position",
                    timeout=2)

    def action_close(self) -> None:
        self.dismiss(None)


# -- a session's whole chain ---------------------------------------------------------------------

HISTORY_EXPORTS = (
    ("j", "json", "JSON: every transition and every distinct state"),
    ("v", "csv", "CSV: the transitions, and the states in a second file"),
)


class HistoryExportScreen(ChoiceExportScreen):
    """JSON (transitions and states) or CSV (two files), into a folder."""

    HEADING = "Export the chain's history (a key, or click)"
    OPTIONS = HISTORY_EXPORTS
    BINDINGS = export_bindings(HISTORY_EXPORTS)


class HistoryScreen(Screen[None]):
    """The log-target and log-likelihood over every transition (accepted ones marked), and the
    distinct states the chain visited: how often, first and last visit, their text."""

    BINDINGS = [
        Binding("escape,H", "close", "back"),
        Binding("e", "export", "export"),
    ]
    DEFAULT_CSS = """
    HistoryScreen { layout: vertical; }
    #hist-info { height: auto; padding: 0 1; }
    #hist-plots { height: 1fr; min-height: 8; }
    #hist-plots PlotextPlot { width: 1fr; }
    #hist-states { height: 1fr; min-height: 5; border-top: solid $primary 40%; }
    """

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
        yield Footer()

    def on_mount(self) -> None:
        h, p = self.history, self.view.params
        info = Text()
        info.append(f"session {self.session + 1} of {len(self.state.sessions)}", style="bold")
        info.append(f" · {p.get('sampler')} {p.get('prefetch')}/{p.get('inputs')} alpha {p.get('alpha'):g} · "
                    f"{len(h.steps)} transitions, {h.accepted} accepted · {len(h.states)} distinct states")
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
            if lead:
                text.append("…", style="dim")
            Writer(text, self.state.pieces, 200).tokens(answer[lead:])
            if len(answer) < len(v.tokens):
                text.append(" [EOS]", style="dim")
            differs = "-" if v.from_start >= len(v.tokens) else str(v.from_start)
            table.add_row(*(Text(str(x), justify="right") for x in (j + 1, v.visits, v.first, v.last)),
                          _num(v.log_target, 2), Text(differs, justify="right"), text, key=str(j))
        table.focus()
        self._plots()

    def on_resize(self) -> None:
        self._plots()

    def _plots(self) -> None:
        h = self.history
        xs = [s.n for s in h.steps]
        accepted = self._colour("mh-accept")
        line = self._colour("mh-cursor")
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
            keep = [i for i in _thinned(len(xs), plot.size.width) if ys and ys[i] is not None
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

    def _colour(self, var: str) -> tuple[int, int, int]:
        return _colour(self, var)

    def action_export(self) -> None:
        def done(result: tuple[str, Path] | None) -> None:
            if result is not None:
                self.export(*result)

        self.app.push_screen(HistoryExportScreen(self.folder), done)

    def export(self, kind: str, folder: Path) -> None:
        """Write the history as JSON or CSV into `folder`; one toast either way."""
        self.folder = folder
        unit = self.view.unit
        stem = f"s{self.session + 1}-history"
        try:
            if kind == "json":
                paths = [export.write(folder, export.file_name(stem, None, "json", unit),
                                      export.history_as_json(self.state, self.view, self.session, self.history))]
            else:
                steps, states = export.history_as_csv(self.state, self.view, self.history)
                paths = [export.write(folder, export.file_name(stem, None, "csv", unit), steps),
                         export.write(folder, export.file_name(f"s{self.session + 1}-states", None, "csv", unit),
                                      states)]
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify("wrote " + " and ".join(clip(str(p), 200) for p in paths), timeout=5, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
