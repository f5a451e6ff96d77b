"""The tree pane's title and legend: a line of parts, folded between parts where it does not fit."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from presto_tui.views.state.layout import LEGEND, REACH_FLOOR, symbol
from presto_tui.views.widgets.tree import RoundTreeView


def fold(pieces: Sequence[Text], width: int, sep: str) -> list[list[Text]]:
    """Pieces into lines of at most `width` cells, filled greedily; a piece is never split (one
    wider than a line gets a line of its own, which its widget cuts with an ellipsis)."""
    lines: list[list[Text]] = []
    used = 0
    for piece in pieces:
        if lines and used + len(sep) + piece.cell_len <= width:
            lines[-1].append(piece)
            used += len(sep) + piece.cell_len
        else:
            lines.append([piece])
            used = piece.cell_len
    return lines


def capped(lines: list[list[Text]], n: int) -> list[list[Text]]:
    """At most n lines (at least one): what does not fit goes on the last, to be cut there."""
    n = max(1, n)
    return lines if len(lines) <= n else lines[:n - 1] + [[p for line in lines[n - 1:] for p in line]]


def joined(lines: Sequence[Sequence[Text]], sep: str) -> Text:
    """The lines as one text (its widget's CSS says: no wrapping, an ellipsis where a line is cut)."""
    return Text("\n").join(Text(sep).join(line) for line in lines)


class TreeTitle(Static):
    """Where the tree on screen sits and what of it is shown (the mode, the reach threshold, how
    many nodes are hidden): one line where it fits, else folded between its parts, never cut
    mid-part; what is shown keeps its own line(s) and the location gives way first."""

    SEP = " · "

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._max_lines = 3
        self._parts: tuple[list[Text], list[Text]] = ([], [])
        self._lines = 1
        self._steady = False

    @property
    def max_lines(self) -> int:
        return self._max_lines

    @max_lines.setter
    def max_lines(self, n: int) -> None:
        """The screen lowers it on a short terminal, where every row counts."""
        if n != self._max_lines:
            self._max_lines = n
            self._draw()

    def show(self, where: str, view: RoundTreeView, steady: bool = False) -> None:
        """`steady`: do not shrink (while a run is live its title grows and shrinks every round;
        the tree should not jump by a row each time)."""
        mode = Text(f"[{view.mode}]")
        if view.round_tree is not None and view.round_tree.lazy and view.mode == "full":
            mode.append(f" reach >= {view.min_reach:.0e}")
            if view.min_reach <= REACH_FLOOR:
                mode.append(" (floor; reach-0 nodes show when navigated to)")
        shown = [mode]
        if view.lay.hidden:
            shown.append(Text(f"{view.lay.hidden:,} hidden (+ more)"))
        self._parts = ([Text(p) for p in where.split(self.SEP)], shown)
        self._steady = steady
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        where, shown = self._parts
        width = self.size.width or 80  # before the first layout
        lines = fold(where + shown, width, self.SEP)
        if len(lines) > self.max_lines:  # the location gives way first
            tail = fold(shown, width, self.SEP)
            lines = capped(capped(fold(where, width, self.SEP), self.max_lines - len(tail)) + tail, self.max_lines)
        self._lines = min(self.max_lines, max(len(lines), self._lines)) if self._steady else len(lines)
        self.styles.height = self._lines
        self.update(joined(lines, self.SEP))


class Legend(Static):
    """The symbols in their colours (with their meanings, they are in the help): on one line
    where it fits, else folded between entries."""

    COMPONENT_CLASSES = {"legend--accept", "legend--reject", "legend--uncertain", "legend--deferred"}
    SEP = "  "

    def entries(self) -> list[Text]:
        out = []
        for kind, name in LEGEND:
            t = Text()
            t.append(symbol(kind) if kind != "path" else "▶",
                     style=self.get_component_rich_style(f"legend--{kind}", default=Style()))
            t.append(f" {name}")
            out.append(t)
        return out

    def on_resize(self) -> None:
        lines = fold(self.entries(), self.size.width or 80, self.SEP)
        self.styles.height = len(lines)
        self.update(joined(lines, self.SEP))


class PaneTitle(TreeTitle):
    """The tree's title, which also says where a baseline session's view is (no tree mode to show)."""

    def show_parts(self, where: str, shown: Sequence[str], steady: bool = False) -> None:
        self._parts = ([Text(p) for p in where.split(self.SEP)], [Text(p) for p in shown])
        self._steady = steady
        self._draw()
