"""The round view's tree mode: what the tree pane shows for a round of an MH chain.

A part the round screen holds (`RoundScreen.tree_mode`), beside the baseline mode: it owns the
legend and the tree widget, knows how the tree is shown (full or epsilon-rounded, the reach
threshold), titles the pane, and fills the inspector with the selected node.  It reads only the
round tree it is handed; which round that is, is the screen's business.
"""

from __future__ import annotations

from textual.app import ComposeResult

from presto_tui.api.events import NodeView, Pieces, RoundTree
from presto_tui.views.state.layout import REACH_FLOOR, Layout, layout
from presto_tui.views.widgets.inspector import Inspector
from presto_tui.views.widgets.titles import Legend, PaneTitle
from presto_tui.views.widgets.tree import RoundTreeView


class TreeMode:
    def __init__(self) -> None:
        self.view = RoundTreeView(id="tree")
        self.legend = Legend(id="legend")
        self._inspected: tuple | None = None  # (tree, node) the inspector shows

    def compose(self) -> ComposeResult:
        yield self.legend
        yield self.view

    def set_shown(self, shown: bool, legend: bool) -> None:
        """Show or hide the mode's widgets (`legend`: whether the screen has a row to spare for it)."""
        for widget, on in ((self.view, shown), (self.legend, shown and legend)):
            if widget.display != on:  # (setting it at all lays the screen out again, at every frame)
                widget.display = on
        if not shown:
            self._inspected = None  # the inspector shows something else: a tree drawn next is new

    def draw(self, tree: RoundTree | None, marks: frozenset[int], keep_selection: bool) -> None:
        """Draw `tree` with the search matches `marks`."""
        self.view.marks = marks
        self.view.show(tree, keep_selection=keep_selection)

    def draw_title(self, title: PaneTitle, where: str, steady: bool) -> None:
        title.show(where, self.view, steady=steady)

    def inspect(self, inspector: Inspector, tree: RoundTree | None, pieces: Pieces) -> None:
        """The selected node in the inspector (once per tree and node: a redraw draws at once, and the
        tree's selection message arrives after)."""
        shown = (id(tree), self.view.selected)
        if self._inspected == shown:
            return
        self._inspected = shown
        inspector.show(tree, self.selected(tree), pieces)

    def selected(self, tree: RoundTree | None) -> NodeView | None:
        return tree.node(self.view.selected) if tree is not None else None

    def toggle(self) -> None:
        """Full prefetched tree / epsilon-rounded subtree."""
        self.view.mode = "rounded" if self.view.mode == "full" else "full"
        self.view.relayout()

    def reach(self, factor: float) -> None:
        """Show more (factor < 1) or fewer low-probability nodes; the title says the threshold."""
        self.view.min_reach = min(1.0, max(REACH_FLOOR, self.view.min_reach * factor))
        self.view.relayout()

    def layout(self, tree: RoundTree) -> Layout:
        """The rows the tree shows of `tree` (its mode, threshold and the nodes navigated to): the export's."""
        return layout(tree, self.view.mode, self.view.min_reach, self.view.pinned)
