"""The round view both screens share: tree, stats, inspector and the chain's text.

`RoundScreen` holds an `AppState` and a cursor (session, round) and draws what
is under the cursor; `ChatScreen` feeds it live events, `ReplayScreen` a
trace's.  Drawing is one batched screen update per change.  What the tree pane
shows is one of two parts the screen holds: the tree mode (`tree_mode.py`: a
round's tree, its title, the selected node in the inspector) or, where the
cursor is on a baseline session (no rounds, no tree: one place on the
timeline), the baseline mode (`baseline_mode.py`: its samples or particles).

Keys every round view has: rounds (`[` `]` Home End `g`), the tree's view (`f`
`+` `-`), the session overview (`o`), the prompt's chains (`m`), search (`/`
`n` `N`), export (`e`), and a researcher's screens, each opened with the data
it shows: `c` compares two sessions (`compare.py`), `t` splits the selected
node's ratio by token (`tokens.py`), `H` shows the session's chain history
(`history.py`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.keys import format_key, key_to_character
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from presto_tui.api.events import RoundDone, RoundTree
from presto_tui.views.dialogs.export import ExportScreen, PopulationExportScreen
from presto_tui.views.dialogs.goto import GoToScreen
from presto_tui.views.screens.baseline_mode import BaselineMode
from presto_tui.views.screens.chains import ChainsScreen
from presto_tui.views.screens.compare import CompareScreen
from presto_tui.views.screens.history import HistoryScreen
from presto_tui.views.screens.members import MemberScreen, MembersScreen
from presto_tui.views.screens.overview import OverviewScreen
from presto_tui.views.screens.tokens import TokenScreen
from presto_tui.views.screens.tree_mode import TreeMode
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state import export
from presto_tui.views.state import members as ms
from presto_tui.views.state.baseline import NO_ROUNDS, MethodRun
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.reducer import AppState, SessionView
from presto_tui.views.state.search import QueryError, Search, parse
from presto_tui.views.state.tokens import token_split
from presto_tui.views.widgets.baseline import BaselineTable
from presto_tui.views.widgets.chain_text import ChainText
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.views.widgets.inputs import SearchBar
from presto_tui.views.widgets.inspector import Inspector
from presto_tui.views.widgets.stats import StatsPanel
from presto_tui.views.widgets.titles import PaneTitle, TreeTitle
from presto_tui.views.widgets.tree import RoundTreeView

EXPORT_DIR = Path("exports")
LEGEND_MIN_HEIGHT = 30  # below this many rows the legend gives its line to the tree (it is in the help)
TITLE_3_LINES_MIN_HEIGHT = 24  # the tree's title folds to 3 lines at 80x24 (48 columns), to 2 below
ROUNDS, MATCHES = Binding.Group("round"), Binding.Group("match")


def typed(key: str) -> bool:
    """Whether a key types a character into a text field (a printable key, no modifier but shift)."""
    char = key_to_character(key) or format_key(key)  # ("plus" has no character, but shows as "+")
    return len(char) == 1 and char.isascii() and char.isprintable()


@cache
def typed_actions(screen: type[Screen]) -> frozenset[str]:
    """The actions a screen binds to printable keys (its own and those it inherits): a focused text
    field types those keys instead, so the actions are off (and out of the footer) meanwhile."""
    out = set()
    for klass in screen.__mro__:
        for b in klass.__dict__.get("BINDINGS", ()):
            keys, action = (b.key, b.action) if isinstance(b, Binding) else (b[0], b[1])
            if any(typed(k.strip()) for k in keys.split(",")):
                out.add(action.partition("(")[0])
    return frozenset(out)


class RoundScreen(Screen):
    BINDINGS = [  # tree navigation keys: RoundTreeView.BINDINGS
        # pairs share one place in the footer ("[ ] round"): at 80 columns every key it shows fits
        Binding("left_square_bracket", "round(-1)", "prev round", group=ROUNDS),
        Binding("right_square_bracket", "round(1)", "next round", group=ROUNDS),
        Binding("o", "overview", "overview"),
        Binding("m", "chains", "chains", show=False),  # taught in the help; most sessions are one chain
        Binding("slash", "search", "search"),
        Binding("n", "search_step(True)", "next match", group=MATCHES),
        Binding("N", "search_step(False)", "prev match", group=MATCHES),
        Binding("g", "goto", "go to"),
        Binding("e", "export", "export"),
        Binding("c", "compare", "compare", show=False),
        Binding("t", "tokens", "per token", show=False),
        Binding("H", "history", "history", show=False),
        Binding("f", "toggle_view", "full/rounded", show=False),
        Binding("plus,equals_sign", "reach(0.1)", "more", show=False),
        Binding("minus", "reach(10)", "fewer", show=False),
    ]

    def __init__(self, state: AppState | None = None) -> None:
        super().__init__()
        self.state = state or AppState()
        self.cursor: tuple[int, int] | None = None  # (session, round) on screen
        self.follow = True  # jump to each new round as it arrives (chat)
        self.tree_mode = TreeMode()  # what the tree pane shows of a round
        self.baseline_mode = BaselineMode()  # ... or of a baseline session, in the tree's place
        self.search: Search | None = None
        self._search_said: tuple[str, tuple[int, int] | None] = ("", None)  # (the status, where its match is)
        self.export_dir = EXPORT_DIR
        self.compare_mark: int | None = None  # the session `c` marked, to compare with another

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PaneTitle(id="tree-title")
                yield Static(id="search-status")  # shown while a search is active
                yield from self.tree_mode.compose()
                yield from self.baseline_mode.compose()
            with VerticalScroll(id="right"):
                yield StatsPanel(id="stats")
                yield Inspector(id="inspector")
        yield ChainText(id="output")
        yield from self.compose_bottom()
        with Horizontal(id="search-row") as row:
            row.display = False
            yield Static("search /", id="search-label")
            yield SearchBar(placeholder="k=5  cut=10-20  class=reject  or text in a proposal  (enter searches, "
                                        "n/N step, escape closes, empty ends the search)", id="search", compact=True)
        yield FittedFooter()

    def compose_bottom(self) -> ComposeResult:
        """What a screen puts under the chain's text: the chat's prompt, the replay's timeline."""
        yield from ()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.focused, Input) and action in typed_actions(type(self)):
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
        self.tree_mode.legend.display = self.size.height >= LEGEND_MIN_HEIGHT and self.shown_baseline() is None
        self.query_one("#tree-title", TreeTitle).max_lines = 3 if self.size.height >= TITLE_3_LINES_MIN_HEIGHT else 2

    # -- what is on screen -------------------------------------------------------
    @property
    def tree_view(self) -> RoundTreeView:
        return self.tree_mode.view

    @property
    def main_view(self) -> RoundTreeView | BaselineTable:
        """The pane in the tree's place: the tree, or a baseline session's samples or particles."""
        return self.baseline_mode.main or self.tree_mode.view

    def current_round(self) -> RoundDone | None:
        return self.state.round_at(self.cursor)

    def shown_baseline(self) -> SessionView | None:
        """The baseline session whose place on the timeline is on screen (None: a round, or nothing)."""
        if self.cursor is None:
            return None
        session = self.state.sessions[self.cursor[0]]
        return session if session.method_run is not None else None

    def shown_tree(self) -> RoundTree | None:
        """The tree on screen: the round under the cursor (chat: or the one in progress)."""
        rd = self.current_round()
        return rd.tree if rd else None

    def shown_session(self) -> SessionView | None:
        if self.cursor is None or self.follow:
            return self.state.current
        return self.state.sessions[self.cursor[0]]

    def shown_tokens(self, session: SessionView) -> list[int]:
        """The tokens the chain's text shows of `session`."""
        return list(session.summary.tokens)

    def stats_upto(self) -> int | None:
        """Stats as of the round on screen (None: as of now)."""
        return None

    def unit_at(self, cursor: tuple[int, int] | None) -> str:
        return self.state.sessions[cursor[0]].unit if cursor else "round"

    # -- drawing -----------------------------------------------------------------
    def draw_stats(self, session: SessionView | None) -> None:
        self.query_one("#stats", StatsPanel).show(session, self.stats_upto())

    def draw_baseline_stats(self, session: SessionView, **kwargs) -> None:
        self.baseline_mode.draw_stats(self.query_one("#stats", StatsPanel), session, **kwargs)

    def redraw(self, keep_selection: bool = False) -> None:
        with self.app.batch_update():  # one screen update for the tree and every panel
            baseline = self.shown_baseline()
            self._show_mode(baseline)
            if baseline is not None:
                self.baseline_mode.draw(baseline, self.state.pieces)
                self.draw_panels()
                return
            tree, rd = self.shown_tree(), self.current_round()
            # search matches belong to the round under the cursor (not to a live epoch drawn instead)
            search, cursor = self.search, self.cursor
            marks = frozenset(search.matches(cursor)) if (
                search is not None and cursor is not None and rd is not None and tree is rd.tree) else frozenset()
            self.tree_mode.draw(tree, marks, keep_selection)
            self.draw_panels()
            self._draw_inspector()

    def _show_mode(self, baseline: SessionView | None) -> None:
        """Put the baseline mode or the tree mode in the tree's place, whichever the cursor's session
        needs; the focus stays in that place."""
        had_focus = isinstance(self.focused, (RoundTreeView, BaselineTable))
        self.baseline_mode.set_shown(baseline)
        self.tree_mode.set_shown(baseline is None, legend=self.size.height >= LEGEND_MIN_HEIGHT)
        if had_focus and self.focused is not self.main_view:
            self.main_view.focus()

    def draw_panels(self) -> None:
        session = self.shown_session()
        baseline = self.shown_baseline()
        title = self.query_one("#tree-title", PaneTitle)
        if baseline is not None:
            self.draw_baseline_stats(baseline)
            self.baseline_mode.draw_title(title, self._where(), baseline, steady=self.title_steady())
        else:
            self.draw_stats(session)
            self.tree_mode.draw_title(title, self._where(), steady=self.title_steady())
        status = self.query_one("#search-status", Static)
        said = self.search_status
        status.display = bool(said)
        status.update(Text(said, no_wrap=True, overflow="ellipsis"))
        tokens = self.shown_tokens(session) if session is not None else []
        self.query_one("#output", ChainText).show(session, tokens, self.current_round(), self.state.pieces)

    @property
    def search_status(self) -> str:
        """The search's line: where its match is while that is on screen; elsewhere only the search
        and its keys (a match of session 2 is no news on session 5)."""
        said, where = self._search_said
        if self.search is None or where is None or where == self.cursor:
            return said
        return f"/{clip(self.search.query.raw, 40)} · n/N: the next or previous match from here"

    def title_steady(self) -> bool:
        """Whether the tree's title keeps its height as its text shrinks (chat: while a run is live)."""
        return False

    def _where(self) -> str:
        baseline = self.shown_baseline()
        if baseline is not None and self.cursor is not None:
            return bt.where(baseline, self.cursor[0], len(self.state.sessions))
        rd = self.current_round()
        if self.cursor is None or rd is None:
            return "no rounds yet"
        s, r = self.cursor
        view = self.state.sessions[s]
        start = view.start
        chain = f" (chain {start.chain + 1} of {start.chains}: m shows them all)" if start.chains > 1 else ""
        return (f"{view.unit} {r + 1}/{len(view.rounds)} · {self.state.session_words(s)}{chain} · "
                f"block {rd.block + 1} · k {rd.k_before}->{rd.k_after} · {rd.tree.rule}/{rd.tree.inputs}")

    def on_round_tree_view_node_selected(self, message: RoundTreeView.NodeSelected) -> None:
        self._draw_inspector()

    def on_baseline_table_selected(self, message: BaselineTable.Selected) -> None:
        self._draw_inspector()

    def _draw_inspector(self) -> None:
        inspector = self.query_one("#inspector", Inspector)
        baseline = self.shown_baseline()
        if baseline is not None:
            self.baseline_mode.inspect(inspector, baseline, self.state.pieces)
        else:
            self.tree_mode.inspect(inspector, self.shown_tree(), self.state.pieces)

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
        self.tree_mode.toggle()
        self.draw_panels()

    def action_reach(self, factor: float) -> None:
        self.tree_mode.reach(factor)
        self.draw_panels()

    # -- the screens a round view opens: each gets the data it shows -----------------------
    def action_overview(self) -> None:
        if self.cursor is None:
            self.notify("no rounds yet: the overview needs a round", timeout=3)
            return
        baseline = self.shown_baseline()
        if baseline is not None and ms.is_population(baseline.method_run):
            self.notify("o: the overview lists a chain's rounds, and a population's are its members': Enter opens the "
                        "member under the cursor's chain (r there its rounds), m every member's trace", timeout=5)
            return
        if baseline is not None:
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
        one = len(self.state.chains_of(session)) < 2
        if one and ms.is_population(self.state.sessions[session].method_run):
            if self._members_recorded(self.state.sessions[session].method_run, "m"):
                self.app.push_screen(MembersScreen(self.state, session), self.member_picked)
            return
        if self.state.sessions[session].method_run is not None and one:
            self.notify(f"m: one session ({NO_ROUNDS}): the chains view compares a prompt's chains (--chains M, or "
                        "chains in ctrl+s): their answers and their vote", timeout=4)
            return

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.chain_picked(result[0])

        self.app.push_screen(ChainsScreen(self.state, session, self.export_dir), done)

    def chain_picked(self, index: int) -> None:
        """Show session `index`'s latest round, or a one-shot session's place (the chains view opened it)."""
        rounds = len(self.state.sessions[index].rounds)
        if rounds or self.state.sessions[index].method_run is not None:  # (a one-shot session: its one place)
            self.go_to(self.state.timeline_index((index, max(0, rounds - 1))))

    def action_goto(self) -> None:
        if self.cursor is None:
            return

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.go_to(self.state.timeline_index(result))

        self.app.push_screen(GoToScreen([s.positions for s in self.state.sessions], self.cursor[0],
                                        [s.unit if s.method_run is None else "result" for s in self.state.sessions]),
                             done)

    def action_compare(self) -> None:
        """`c`: mark the session on screen; on another session, open the two side by side."""
        session = self.shown_session()
        if session is None:
            self.notify("no session yet: c marks a session for comparison", timeout=3)
            return
        s, mark = self.state.index_of(session), self.compare_mark
        if mark == s:
            self.compare_mark = None
            self.notify(f"session {s + 1} is no longer marked for comparison", timeout=3)
        elif mark is None:
            self.compare_mark = s
            self.notify(f"session {s + 1} marked: press c on another session to compare them "
                        "(g S:N goes to session S; c here again unmarks)", timeout=6)
        else:
            self.compare_mark = None
            self.app.push_screen(CompareScreen(self.state, mark, s))

    def action_tokens(self) -> None:
        """`t`: the selected node's ratio per token."""
        tree, session = self.shown_tree(), self.shown_session()
        v = self.tree_mode.selected(tree)
        split = token_split(tree, v, float(session.params["alpha"])) if (
            tree is not None and v is not None and session is not None) else None
        if split is None:
            what = f"node #{v.id} is {v.status}" if v is not None else "no node is selected"
            self.notify(f"t: the per-token view needs a scored node with its proposal ({what})", timeout=4)
            return
        where = ""
        rd = self.current_round()
        if self.cursor is not None and rd is not None and rd.tree is tree:  # not a live epoch still growing
            s, r = self.cursor
            where = f"{self.state.session_name(s)} · {self.state.sessions[s].unit} {r + 1} · "
        self.app.push_screen(TokenScreen(split, self.state.pieces, where))

    def action_history(self) -> None:
        """`H`: the whole chain of the session on screen (a population's: the answer's member, the alpha
        replica)."""
        session = self.shown_session()
        if session is not None and ms.is_population(session.method_run):
            run = session.method_run
            if run is not None and self._members_recorded(run, "H"):
                self.app.push_screen(MemberScreen(self.state, self.state.index_of(session), ms.answer_member(run)),
                                     self.member_picked)
            return
        if session is None or not session.rounds:
            self.notify("H: the chain's history needs a session with transitions", timeout=3)
            return
        self.app.push_screen(HistoryScreen(self.state, self.state.index_of(session), self.export_dir))

    def action_open_member(self) -> None:
        """Enter on a population's grid: the chain of the replica or particle under the cursor."""
        baseline, table = self.shown_baseline(), self.baseline_mode.main
        if baseline is None or table is None or self.cursor is None:
            return
        if not ms.is_population(baseline.method_run):
            self.notify("enter: PowerSMC's particles make no MH moves, so none has a chain: the inspector shows "
                        "the particle after the block selected", timeout=4)
            return
        run = baseline.method_run
        if run is None or not self._members_recorded(run, "enter"):
            return
        self.app.push_screen(MemberScreen(self.state, self.cursor[0], ms.member_of_row(run, table.row), table.col),
                             self.member_picked)

    def _members_recorded(self, run: MethodRun | None, key: str) -> bool:
        """Whether a population has recorded its members yet (its first barrier or block); says so where not."""
        if run is not None and ms.members(run):
            return True
        self.notify(f"{key}: no member recorded yet: a population records its members at its first barrier or "
                    "block", timeout=3)
        return False

    def member_picked(self, result: tuple[int, int] | None) -> None:
        """Back from a member's chain: the grid selects the record it left on (its row, its column)."""
        table = self.baseline_mode.main
        if result is not None and table is not None and self.shown_baseline() is not None:
            table.select(*result)

    # -- search --------------------------------------------------------------------------
    def action_search(self) -> None:
        if not any(s.rounds for s in self.state.sessions) and self.shown_baseline() is not None:
            self.notify(f"{ms.rounds_note(self.state.sessions[self.cursor[0]].method_run)}: nothing to search"
                        if self.cursor is not None else f"{NO_ROUNDS}: nothing to search", timeout=3)
            return
        bar = self.query_one("#search", SearchBar)
        bar.value = ""
        self.query_one("#search-row").display = True
        bar.focus()

    def action_close_search(self) -> None:
        """Escape in the search bar: hide it, give the focus back to the pane in the tree's place."""
        self.query_one("#search-row").display = False
        self.main_view.focus()

    @on(Input.Submitted, "#search")
    def search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():  # an empty search ends the search
            self.search, self._search_said = None, ("", None)
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
            self._search_said = (f"/{shown}: no match", None)
            self.draw_panels()
            return
        cursor, node, wrapped = found
        s, r = cursor
        where = f"{self.state.session_name(s)} {self.state.sessions[s].unit} {r + 1}"
        self._search_said = (f"/{shown}: {where} node #{node}"
                             + (" (wrapped)" if wrapped else "") + " · n/N", cursor)
        self.go_to(self.state.timeline_index(cursor), node=node)

    # -- export --------------------------------------------------------------------------
    def action_export(self) -> None:
        def done(result: tuple[str, Path] | None) -> None:
            if result is not None:
                self.export(*result)

        baseline = self.shown_baseline()
        population = baseline is not None and ms.is_population(baseline.method_run)
        self.app.push_screen((PopulationExportScreen if population else ExportScreen)(self.export_dir), done)

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
            population = self.shown_baseline()
            if kind in ("text", "json") and population is not None and ms.is_population(population.method_run):
                assert cursor is not None
                unit = self.unit_at(cursor)
                content = export.population_as_text(population, cursor[0]) if kind == "text" else \
                    export.population_as_json(self.state, population, cursor[0])
                path = export.write(folder, export.file_name("members", cursor, "txt" if kind == "text" else "json",
                                                             unit), content)
            elif kind in ("text", "json"):
                if rd is None or cursor is None:
                    self.notify("no round on screen to export", severity="warning", timeout=4)
                    return
                session = self.state.sessions[cursor[0]]
                if kind == "text":
                    content = export.tree_as_text(session, cursor, rd, self.tree_mode.layout(rd.tree),
                                                  self.state.session_name(cursor[0]))
                    path = export.write(folder, export.file_name("tree", cursor, "txt", session.unit,
                                                                 self.state.stem(cursor[0])), content)
                else:
                    path = export.write(folder, export.file_name("tree", cursor, "json", session.unit,
                                                                 self.state.stem(cursor[0])),
                                        export.tree_as_json(self.state, session, cursor, rd))
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
                path = export.write(folder, export.file_name("answer", cursor, "txt", self.unit_at(cursor),
                                                             self.state.stem(cursor[0]) if cursor else None), answer)
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify(f"wrote {clip(str(path), 200)}", timeout=5, markup=False)

    def _screenshot(self, folder: Path, cursor: tuple[int, int] | None) -> None:
        try:
            path = export.write(folder, export.file_name("screen", cursor, "svg", self.unit_at(cursor),
                                                         self.state.stem(cursor[0]) if cursor else None),
                                self.app.export_screenshot())
        except export.ExportError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        self.notify(f"wrote {clip(str(path), 200)}", timeout=5, markup=False)
