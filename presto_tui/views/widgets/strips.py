"""The overview's strips, drawn with the line API: the chain strip (a column per round: the
transitions walked and each walked decision's class) and the cut strip (where the chain cut,
over the response's token positions)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from presto_tui.api.events import ACCEPT, REJECT, UNCERTAIN
from presto_tui.views.state.layout import symbol
from presto_tui.views.state.series import ChainSeries, Column

MAX_ROWS = 14  # the chain strip's rows at most (deeper rounds end in "+")
BARS = " ▁▂▃▄▅▆▇█"
SHADES = " ░▒▓█"


class ChainStrip(Widget):
    """One column per round: a bar of transitions walked, then each walked decision's class."""

    LABEL = 7  # the row names on the left
    COMPONENT_CLASSES = {"strip--accept", "strip--reject", "strip--uncertain", "strip--deferred", "strip--leaf",
                         "strip--label", "strip--bar", "strip--selected"}
    class Picked(Message):
        """A column was clicked: select it (`open`: it was already selected, open its tree)."""

        def __init__(self, column: int, open: bool) -> None:
            self.column, self.open = column, open
            super().__init__()

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.columns: list[Column] = []
        self.selected = 0
        self.first = 0  # first column shown (the strip scrolls to keep the selection in view)
        self.top = 1

    def show(self, columns: list[Column], selected: int, max_rows: int = MAX_ROWS) -> None:
        self.columns, self.selected = columns, selected
        self.top = max((c.transitions for c in columns), default=1) or 1  # the bar's full height
        deepest = max((c.transitions + (c.stop != "cap") for c in columns), default=1)
        self.styles.height = max(4, min(max_rows, deepest + 2))
        self._scroll()
        self.refresh()

    @property
    def shown(self) -> int:
        return max(1, self.size.width - self.LABEL)

    def _scroll(self) -> None:
        if self.selected < self.first:
            self.first = self.selected
        elif self.selected >= self.first + self.shown:
            self.first = self.selected - self.shown + 1
        self.first = max(0, min(self.first, max(0, len(self.columns) - self.shown)))

    def on_resize(self) -> None:
        self._scroll()

    def _s(self, name: str) -> Style:
        return self.get_component_rich_style(f"strip--{name}")

    def _cell(self, col: Column, y: int, rows: int) -> tuple[str, str]:
        """(character, style name) of column `col` at row y (0: the bar; last: the cursor)."""
        if y == 0:
            return BARS[round(col.transitions / self.top * (len(BARS) - 1))], "bar"
        j = y - 1  # decision row
        cells = list(col.classes) + ([col.stop] if col.stop != "cap" else [])
        if j >= len(cells):
            return " ", "label"
        if j == rows - 3 and len(cells) > rows - 2:
            return "+", "label"  # more decisions than rows
        kind = cells[j]
        return symbol(kind), kind if kind in (ACCEPT, REJECT, UNCERTAIN, "deferred") else "leaf"

    def render_line(self, y: int) -> Strip:
        rows = self.size.height
        label = "walked" if y == 0 else ("" if y == rows - 1 else f"dec {y}")
        segs = [Segment(f"{label:<{self.LABEL}}"[:self.LABEL], self._s("label"))]
        base = self.rich_style
        for i in range(self.first, min(len(self.columns), self.first + self.shown)):
            selected = i == self.selected
            if y == rows - 1:
                segs.append(Segment("▲" if selected else " ", base + self._s("bar")))
                continue
            ch, kind = self._cell(self.columns[i], y, rows)
            style = base + self._s(kind)
            if selected:
                style += Style(bgcolor=self._s("selected").bgcolor)
            segs.append(Segment(ch, style))
        return Strip(segs).extend_cell_length(self.size.width, base)

    def column_at(self, x: int) -> int | None:
        i = self.first + x - self.LABEL
        return i if x >= self.LABEL and 0 <= i < len(self.columns) else None

    def on_click(self, event: events.Click) -> None:
        i = self.column_at(event.x)
        if i is not None:
            self.post_message(self.Picked(i, open=i == self.selected))


class CutStrip(Widget):
    """Cut positions over the response's tokens: the session's (shading) and the selected round's."""

    COMPONENT_CLASSES = {"cuts--label", "cuts--heat", "cuts--accept", "cuts--reject", "cuts--uncertain"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: ChainSeries | None = None
        self.column: Column | None = None

    def show(self, series: ChainSeries, column: Column | None) -> None:
        self.series, self.column = series, column
        self.refresh()

    def render_line(self, y: int) -> Strip:
        label = ChainStrip.LABEL
        width = max(1, self.size.width - label - 6)
        base = self.rich_style
        lab = lambda s: Segment(f"{s:<{label}}", base + self.get_component_rich_style("cuts--label"))
        if self.series is None:
            return Strip.blank(self.size.width, base)
        horizon = self.series.horizon
        cell = lambda pos: min(width - 1, pos * width // horizon)
        if y == 0:
            counts = [0] * width
            for pos, n in self.series.cut_counts.items():
                counts[cell(pos)] += n
            top = max(counts) or 1
            heat = "".join(SHADES[-1 if n == top else min(len(SHADES) - 2, (n * (len(SHADES) - 1)) // top)]
                           if n else "·" for n in counts)
            segs = [lab("cuts"), Segment(heat, base + self.get_component_rich_style("cuts--heat")),
                    Segment(f" T={horizon}", base + self.get_component_rich_style("cuts--label"))]
        else:
            cells: list[Segment] = [Segment("─", base + self.get_component_rich_style("cuts--label"))] * width
            if self.column is not None:
                for cut, kind in zip(self.column.cuts, self.column.classes):
                    cells[cell(cut)] = Segment(symbol(kind), base + self.get_component_rich_style(f"cuts--{kind}"))
            segs = [lab(self.series.session.unit), *cells]
        return Strip(segs).extend_cell_length(self.size.width, base)
