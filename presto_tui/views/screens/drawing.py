"""What the screens share in drawing: theme colours for plotext and text, a series thinned to a
plot's width, a number in a table cell."""

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


def number_cell(x: float | None, digits: int = 4) -> Text:
    s = "—" if x is None or math.isnan(x) else f"{x:.{digits}f}"
    return Text(s, justify="right")
