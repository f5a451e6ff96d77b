"""Parallel power tempering in the tree pane: the replicas (rows, the alpha one first) over the
barriers (columns), each cell the state the replica holds there, named by the replica it began at,
with ⇅ where the replica swapped at that barrier and × where its swap was refused; the footer
counts the swaps accepted of those proposed at each barrier.  The words of the inspector are in
`state/ppt.py` (`cell_text`), the stats panel's and the title's in its `PptRun`."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding

from presto_tui.views.state.evolution import DiffStyles
from presto_tui.views.state.ppt import PptRun, cell_text
from presto_tui.views.widgets.baseline import BaselineTable


class ReplicaGrid(BaselineTable):
    """Replicas (rows) over barriers (columns); see the module docstring."""

    FOOTER = 1  # swaps accepted / proposed per barrier
    BINDINGS = [Binding("enter", "screen.open_member", "its chain", show=False)]  # (screens/members.py)
    run: PptRun | None

    def inspect(self, styles: DiffStyles) -> Text:
        if self.run is None or not self.run.steps:
            return Text("no barrier reached yet", style="dim")
        return cell_text(self.run, self.col, self.row, self.pieces, self.eos_id, styles)

    @property
    def rows(self) -> int:
        return self.run.replicas if self.run else 0

    @property
    def columns(self) -> int:
        return len(self.run.steps) if self.run else 0

    def default(self) -> tuple[int, int]:
        return 0, max(0, self.columns - 1)  # the alpha replica, the newest barrier

    @property
    def digits(self) -> int:
        return len(str(max(1, self.rows)))

    @property
    def label_width(self) -> int:
        labels = [self.run.label(level) for level in range(self.rows)] if self.run else [""]
        return 2 + max((len(x) for x in labels), default=0) + 1  # cursor, star, the label, a gap

    @property
    def cell_width(self) -> int:
        return max(self.digits + 2, 4)  # the holder, its mark, a gap ("b12" fits a header)

    def shown_columns(self) -> int:
        return max(1, ((self.size.width or 80) - self.label_width) // self.cell_width)

    def column_at(self, x: int) -> int:
        return self.left + max(0, x - self.label_width) // self.cell_width

    def _barriers(self) -> range:
        return range(self.left, min(self.columns, self.left + self.shown_columns()))

    def header_line(self, y: int) -> list[Segment]:
        run = self.run
        assert run is not None
        segs = [Segment(" " * self.label_width, None)]
        for s in self._barriers():
            head = "end" if run.steps[s].final else f"b{s + 1}"
            style = self.s("header") + Style(underline=True) if s == self.col else self.s("header")
            segs.append(Segment(head[:self.cell_width - 1].ljust(self.cell_width), style))
        return segs

    def footer_line(self, y: int) -> list[Segment]:
        run = self.run
        assert run is not None
        segs = [Segment(f"{'swaps':<{self.label_width}}", self.s("muted"))]
        for s in self._barriers():
            st = run.steps[s]
            cell = f"{sum(st.swapped)}/{len(st.pairs)}" if st.pairs else "-"
            segs.append(Segment(cell[:self.cell_width - 1].ljust(self.cell_width), self.s("muted")))
        return segs

    def body_line(self, row: int) -> list[Segment]:
        run = self.run
        assert run is not None
        level = run.level(row)
        selected_row = row == self.row
        segs = [Segment("❯" if selected_row else " ", self.s("cursor")),
                Segment("★" if level == run.replicas - 1 else " ", self.s("chosen")),
                Segment(run.label(level).ljust(self.label_width - 2), self.s("muted"))]
        for s in self._barriers():
            h = run.holder(s, level)
            swap = run.swap_at(s, level)
            mark, mark_style = ((" ", Style()) if swap is None else ("⇅", self.s("resample")) if swap[2]
                                else ("×", self.s("dropped")))
            style = self.s("muted") if h == level else self.s("bar")
            if level == run.replicas - 1:
                style = self.s("chosen") + style
            if selected_row and s == self.col:
                style = self.s("cursor") + Style(underline=True)
            shown = "?" if h is None else str(h + 1)
            segs += [Segment(f"{shown:>{self.digits}}", style), Segment(mark, mark_style),
                     Segment(" " * (self.cell_width - self.digits - 1), None)]
        return segs
