"""What the tree pane shows for a Scalable Power Sampling session: its steps and their candidates.

`SpsGrid`: one row per step (the chunk drawn at each position, in order), one column per
candidate (most likely under p0 first, as the step ranked them).  A cell's bar is the
probability the candidate was drawn with (its number when selected); ★ and the path band mark
the chunk drawn, so the band runs down the rows along the response.  Each row ends with the
chunk drawn (∎: it ends at EOS).  The inspector (`sps_state.cell_text`) shows the selected
candidate's log p0, zeta, both estimates and its rollouts.  Drawn with the line API from `SpsRun`
(views/state/sps.py), with a fixed header while the rows scroll.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from presto_tui.views.state import sps as sps_state
from presto_tui.views.state.evolution import DiffStyles
from presto_tui.views.state.sps import SpsRun
from presto_tui.views.widgets.baseline import BaselineTable, bar, first_words


class SpsGrid(BaselineTable):
    """SPS's steps (rows) and their candidates (columns); see the module docstring."""

    BAR = 5

    run: SpsRun | None


    def inspect(self, styles: DiffStyles) -> Text:
        if self.run is None or not self.run.steps:
            return Text("no step finished yet", style="dim")
        return sps_state.cell_text(self.run, self.row, self.col, self.pieces, self.eos_id, styles)

    @property
    def rows(self) -> int:
        return len(self.run.steps) if self.run else 0

    @property
    def columns(self) -> int:
        return self.run.width if self.run else 0

    def default(self) -> tuple[int, int]:
        """The newest step's chunk drawn."""
        if not self.run or not self.run.steps:
            return 0, 0
        return len(self.run.steps) - 1, self.run.steps[-1].chosen

    @property
    def step_width(self) -> int:
        return max(len("step"), 1 + len(str(max(1, self.rows))))

    @property
    def at_width(self) -> int:
        pos = max((st.position for st in self.run.steps), default=0) if self.run else 0
        return max(len("at"), len(str(pos)))

    @property
    def label_width(self) -> int:
        return 2 + self.step_width + 1 + self.at_width + 1  # cursor and a space; "s" and the step; the position

    @property
    def cell_width(self) -> int:
        return 1 + self.BAR + 1  # a mark, the bar, a gap

    def shown_columns(self) -> int:
        room = (self.size.width or 80) - self.label_width - 12  # keep some of the text in view
        return max(1, min(self.columns, room // self.cell_width))

    def column_at(self, x: int) -> int:
        return self.left + max(0, x - self.label_width) // self.cell_width

    def _candidates(self) -> range:
        return range(self.left, min(self.columns, self.left + self.shown_columns()))

    def header_line(self, y: int) -> list[Segment]:
        segs = [Segment(f"  {'step':<{self.step_width}} {'at':>{self.at_width}} ", self.s("header"))]
        for k in self._candidates():
            head = f"c{k + 1}"
            style = self.s("header") + Style(underline=True) if k == self.col else self.s("header")
            segs += [Segment(head, style), Segment(" " * (self.cell_width - len(head)), None)]
        segs.append(Segment("chunk drawn", self.s("header")))
        return segs

    def body_line(self, row: int) -> list[Segment]:
        sps = self.run
        if sps is None or not 0 <= row < len(sps.steps):
            return []
        st = sps.steps[row]
        selected_row = row == self.row
        segs = [Segment("❯" if selected_row else " ", self.s("cursor")), Segment(" ", None),
                Segment(f"{'s' + str(row + 1):<{self.step_width}} {st.position:>{self.at_width}} ", self.s("muted"))]
        band = Style(bgcolor=self.s("path").bgcolor)
        for k in self._candidates():
            if k >= len(st.candidates):
                segs.append(Segment(" " * self.cell_width, None))
                continue
            chosen, selected = k == st.chosen, selected_row and k == self.col
            share = st.probs[k] if k < len(st.probs) else 0.0
            shown = f"{share:.3f}"[:self.BAR].rjust(self.BAR) if selected else bar(share, self.BAR)
            style = self.s("cursor") + Style(underline=True) if selected else self.s("bar")
            if chosen:
                style = style + band
            segs += [Segment("★" if chosen else " ", self.s("chosen") + (band if chosen else Style())),
                     Segment(shown, style), Segment(" ", None)]
        used = self.label_width + len(list(self._candidates())) * self.cell_width
        chunk = sps.chosen(row)
        text = first_words(chunk, self.pieces, self.eos_id, max(8, (self.size.width or 80) - used - 2))
        segs.append(Segment(text, Style(bold=selected_row or None)))
        if self.eos_id is not None and self.eos_id in chunk:
            segs.append(Segment(" ∎", self.s("muted")))  # the response ends at this chunk's EOS
        return segs
