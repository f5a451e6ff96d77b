"""Text that folds between its parts, never inside one (pure Rich, no Textual).

A label and its number ("log q y -4.484") split over two lines read as two wrong things; Rich
wraps at any space.  `Units` is a line of units (each a label with its value) that folds only
between units, at the width it is drawn at; `Paragraphs` stacks Rich text and such lines into
one renderable whose `str()` is its plain text (what tests and exports read).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.style import Style
from rich.text import Text


class Units:
    """Units on one line, joined by `sep`, folded between units to the width drawn at (the lines
    after the first indented by `indent` and two more cells); a unit wider than a line is folded by
    Rich as any text."""

    def __init__(self, units: Sequence[str | Text], sep: str = " ", indent: str = "",
                 style: str | Style = "") -> None:
        self.units = [u if isinstance(u, Text) else Text(u) for u in units]
        self.sep, self.indent, self.style = sep, indent, style

    def lines(self, width: int) -> list[Text]:
        out: list[list[Text]] = []
        used = 0
        for u in self.units:
            lead = len(self.indent) + (2 if out else 0)
            if out and used + len(self.sep) + u.cell_len <= width:
                out[-1].append(u)
                used += len(self.sep) + u.cell_len
            else:
                out.append([u])
                used = lead + u.cell_len
        return [Text(self.indent + ("  " if i else ""), style=self.style).append_text(
            Text(self.sep, style=self.style).join(line)) for i, line in enumerate(out)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            line.stylize(self.style)
            yield line

    def __str__(self) -> str:
        return self.indent + self.sep.join(u.plain for u in self.units)


class Paragraphs:
    """Rich texts and `Units` one under another; `str()` gives their plain text, a line each."""

    def __init__(self, parts: Sequence[Text | Units]) -> None:
        self.parts = [p for p in parts if not (isinstance(p, Text) and not p.plain)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.parts

    def __str__(self) -> str:
        return "\n".join(p.plain if isinstance(p, Text) else str(p) for p in self.parts)
