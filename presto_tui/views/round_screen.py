"""The round view both screens share: tree, stats, inspector and the chain's text.

`RoundScreen` holds an `AppState` and a cursor (session, round) and draws the
round under the cursor; `ChatScreen` feeds it live events, `ReplayScreen` a
trace's.  Drawing is one batched screen update per change.  Keys every round
view has: rounds (`[` `]` Home End `g`), the tree's view (`f` `+` `-`), the
session overview (`o`), the prompt's chains (`m`), search (`/` `n` `N`), export (`e`), and
a researcher's screens (views/research.py: `c` compares two sessions, `t` splits a node's ratio
by token, `H` shows the chain's history).

A baseline session (no rounds, no tree) takes one place on the timeline; there
the tree pane shows its samples or particles instead (`baseline_view`), and the
stats, inspector and answer panes speak of them.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from presto_tui.runtime.core.types import cut_at_eos
from presto_tui.runtime.prefetch.tree import RoundTree
from presto_tui.runtime.session.events import RoundDone
from presto_tui.views import baseline_view as bv
from presto_tui.views import export, research
from presto_tui.views.baseline_state import NO_ROUNDS
from presto_tui.views.baseline_view import BaselineTable, PaneTitle, ParticleGrid, SampleTable
from presto_tui.views.chains import ChainsScreen
from presto_tui.views.evolution import DiffStyles, clip, evolution_text, span_note
from presto_tui.views.layout import REACH_FLOOR, layout
from presto_tui.views.overview import OverviewScreen
from presto_tui.views.screens import ExportScreen, GoToScreen
from presto_tui.views.search import QueryError, Search, parse
from presto_tui.views.sps_state import cell_text as sps_cell_text
from presto_tui.views.sps_view import SpsGrid
from presto_tui.views.state import AppState, SessionView
from presto_tui.views.widgets import Inspector, Legend, RoundTreeView, StatsPanel, TreeTitle

EXPORT_DIR = Path("exports")
LEGEND_MIN_HEIGHT = 30  # below this many rows the legend gives its line to the tree (it is in the help)
TITLE_3_LINES_MIN_HEIGHT = 24  # the tree's title folds to 3 lines at 80x24 (48 columns), to 2 below


class SearchBar(Input):
    """The search query; Enter searches, Escape closes (before the screen's Escape, which cancels)."""

    BINDINGS = [Binding("escape", "close", "close search", show=False)]

    def action_close(self) -> None:
        self.screen.query_one("#search-row").display = False
        self.screen.main_view.focus()  # type: ignore[attr-defined]


class RoundScreen(Screen):
    BINDINGS = [  # tree navigation keys: RoundTreeView.BINDINGS
        Binding("left_square_bracket", "round(-1)", "prev round"),
        Binding("right_square_bracket", "round(1)", "next round"),
        Binding("o", "overview", "overview"),
        Binding("m", "chains", "chains", show=False),  # taught in the help; most sessions are one chain
        Binding("slash", "search", "search"),
        Binding("n", "search_step(True)", "next match"),
        Binding("N", "search_step(False)", "prev match"),
        Binding("g", "goto", "go to"),
        Binding("e", "export", "export"),
        Binding("c", "compare", "compare", show=False),
        Binding("t", "tokens", "per token", show=False),
        Binding("H", "history", "history", show=False),
        Binding("f", "toggle_view", "full/rounded", show=False),
        Binding("plus,equals_sign", "reach(0.1)", "more", show=False),
        Binding("minus", "reach(10)", "fewer", show=False),
    ]
    # actions of printable keys, which a focused text field types instead: hidden from the footer then
    LETTER_ACTIONS = {"overview", "chains", "search", "search_step", "goto", "export", "toggle_view", "reach",
                      "round", "play", "speed", "pause", "focus_prompt", "compare", "tokens", "history"}
    DEFAULT_CSS = """
    RoundScreen > .output--removed { color: $mh-reject; text-style: strike; }
    RoundScreen > .output--added { color: $mh-accept; text-style: bold underline; }
    """
    COMPONENT_CLASSES = {"output--removed", "output--added"}

    def __init__(self, state: AppState | None = None) -> None:
        super().__init__()
        self.state = state or AppState()
        self.cursor: tuple[int, int] | None = None  # (session, round) on screen
        self.follow = True  # jump to each new round as it arrives (chat)
        self._inspected: tuple | None = None  # (round, node) the inspector shows
        self.search: Search | None = None
        self.search_status = ""
        self.export_dir = EXPORT_DIR
        self.compare_mark: int | None = None  # the session `c` marked, to compare with another

    def compose_round_view(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PaneTitle(id="tree-title")
                yield Static(id="search-status")  # shown while a search is active
                yield Legend(id="legend")
                yield RoundTreeView(id="tree")
                # a baseline session's view, in the tree's place (`show_baseline`)
                for table in (SampleTable(id="samples"), ParticleGrid(id="particles"), SpsGrid(id="sps")):
                    table.display = False
                    yield table
            with VerticalScroll(id="right"):
                yield StatsPanel(id="stats")
                yield Inspector(id="inspector")
        with VerticalScroll(id="output"):
            yield Static(id="output-text")

    def compose_bottom(self) -> ComposeResult:
        yield from ()

    def compose(self) -> ComposeResult:
        yield from self.compose_round_view()
        yield from self.compose_bottom()
        with Horizontal(id="search-row") as row:
            row.display = False
            yield Static("search /", id="search-label")
            yield SearchBar(placeholder="k=5  cut=10-20  class=reject  or text in a proposal  (enter searches, "
                                        "n/N step, escape closes, empty ends the search)", id="search", compact=True)
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.LETTER_ACTIONS and isinstance(self.focused, Input):
            return False
        if action == "search_step":
            return self.search is not None  # n/N appear in the footer while a search is active
        return True

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.query_one("#tree-title").set_class(event.widget is self.main_view, "-focus")

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        if event.widget is self.main_view:
            self.query_one("#tree-title").remove_class("-focus")

    def on_resize(self) -> None:
        self.query_one("#legend").display = self.size.height >= LEGEND_MIN_HEIGHT and self.shown_baseline() is None
        self.query_one("#tree-title", TreeTitle).max_lines = 3 if self.size.height >= TITLE_3_LINES_MIN_HEIGHT else 2

    # -- what is on screen -------------------------------------------------------
    @property
    def tree_view(self) -> RoundTreeView:
        return self.query_one("#tree", RoundTreeView)

    @property
    def main_view(self) -> RoundTreeView | BaselineTable:
        """The pane in the tree's place: the tree, or a baseline session's samples or particles."""
        for table in self.query(BaselineTable):
            if table.display:
                return table
        return self.tree_view

    def current_round(self) -> RoundDone | None:
        return self.state.round_at(self.cursor)

    def shown_baseline(self) -> SessionView | None:
        """The baseline session whose place on the timeline is on screen (None: a round, or nothing)."""
        if self.cursor is None:
            return None
        session = self.state.sessions[self.cursor[0]]
        return session if session.baseline is not None else None

    def shown_tree(self) -> RoundTree | None:
        """The tree on screen: the round under the cursor (chat: or the one in progress)."""
        rd = self.current_round()
        return rd.tree if rd else None

    def shown_session(self) -> SessionView | None:
        if self.cursor is None or self.follow:
            return self.state.current
        return self.state.sessions[self.cursor[0]]

    def stats_upto(self) -> int | None:
        """Stats as of the round on screen (None: as of now)."""
        return None

    def draw_stats(self, session: SessionView | None) -> None:
        self.query_one("#stats", StatsPanel).show(session, self.stats_upto())

    def draw_baseline_stats(self, session: SessionView, **kwargs) -> None:
        panel = self.query_one("#stats", StatsPanel)
        panel.update(bv.stats_text(session, paused_style=panel.get_component_rich_style("stats--paused"),
                                   heading_style=panel.get_component_rich_style("stats--heading"), **kwargs))

    def redraw(self, keep_selection: bool = False) -> None:
        with self.app.batch_update():  # one screen update for the tree and every panel
            if self.show_baseline():
                self.draw_panels()
                return
            tv = self.tree_view
            tree, rd = self.shown_tree(), self.current_round()
            # search matches belong to the round under the cursor (not to a live epoch drawn instead)
            search, cursor = self.search, self.cursor
            tv.marks = frozenset(search.matches(cursor)) if (
                search is not None and cursor is not None and rd is not None and tree is rd.tree) else frozenset()
            tv.show(tree, keep_selection=keep_selection)
            self.draw_panels()
            self._draw_inspector()

    def show_baseline(self) -> bool:
        """Put the baseline view or the tree in the tree's place, whichever the cursor's session
        needs; draw the baseline view.  True if it is a baseline's."""
        session = self.shown_baseline()
        run = session.baseline if session is not None else None
        had_focus = isinstance(self.focused, (RoundTreeView, BaselineTable))
        samples, particles = self.query_one("#samples", SampleTable), self.query_one("#particles", ParticleGrid)
        steps = self.query_one("#sps", SpsGrid)
        for widget, shown in ((samples, run is not None and not run.smc and run.sps is None),
                              (particles, run is not None and run.smc),
                              (steps, run is not None and run.sps is not None),
                              (self.tree_view, run is None),
                              (self.query_one("#legend"), run is None and self.size.height >= LEGEND_MIN_HEIGHT)):
            if widget.display != shown:  # (setting it at all lays the screen out again, at every frame)
                widget.display = shown
        if had_focus and self.focused is not self.main_view:
            self.main_view.focus()
        if session is None or run is None:
            return False
        self._inspected = None  # the inspector shows the baseline's selection: a tree drawn next is new
        table: BaselineTable = particles if run.smc else steps if run.sps is not None else samples
        table.show(run, self.state.pieces, session.start.backend_info.get("eos_id"))
        return True

    def draw_panels(self) -> None:
        session = self.shown_session()
        baseline = self.shown_baseline()
        pane_title = self.query_one("#tree-title", PaneTitle)
        if baseline is not None:
            self.draw_baseline_stats(baseline)
            pane_title.show_parts(self._where(), bv.legend(baseline), steady=self.title_steady())
        else:
            self.draw_stats(session)
            pane_title.show(self._where(), self.tree_view, steady=self.title_steady())
        status = self.query_one("#search-status", Static)
        status.display = bool(self.search_status)
        status.update(Text(self.search_status, no_wrap=True, overflow="ellipsis"))
        text, title = self._output_text(session)
        self.query_one("#output-text", Static).update(text)
        self.query_one("#output").border_title = title  # what the marks mean, at no cost of a line

    def title_steady(self) -> bool:
        """Whether the tree's title keeps its height as its text shrinks (chat: while a run is live)."""
        return False

    def _where(self) -> str:
        baseline = self.shown_baseline()
        if baseline is not None and self.cursor is not None:
            return bv.where(baseline, self.cursor[0], len(self.state.sessions))
        rd = self.current_round()
        if self.cursor is None or rd is None:
            return "no rounds yet"
        s, r = self.cursor
        view = self.state.sessions[s]
        start = view.start
        chain = f" (chain {start.chain} of {start.chains}: m shows them all)" if start.chains > 1 else ""
        return (f"{view.unit} {r + 1}/{len(view.rounds)} · session {s + 1} of "
                f"{len(self.state.sessions)}{chain} · block {rd.block + 1} · k {rd.k_before}->{rd.k_after} · "
                f"{rd.tree.rule}/{rd.tree.inputs}")

    def unit_at(self, cursor: tuple[int, int] | None) -> str:
        return self.state.sessions[cursor[0]].unit if cursor else "round"

    def shown_tokens(self, session: SessionView) -> list[int]:
        return list(session.summary.tokens)

    def _output_text(self, session: SessionView | None) -> tuple[Text, str]:
        """The prompt and the chain's text, marking what the round on screen changed; and a title."""
        if session is None:
            return Text("the chain's current state appears here", style="dim"), ""
        t = Text()
        t.append("> " + clip(session.start.prompt.replace("\n", " ⏎ "), 300) + "\n", style="bold")
        after = self.shown_tokens(session)
        if session.baseline is not None:  # a sample stops at its EOS: no state beyond it to speak of
            after = list(cut_at_eos(after, session.start.backend_info.get("eos_id")))
        rd = self.current_round()
        # mark what the round on screen changed, when the text shown is that round's result
        before = rd.tree.root.tokens if rd is not None and tuple(after) == rd.tree.final_state.tokens else None
        styles = DiffStyles(removed=self.get_component_rich_style("output--removed"),
                            added=self.get_component_rich_style("output--added"))
        t.append_text(evolution_text(before, after, self.state.pieces,
                                     eos_id=session.start.backend_info.get("eos_id"), styles=styles))
        if session.baseline is not None:
            return t, bv.answer_title(session)
        title = "the chain's current text"
        if before is not None and rd is not None:
            title = f"{session.unit} {rd.round + 1}: {span_note(before, after)}"
            if tuple(before) != tuple(after):
                title += " · struck: before it, underlined: after it"
        return t, title

    def on_round_tree_view_node_selected(self, message: RoundTreeView.NodeSelected) -> None:
        self._draw_inspector()

    def on_baseline_table_selected(self, message: BaselineTable.Selected) -> None:
        self._draw_inspector()

    def _draw_inspector(self) -> None:
        session = self.shown_baseline()
        if session is not None:
            self._draw_baseline_inspector(session)
            return
        tv = self.tree_view
        tree = self.shown_tree()
        shown = (id(tree), tv.selected)
        if self._inspected == shown:
            return  # already drawn (redraw draws at once; the message arrives after)
        self._inspected = shown
        node = tree.node(tv.selected) if tree else None
        self.query_one("#inspector", Inspector).show(tree, node, self.state.pieces)

    def _draw_baseline_inspector(self, session: SessionView) -> None:
        inspector = self.query_one("#inspector", Inspector)
        run = session.baseline
        assert run is not None
        styles = DiffStyles(inspector.get_component_rich_style("inspector--removed"),
                            inspector.get_component_rich_style("inspector--added"))
        eos = session.start.backend_info.get("eos_id")
        if run.sps is not None:
            at = self.query_one("#sps", SpsGrid)
            text = (sps_cell_text(run.sps, at.row, at.col, self.state.pieces, eos, styles) if run.sps.steps
                    else Text("no step finished yet", style="dim"))
        elif run.smc:
            grid = self.query_one("#particles", ParticleGrid)
            text = (bv.cell_text(run, grid.col, grid.row, self.state.pieces, eos, styles) if run.steps
                    else Text("no block finished yet", style="dim"))
        else:
            picked = self.query_one("#samples", SampleTable).selected_sample()
            text = (bv.sample_text(run, *picked, self.state.pieces, eos, styles) if picked is not None
                    else Text("no sample finished yet", style="dim"))
        inspector.update(text)

    # -- navigation ----------------------------------------------------------------
    def action_round(self, step: int) -> None:
        if self.cursor is None or not self.state.total_rounds:
            return
        i = self.state.timeline_index(self.cursor) + step
        self.go_to(max(0, min(self.state.total_rounds - 1, i)))

    def action_round_to(self, index: int) -> None:
        total = self.state.total_rounds
        if total:
            self.go_to(index % total)

    def go_to(self, i: int, node: int | None = None) -> None:
        """Show timeline position i (and select `node` of its tree)."""
        self.cursor = self.state.timeline_cursor(i)
        self.follow = i == self.state.total_rounds - 1
        self.redraw()
        if node is not None:
            self.tree_view.select(node)

    def action_toggle_view(self) -> None:
        tv = self.tree_view
        tv.mode = "rounded" if tv.mode == "full" else "full"
        tv.relayout()
        self.draw_panels()

    def action_reach(self, factor: float) -> None:
        """Show more (factor < 1) or fewer low-probability nodes; the title says the threshold."""
        tv = self.tree_view
        tv.min_reach = min(1.0, max(REACH_FLOOR, tv.min_reach * factor))
        tv.relayout()
        self.draw_panels()

    # -- overview and go-to ------------------------------------------------------------
    def action_overview(self) -> None:
        if self.cursor is None:
            self.notify("no rounds yet: the overview needs a round", timeout=3)
            return
        if self.shown_baseline() is not None:
            self.notify(f"{NO_ROUNDS}: its samples or particles are on screen", timeout=3)
            return

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.go_to(self.state.timeline_index(result))

        # a live chat that follows its newest round: so does the overview
        self.app.push_screen(OverviewScreen(self.state, *self.cursor, follow=self.follow), done)

    def action_chains(self) -> None:
        """The chains of the prompt on screen, side by side (trace plot, diagnostics, agreed answer)."""
        if not self.state.sessions:
            self.notify("no session yet: the chains view needs one", timeout=3)
            return
        session = self.cursor[0] if self.cursor is not None and not self.follow else self.state.current_index

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.chain_picked(result[0])

        self.app.push_screen(ChainsScreen(self.state, session), done)

    def chain_picked(self, index: int) -> None:
        """Show session `index`'s latest round (the chains view opened it)."""
        rounds = len(self.state.sessions[index].rounds)
        if rounds:
            self.go_to(self.state.timeline_index((index, rounds - 1)))

    def action_goto(self) -> None:
        if self.cursor is None:
            return

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.go_to(self.state.timeline_index(result))

        self.app.push_screen(GoToScreen([s.positions for s in self.state.sessions], self.cursor[0],
                                        [s.unit if s.baseline is None else "result" for s in self.state.sessions]),
                             done)

    # -- a researcher's screens (views/research.py) -------------------------------------------
    def action_compare(self) -> None:
        research.mark_or_compare(self)

    def action_tokens(self) -> None:
        research.open_tokens(self)

    def action_history(self) -> None:
        research.open_history(self)

    # -- search --------------------------------------------------------------------------
    def action_search(self) -> None:
        if not any(s.rounds for s in self.state.sessions) and self.shown_baseline() is not None:
            self.notify(f"{NO_ROUNDS}: nothing to search", timeout=3)
            return
        bar = self.query_one("#search", SearchBar)
        bar.value = ""
        self.query_one("#search-row").display = True
        bar.focus()

    @on(Input.Submitted, "#search")
    def search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():  # an empty search ends the search
            self.search, self.search_status = None, ""
            self.refresh_bindings()
            self.query_one("#search-row").display = False
            self.main_view.focus()
            self.redraw(keep_selection=True)
            return
        try:
            query = parse(event.value)
        except QueryError as e:
            self.notify(str(e), severity="error", timeout=5, markup=False)
            return
        self.query_one("#search-row").display = False
        self.main_view.focus()
        self.search = Search(query, self.state, self.tree_view.min_reach)
        self.refresh_bindings()
        self.action_search_step(True)

    def action_search_step(self, forward: bool) -> None:
        if self.search is None:
            self.notify("no search yet: / starts one", timeout=3)
            return
        found = self.search.step(self.cursor, self.tree_view.selected, forward)
        shown = clip(self.search.query.raw, 40)
        if found is None:
            self.search_status = f"/{shown}: no match"
            self.draw_panels()
            return
        cursor, node, wrapped = found
        s, r = cursor
        self.search_status = (f"/{shown}: session {s + 1} {self.state.sessions[s].unit} {r + 1} node #{node}"
                              + (" (wrapped)" if wrapped else "") + " · n/N")
        self.go_to(self.state.timeline_index(cursor), node=node)

    # -- export --------------------------------------------------------------------------
    def action_export(self) -> None:
        def done(result: tuple[str, Path] | None) -> None:
            if result is not None:
                self.export(*result)

        self.app.push_screen(ExportScreen(self.export_dir), done)

    def answer_tokens(self) -> tuple[SessionView, list[int]] | None:
        session = self.shown_session()
        return (session, self.shown_tokens(session)) if session is not None else None

    def export(self, kind: str, folder: Path) -> None:
        """Export `kind` (svg, text, json, clipboard, answer) into `folder`; one toast either way."""
        self.export_dir = folder
        rd, cursor = self.current_round(), self.cursor
        try:
            if kind == "svg":  # after the export dialog has left the screen
                self.call_after_refresh(self._screenshot, folder, cursor)
                return
            if kind in ("text", "json"):
                if rd is None or cursor is None:
                    self.notify("no round on screen to export", severity="warning", timeout=4)
                    return
                session = self.state.sessions[cursor[0]]
                if kind == "text":
                    tv = self.tree_view
                    content = export.tree_as_text(session, cursor[0], rd,
                                                  layout(rd.tree, tv.mode, tv.min_reach, tv.pinned))
                    path = export.write(folder, export.file_name("tree", cursor, "txt", session.unit), content)
                else:
                    path = export.write(folder, export.file_name("tree", cursor, "json", session.unit),
                                        export.tree_as_json(self.state, session, rd))
            else:
                shown = self.answer_tokens()
                if shown is None:
                    self.notify("no answer yet", severity="warning", timeout=4)
                    return
                answer = export.answer_text(self.state, *shown)
                if kind == "clipboard":
                    self.app.copy_to_clipboard(answer)
                    self.notify(f"copied the answer ({len(answer)} characters) to the clipboard", timeout=4)
                    return
                path = export.write(folder, export.file_name("answer", cursor, "txt", self.unit_at(cursor)), answer)
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify(f"wrote {clip(str(path), 200)}", timeout=5, markup=False)

    def _screenshot(self, folder: Path, cursor: tuple[int, int] | None) -> None:
        try:
            path = export.write(folder, export.file_name("screen", cursor, "svg", self.unit_at(cursor)),
                                self.app.export_screenshot())
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify(f"wrote {clip(str(path), 200)}", timeout=5, markup=False)
