"""The round's tree drawn sideways, with the line API over the pure layout (`state/layout.py`).

Widgets only draw state handed to them (a RoundTree, a SessionView); every
string that came from a model or a trace goes through `visible()` into a
`rich.text.Text`, never through markup.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from presto_tui.api.events import NodeView, RoundTree
from presto_tui.views.state.layout import Layout, label, layout, symbol


class RoundTreeView(ScrollView, can_focus=True):
    """A prefetch round drawn sideways with the line API (scales to large trees).

    Three independent channels (see palette.py): the class colours a node's symbol and
    label; the realized path puts a neutral band behind it, a ▶ after it and draws its
    edge bold; selection puts a cursor in the gutter and makes the label bold and
    underlined.  A style is assembled per cell from the three, so none overwrites another.
    The gutter's second column marks search matches.
    """

    COMPONENT_CLASSES = {
        "tree--accept", "tree--reject", "tree--uncertain", "tree--deferred", "tree--leaf",
        "tree--unreachable", "tree--live", "tree--aborted", "tree--path", "tree--cursor", "tree--connector",
        "tree--match",
    }
    GUTTER = 2  # selection cursor, search mark

    class NodeSelected(Message):
        def __init__(self, node: NodeView | None) -> None:
            self.node = node
            super().__init__()

    # Navigation keys live here so they override ScrollView's scrolling keys while the
    # tree has focus (and leave the prompt's own cursor keys alone).
    BINDINGS = [
        Binding("left,h", "parent", "parent", show=False),
        Binding("up,k", "child(True)", "accept child", show=False),
        Binding("down,j", "child(False)", "reject child", show=False),
        Binding("right,l", "path_child", "path child", show=False),
        Binding("home", "screen.round_to(0)", "first round", show=False),
        Binding("end", "screen.round_to(-1)", "latest round", show=False),
    ]

    selected: reactive[int] = reactive(0)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.round_tree: RoundTree | None = None
        self.mode = "full"
        self.min_reach = 1e-3
        self.lay: Layout = Layout((), 0, 0)
        self.pinned: frozenset[int] = frozenset()  # hidden nodes a person navigated to
        self.marks: frozenset[int] = frozenset()  # search matches in this round

    def show(self, tree: RoundTree | None, keep_selection: bool = False) -> None:
        if keep_selection and tree is not None and tree is self.round_tree:
            # the same (frozen) round drawn again, as a live frame does: its layout and the hidden
            # nodes a person navigated to stay; only the search marks may have changed
            self.refresh()
            return
        # A node is kept by its path: the same node has another id in another tree object (a live
        # epoch is a new tree at every frame, and its nodes are numbered as they are recorded).
        path = self.round_tree.path_of(self.selected) if keep_selection and self.round_tree else None
        self.round_tree = tree
        self.pinned = frozenset()
        kept = tree.node_at(path) if tree is not None and path is not None else None
        self.selected = kept.id if kept is not None else 0
        self.relayout()

    def relayout(self) -> None:
        tree = self.round_tree
        self.lay = layout(tree, self.mode, self.min_reach, self.pinned) if tree else Layout((), 0, 0)
        width = max((len(r.prefix) + len(label(tree, r.node)) + 4 + self.GUTTER for r in self.lay.rows),
                    default=0) if tree else 0
        self.virtual_size = Size(width, len(self.lay.rows))
        if self.lay.row_of(self.selected) is None:
            self.selected = 0
        self._announce()
        self.refresh()

    def watch_selected(self, _old: int, _new: int) -> None:
        row = self.lay.row_of(self.selected)
        if row is not None:
            self.scroll_to_region_row(row)
        self._announce()
        self.refresh()

    def scroll_to_region_row(self, row: int) -> None:
        top = self.scroll_offset.y
        height = max(1, self.size.height)
        if row < top or row >= top + height:
            self.scroll_to(y=max(0, row - height // 2), animate=False)

    def _announce(self) -> None:
        node = self.round_tree.node(self.selected) if self.round_tree else None
        self.post_message(self.NodeSelected(node))

    def select(self, node_id: int | None) -> bool:
        """Select a node of the round's tree, revealing it if it was hidden; False if none."""
        if node_id is None or self.round_tree is None or self.round_tree.node(node_id) is None:
            return False
        if self.lay.row_of(node_id) is None:
            self.pinned = self.pinned | {node_id}
            self.relayout()
        self.selected = node_id
        return True

    def action_parent(self) -> None:
        if self.round_tree is not None:
            self.select(self.round_tree.parent_of(self.selected))

    def action_child(self, accept: bool) -> None:
        if self.round_tree is not None:
            self.select(self.round_tree.child(self.selected, accept))

    def action_path_child(self) -> None:
        """The child on the realized path (else the accept child)."""
        kids = self.round_tree.children(self.selected) if self.round_tree else []
        on_path = [v for v in kids if v.on_path]
        if on_path:
            self.select(on_path[0].id)
        else:
            self.action_child(True)

    def _style(self, kind: str) -> Style:
        return self.get_component_rich_style(f"tree--{kind}")

    def cell_style(self, kind: str, on_path: bool, selected: bool, base: Style) -> Style:
        """The style of a node's symbol and label: class colour, path band, selection (independent)."""
        cls = self._style(kind)
        return Style(color=cls.color, bgcolor=self._style("path").bgcolor if on_path else base.bgcolor,
                     italic=cls.italic, strike=cls.strike, bold=selected or None, underline=selected or None)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = y + scroll_y
        width = self.size.width
        if i >= len(self.lay.rows):
            return Strip.blank(width, self.rich_style)
        row = self.lay.rows[i]
        v = row.node
        base = self.rich_style
        selected = v.id == self.selected
        connector = base + self._style("connector")
        text_style = self.cell_style(row.kind, v.on_path, selected, base)
        branch = len(row.prefix) - 2 if v.id else len(row.prefix)  # the edge into this node: "┌─" / "└─"
        fg = self._style("cursor").color
        path_edge = connector + Style(bold=True, color=fg) if v.on_path else connector
        segs = [Segment("❯" if selected else " ", base + self._style("cursor")),
                Segment("•" if v.id in self.marks else " ", base + self._style("match")),
                Segment(row.prefix[:branch], connector),
                Segment(row.prefix[branch:], path_edge),
                Segment(symbol(row.kind) + " ", text_style),
                Segment(label(self.round_tree, v), text_style),  # type: ignore[arg-type]
                Segment(" ▶" if v.on_path else "", Style(color=fg, bgcolor=text_style.bgcolor))]
        strip = Strip(segs).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, base)

    def on_click(self, event) -> None:
        i = event.y + self.scroll_offset.y
        if 0 <= i < len(self.lay.rows):
            self.selected = self.lay.rows[i].node.id
