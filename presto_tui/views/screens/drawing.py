"""What the screens share in drawing: theme colours for plotext and text, a series thinned to a
plot's width, a y axis whose ticks each sit on a row of their own, a number in a table cell."""

from __future__ import annotations

import math

from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.screen import Screen

from presto_tui.views.state.evolution import DiffStyles


def theme_colour(screen: Screen, var: str) -> tuple[int, int, int]:
    return Color.parse(screen.app.theme_variables.get(var, "#888888")).rgb


def diff_styles(screen: Screen) -> DiffStyles:
    hexa = lambda var: Color(*theme_colour(screen, var)).hex
    return DiffStyles(removed=Style(color=hexa("mh-reject"), strike=True),
                      added=Style(color=hexa("mh-accept"), bold=True, underline=True))


def thinned(n: int, width: int) -> list[int]:
    """At most about two indices per plot column (braille resolution), the last one kept: the cost
    of drawing follows the plot's width, not the session's length."""
    stride = max(1, -(-n // max(1, 2 * width)))
    keep = list(range(0, n, stride))
    if keep and keep[-1] != n - 1:
        keep.append(n - 1)
    return keep


NICE_STEPS = (1.0, 2.0, 2.5, 5.0)  # a tick step is one of these times a power of 10


def row_ticks(lo: float, hi: float, rows: int, most: int = 6) -> tuple[float, float, list[float], list[str]]:
    """A y axis over [lo, hi] for a plotext canvas of `rows` rows: (bottom, top, ticks, labels).

    plotext puts the value y on row floor(0.5 + (rows - 1) (y - bottom) / (top - bottom)) and drops a
    tick whose row another took, so its own ticks on a short plot skip values (3.61 3.18 2.75 1.88) or
    label the zero line with another value.  Here the ticks are multiples of a round step (so 0 is one
    wherever the axis crosses it), at most `most` of them, the bottom is a tick and every tick falls
    exactly on a row of its own; of the axes that hold [lo, hi], the one with the finest rows wins
    (then the one with more ticks)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"an axis needs finite ends, got {lo}, {hi}")
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    best: tuple[float, float, int] | None = None  # (row height, step, rows per tick)
    if rows >= 2:
        for e in range(math.floor(math.log10(span / rows)) - 1, math.ceil(math.log10(span)) + 2):
            for m in NICE_STEPS:
                step = m * 10.0 ** e
                bottom = math.floor(lo / step + 1e-9) * step
                for k in range(1, rows):
                    d = step / k
                    if bottom + (rows - 1) * d < hi - 1e-9 * span:
                        continue
                    n = math.floor((rows - 1) / k) + 1
                    if 2 <= n <= most and (best is None or (d, step) < best[:2]):
                        best = (d, step, k)
    if best is None:  # too few rows for two ticks: the ends alone
        return lo, hi, [lo, hi], [f"{lo:.3g}", f"{hi:.3g}"]
    d, step, k = best
    bottom = math.floor(lo / step + 1e-9) * step
    e = math.floor(math.log10(step) + 1e-9)
    digits = max(0, -e + (1 if round(step / 10.0 ** e, 6) == 2.5 else 0))
    ticks = [round(bottom + i * step, digits + 3) for i in range(math.floor((rows - 1) / k) + 1)]
    return bottom, bottom + (rows - 1) * d, ticks, [f"{t + 0.0:.{digits}f}" for t in ticks]


def number_cell(x: float | None, digits: int = 4) -> Text:
    s = "—" if x is None or math.isnan(x) else f"{x:.{digits}f}"
    return Text(s, justify="right")
