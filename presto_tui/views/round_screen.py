"""The round view both screens share: tree, stats, inspector and the chain's text.

`RoundScreen` holds an `AppState` and a cursor (session, round) and draws the
round under the cursor; `ChatScreen` feeds it live events, `ReplayScreen` a
trace's.  Drawing is one batched screen update per change.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from presto_tui.runtime.core.types import cut_at_eos
from presto_tui.runtime.prefetch.tree import RoundTree
from presto_tui.runtime.session.events import RoundDone
from presto_tui.safetext import visible
from presto_tui.views.state import AppState, SessionView
from presto_tui.views.widgets import Inspector, RoundTreeView, StatsPanel, TreeTitle


class RoundScreen(Screen):
    BINDINGS = [  # tree navigation keys: RoundTreeView.BINDINGS
        Binding("left_square_bracket", "round(-1)", "prev round"),
        Binding("right_square_bracket", "round(1)", "next round"),
        Binding("f", "toggle_view", "full/rounded"),
        Binding("plus,equals_sign", "reach(0.1)", "more", show=False),
        Binding("minus", "reach(10)", "fewer", show=False),
    ]

    def __init__(self, state: AppState | None = None) -> None:
        super().__init__()
        self.state = state or AppState()
        self.cursor: tuple[int, int] | None = None  # (session, round) on screen
        self.follow = True  # jump to each new round as it arrives (chat)
        self._inspected: tuple | None = None  # (round, node) the inspector shows

    def compose_round_view(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield TreeTitle(id="tree-title")
                yield RoundTreeView(id="tree")
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
        yield Footer()

    # -- what is on screen -------------------------------------------------------
    @property
    def tree_view(self) -> RoundTreeView:
        return self.query_one("#tree", RoundTreeView)

    def current_round(self) -> RoundDone | None:
        if self.cursor is None:
            return None
        s, r = self.cursor
        return self.state.sessions[s].rounds[r]

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

    def redraw(self, keep_selection: bool = False) -> None:
        with self.app.batch_update():  # one screen update for the tree and every panel
            self.tree_view.show(self.shown_tree(), keep_selection=keep_selection)
            self.draw_panels()
            self._draw_inspector()

    def draw_panels(self) -> None:
        session = self.shown_session()
        self.query_one("#stats", StatsPanel).show(session, self.stats_upto())
        self.query_one("#tree-title", TreeTitle).show(self._where(), self.tree_view)
        self.query_one("#output-text", Static).update(self._output_text(session))

    def _where(self) -> str:
        timeline = self.state.all_rounds()
        if self.cursor is None:
            return "no rounds yet"
        idx = timeline.index(self.cursor) + 1
        rd = self.current_round()
        assert rd is not None
        return (f"round {idx}/{len(timeline)} (session {self.cursor[0] + 1}, block {rd.block + 1}, "
                f"k {rd.k_before}->{rd.k_after}, {rd.tree.rule}/{rd.tree.inputs})")

    def shown_tokens(self, session: SessionView) -> list[int]:
        return list(session.summary.tokens)

    def _output_text(self, session: SessionView | None) -> Text:
        if session is None:
            return Text("the chain's current state appears here", style="dim")
        t = Text()
        t.append("> " + visible(session.start.prompt) + "\n", style="bold")
        tokens = self.shown_tokens(session)
        # the chain always runs to the horizon; people read the answer up to its first EOS
        answer = cut_at_eos(tokens, session.start.backend_info.get("eos_id"))
        t.append(visible("".join(self.state.pieces(answer))))
        if len(answer) < len(tokens):
            t.append(f"  [EOS; {len(tokens) - len(answer)} more tokens in the state]", style="dim")
        return t

    def on_round_tree_view_node_selected(self, message: RoundTreeView.NodeSelected) -> None:
        self._draw_inspector()

    def _draw_inspector(self) -> None:
        tv = self.tree_view
        tree = self.shown_tree()
        shown = (id(tree), tv.selected)
        if self._inspected == shown:
            return  # already drawn (redraw draws at once; the message arrives after)
        self._inspected = shown
        node = tree.node(tv.selected) if tree else None
        self.query_one("#inspector", Inspector).show(tree, node, self.state.pieces)

    # -- navigation ----------------------------------------------------------------
    def action_round(self, step: int) -> None:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor is None:
            return
        i = max(0, min(len(timeline) - 1, timeline.index(self.cursor) + step))
        self.go_to(i)

    def action_round_to(self, index: int) -> None:
        timeline = self.state.all_rounds()
        if timeline:
            self.go_to(index % len(timeline))

    def go_to(self, i: int) -> None:
        timeline = self.state.all_rounds()
        self.cursor = timeline[i]
        self.follow = i == len(timeline) - 1
        self.redraw()

    def action_toggle_view(self) -> None:
        tv = self.tree_view
        tv.mode = "rounded" if tv.mode == "full" else "full"
        tv.relayout()
        self.draw_panels()

    def action_reach(self, factor: float) -> None:
        tv = self.tree_view
        tv.min_reach = min(1.0, max(1e-12, tv.min_reach * factor))
        tv.relayout()
        self.draw_panels()
        self.notify(f"showing nodes with reach >= {tv.min_reach:.0e}", timeout=2)
