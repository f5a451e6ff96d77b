"""A plotext plot drawn at its own size: what it shows is built when it is rendered.

A screen that thins a series to a plot's width before the plot has been laid out reads a width
of 0, keeps a series' first and last points only, and draws a straight line from one to the
other until something redraws it.  `SeriesPlot` takes a drawing function instead of points:
the plot calls it with its current width every time it renders (after its first layout, and
after every resize), so a series is always thinned to the width it is shown at.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import RenderResult
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

Drawing = Callable[[Plot, int], None]  # (the figure, cleared; the plot's width in cells)


class SeriesPlot(PlotextPlot):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawing: Drawing | None = None

    def show(self, drawing: Drawing | None) -> None:
        """Draw with `drawing` from now on (None: an empty plot)."""
        self._drawing = drawing
        self.refresh()

    def canvas_rows(self, title: bool = True, xlabel: bool = True) -> int:
        """The rows plotext draws data on: the plot's height less the x axis' two lines and its tick
        labels, the title and the x label (a y axis is laid out on them: drawing.row_ticks)."""
        return max(0, self.size.height - 3 - title - xlabel)

    def render(self) -> RenderResult:
        plt = self.plt
        plt.clear_figure()
        if self._drawing is not None:
            self._drawing(plt, self.size.width)
        return super().render()
