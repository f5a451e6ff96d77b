"""What the tree pane shows for a one-shot session: the widgets methods name as their view.

A one-shot session has no rounds and no tree (`state/baseline.py`), so the round
screen's method mode (`screens/baseline_mode.py`) puts its method's view (`Method.view`) in
the tree's place; the built-in ones:

- `SampleTable` (best-of-N, low temperature): the samples ranked by the score
  the answer was chosen by, one row each: rank, index, score, sum of log p0, the
  log-likelihood per token (eq. 21), length, how it ended and its first words;
  ★ marks the answer.
- `ParticleGrid` (PowerSMC): particles in rows, blocks in columns.  A cell's bar
  is the particle's share of the weight after the block (a full bar: all of it;
  · none), its number when selected; ⟳ over a column marks a resampling after that
  block, after which each cell starts with ←j, the particle it descends from; ✗
  marks a particle the resampling dropped, ∎ one that stopped at EOS in the block.
  The answer's line of descent has the path band and its row ★; ESS and tokens
  per particle sit under the columns.

Both draw only what the events recorded, with the line API (thousands of
samples or particles cost what the screen shows), and keep a fixed header (and
the grid its footer) while the rows scroll.  The words of the title, the stats panel, the
inspector and the answer pane for them are in `state/baseline_text.py`.

A method's view is a `BaselineTable`: it draws the fold its method names (`Method.view_state`, a
`MethodRun`) given to `show`, and says what the inspector shows of the selection (`inspect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from presto_tui.api.events import Pieces, Sample, cut_at_eos
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state.baseline import MethodRun, SamplesRun, SmcRun
from presto_tui.views.state.evolution import DiffStyles, clip

EIGHTHS = " ▏▎▍▌▋▊▉"


def number(v: float, width: int, decimals: int = 2) -> str:
    """A number right-aligned in `width` cells, never wider (a crafted trace may hold 1e300)."""
    s = f"{v:.{decimals}f}"
    if len(s) > width:
        s = f"{v:.{max(1, width - 6)}g}"
    return s[:width].rjust(width)


def bar(share: float, width: int) -> str:
    """A share of 1 as `width` cells of eighths; a share above 0 shows at least a sliver, none a dot."""
    if not share > 0:
        return "·".ljust(width)
    level = max(1, round(min(1.0, share) * width * 8))
    full, part = divmod(level, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


def first_words(tokens: Sequence[int], pieces: Pieces, eos_id: int | None, width: int) -> str:
    """The start of a text on one line, at most `width` characters (only what fits is looked up)."""
    shown = cut_at_eos(list(tokens), eos_id)[:max(0, width)]
    return clip("".join(pieces(shown)).replace("\n", " ⏎ ").strip(), max(0, width - 1))


class BaselineTable(Widget, can_focus=True):
    """Rows under a fixed header (and above a fixed footer) that scroll to keep the selected row
    in view; a column cursor where the rows have columns.  Subclasses draw the lines."""

    COMPONENT_CLASSES = {
        "baseline--header", "baseline--muted", "baseline--cursor", "baseline--chosen", "baseline--path",
        "baseline--bar", "baseline--resample", "baseline--dropped",
    }
    BINDINGS = [
        Binding("up,k", "move(-1, 0)", "up", show=False),
        Binding("down,j", "move(1, 0)", "down", show=False),
        Binding("left,h", "move(0, -1)", "left", show=False),
        Binding("right,l", "move(0, 1)", "right", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "screen.round_to(0)", "first round", show=False),
        Binding("end", "screen.round_to(-1)", "latest round", show=False),
    ]
    HEADER = 1
    FOOTER = 0

    class Selected(Message):
        """The selection moved: the inspector shows the selected sample or cell."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run: Any = None  # the MethodRun its subclass draws
        self.pieces: Pieces = lambda ids: [f"<{i}>" for i in ids]
        self.eos_id: int | None = None
        self.row = 0  # the selected row
        self.col = 0  # the selected column (the particle grid's block)
        self.top = 0  # the first row shown
        self.left = 0  # the first column shown
        self.follow = True  # keep the default selection (the answer, the newest block) as events arrive

    # -- what subclasses say -------------------------------------------------------------
    @property
    def rows(self) -> int:
        return 0

    @property
    def columns(self) -> int:
        return 1

    def default(self) -> tuple[int, int]:
        return 0, 0

    def header_line(self, y: int) -> list[Segment]:
        return []

    def footer_line(self, y: int) -> list[Segment]:
        return []

    def body_line(self, row: int) -> list[Segment]:
        return []

    def shown_columns(self) -> int:
        return 1

    # -- state ----------------------------------------------------------------------------
    def inspect(self, styles: DiffStyles) -> Text:
        """What the inspector shows of the selection."""
        return Text("nothing to inspect", style="dim")

    def show(self, run: MethodRun, pieces: Pieces, eos_id: int | None) -> None:
        """Draw `run` (the same run again as it grows: the selection stays, or follows the default)."""
        if run is not self.run:
            self.follow = True
        self.run, self.pieces, self.eos_id = run, pieces, eos_id
        if self.follow:
            self.row, self.col = self.default()
        self._clamp()
        self.post_message(self.Selected())
        self.refresh()

    def _clamp(self) -> None:
        self.row = max(0, min(self.row, self.rows - 1))
        self.col = max(0, min(self.col, self.columns - 1))
        body = self.body_height
        if self.row < self.top:
            self.top = self.row
        elif self.row >= self.top + body:
            self.top = self.row - body + 1
        self.top = max(0, min(self.top, max(0, self.rows - body)))
        shown = self.shown_columns()
        if self.col < self.left:
            self.left = self.col
        elif self.col >= self.left + shown:
            self.left = self.col - shown + 1
        self.left = max(0, min(self.left, max(0, self.columns - shown)))

    @property
    def body_height(self) -> int:
        return max(1, (self.size.height or 24) - self.HEADER - self.FOOTER)

    def select(self, row: int, col: int) -> None:
        self.row, self.col = row, col
        self._clamp()
        self.follow = (self.row, self.col) == self.default()
        self.post_message(self.Selected())
        self.refresh()

    def action_move(self, down: int, right: int) -> None:
        self.select(self.row + down, self.col + right)

    def action_page(self, step: int) -> None:
        self.select(self.row + step * self.body_height, self.col)

    def on_resize(self) -> None:
        self._clamp()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.top = max(0, min(self.top + 3, self.rows - self.body_height))
        self.refresh()
        event.stop()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.top = max(0, self.top - 3)
        self.refresh()
        event.stop()

    def on_click(self, event: events.Click) -> None:
        row = event.y - self.HEADER + self.top
        if self.HEADER <= event.y < self.HEADER + min(self.body_height, self.rows - self.top):
            self.select(row, self.column_at(event.x))

    def column_at(self, x: int) -> int:
        return self.col

    # -- drawing ----------------------------------------------------------------------------
    def s(self, name: str) -> Style:
        return self.get_component_rich_style(f"baseline--{name}")

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        body = min(self.body_height, max(0, self.rows - self.top))
        if self.run is None:
            segs: list[Segment] = []
        elif y < self.HEADER:
            segs = self.header_line(y)
        elif y < self.HEADER + body:
            segs = self.body_line(self.top + y - self.HEADER)
        elif y < self.HEADER + body + self.FOOTER:
            segs = self.footer_line(y - self.HEADER - body)
        else:
            segs = []
        return Strip([Segment(t, base + st if st else base) for t, st, *_ in segs]).crop(
            0, self.size.width).extend_cell_length(self.size.width, base)


class SampleTable(BaselineTable):
    """Best-of-N's samples (low temperature's one), best first by the score the answer was chosen by."""

    GUTTER = 2  # the cursor, the answer's star

    @property
    def rows(self) -> int:
        return len(self.run.samples) if self.run else 0

    def default(self) -> tuple[int, int]:
        if self.run is None or not self.run.samples:
            return 0, 0
        ranked = self.run.ranked()
        chosen = self.run.choice.index if self.run.choice else None
        return next((r for r, s in enumerate(ranked) if s.index == chosen), 0), 0

    run: SamplesRun | None

    def inspect(self, styles: DiffStyles) -> Text:
        picked = self.selected_sample()
        if self.run is None or picked is None:
            return Text("no sample finished yet", style="dim")
        return bt.sample_text(self.run, *picked, self.pieces, self.eos_id, styles)

    def selected_sample(self) -> tuple[int, Sample] | None:
        """(rank from 0, sample) of the selected row."""
        ranked = self.run.ranked() if self.run else []
        return (self.row, ranked[self.row]) if 0 <= self.row < len(ranked) else None

    def _widths(self) -> tuple[int, int]:
        n = max((s.index + 1 for s in self.run.samples.values()), default=1) if self.run else 1  # (#1, #2, ...)
        return len(str(max(1, len(self.run.samples) if self.run else 1))), len(str(n))

    def header_line(self, y: int) -> list[Segment]:
        rw, iw = self._widths()
        name = self.run.score_name if self.run else "score"
        return [Segment(" " * self.GUTTER + f"{'rank':>{max(4, rw)}} {'#':>{iw + 1}} {name:>10} {'sum log p0':>10} "
                        f"{'ll/tok':>7} {'len':>5} {'end':<4} text", self.s("header"))]

    def body_line(self, row: int) -> list[Segment]:
        run = self.run
        assert run is not None
        ranked = run.ranked()
        if not 0 <= row < len(ranked):
            return []
        sm = ranked[row]
        rw, iw = self._widths()
        chosen = run.choice is not None and run.choice.index == sm.index
        selected = row == self.row
        cells = (f"{row + 1:>{max(4, rw)}} {'#' + str(sm.index + 1):>{iw + 1}} {number(run.score(sm), 10)} "
                 f"{number(sm.logp, 10)} {number(sm.loglik, 7, 3)} {len(sm.tokens):>5} ")
        eos = self.eos_id is not None and self.eos_id in sm.tokens
        style = Style(bold=selected or None, underline=selected or None)
        if chosen:
            style = self.s("chosen") + style
        used = self.GUTTER + len(cells) + 5
        return [Segment("❯" if selected else " ", self.s("cursor")), Segment("★" if chosen else " ", self.s("chosen")),
                Segment(cells, style), Segment(f"{'EOS' if eos else 'n':<4} ", self.s("muted")),
                Segment(first_words(sm.tokens, self.pieces, self.eos_id, max(8, self.size.width - used)), style)]


class ParticleGrid(BaselineTable):
    """PowerSMC's particles (rows) over its blocks (columns); see the module docstring."""

    FOOTER = 2  # ESS, tokens per particle
    BINDINGS = [Binding("enter", "screen.open_member", "its chain", show=False)]  # (screens/members.py)
    BAR = 4
    run: SmcRun | None

    def inspect(self, styles: DiffStyles) -> Text:
        if self.run is None or not self.run.steps:
            return Text("no block finished yet", style="dim")
        return bt.cell_text(self.run, self.col, self.row, self.pieces, self.eos_id, styles)

    @property
    def rows(self) -> int:
        return self.run.particles if self.run else 0

    @property
    def columns(self) -> int:
        return len(self.run.steps) if self.run else 0

    def default(self) -> tuple[int, int]:
        if self.run is None or not self.run.steps:
            return self.row, 0
        cell = self.run.chosen_text_step()
        if cell is not None:
            return cell[1], cell[0]
        return self.row, len(self.run.steps) - 1  # the newest block, same particle

    @property
    def digits(self) -> int:
        return len(str(max(1, self.rows)))  # particles p1..pP, as every number a person reads, from 1

    @property
    def label_width(self) -> int:
        return 3 + self.digits + 1  # cursor, star, "p", the index, a space

    @property
    def cell_width(self) -> int:
        return self.digits + 1 + 1 + self.BAR + 1  # "←j", a mark, the bar, a gap

    def shown_columns(self) -> int:
        return max(1, ((self.size.width or 80) - self.label_width) // self.cell_width)

    def column_at(self, x: int) -> int:
        return self.left + max(0, x - self.label_width) // self.cell_width

    def _blocks(self) -> range:
        return range(self.left, min(self.columns, self.left + self.shown_columns()))

    def header_line(self, y: int) -> list[Segment]:
        run = self.run
        assert run is not None
        segs = [Segment(" " * self.label_width, None)]
        for s in self._blocks():
            head = f"b{s + 1}"
            style = self.s("header") + Style(underline=True) if s == self.col else self.s("header")
            segs.append(Segment(head, style))
            mark = "⟳" if run.steps[s].resampled else ""
            segs.append(Segment(mark, self.s("resample")))
            segs.append(Segment(" " * (self.cell_width - len(head) - len(mark)), None))
        return segs

    def footer_line(self, y: int) -> list[Segment]:
        run = self.run
        assert run is not None
        name = ("ESS", "tok")[y]
        segs = [Segment(f"{name:<{self.label_width}}", self.s("muted"))]
        for s in self._blocks():
            st = run.steps[s]
            value = number(st.ess, self.cell_width - 1, 1) if y == 0 else f"{st.t:>{self.cell_width - 1}}"
            segs.append(Segment(value + " ", self.s("muted")))
        return segs

    def body_line(self, row: int) -> list[Segment]:
        run = self.run
        assert run is not None
        line = run.answer_line()
        star = run.chosen_text_step()
        selected_row = row == self.row
        segs = [Segment("❯" if selected_row else " ", self.s("cursor")),
                Segment("★" if star is not None and star[1] == row else " ", self.s("chosen")),
                Segment(f"p{row + 1:<{self.digits}} ", self.s("muted"))]
        for s in self._blocks():
            segs += self._cell(run, s, row, line.get(s) == row, selected_row and s == self.col)
        return segs

    def _cell(self, run: SmcRun, s: int, i: int, on_line: bool, selected: bool) -> list[Segment]:
        st = run.steps[s]
        band = Style(bgcolor=self.s("path").bgcolor) if on_line else Style()
        if i >= len(st.tokens):
            return [Segment(" " * self.cell_width, band)]
        parent = run.parent(s, i) if run.resampled_into(s) else None
        lineage = f"←{parent + 1}" if parent is not None else ""
        share = run.shares(s)[i]
        shown = f"{share:.2f}"[:self.BAR].rjust(self.BAR) if selected else bar(share, self.BAR)
        dropped = st.resampled and run.copies(s)[i] == 0
        eos = self.eos_id is not None and self.eos_id in st.tokens[i]
        mark, mark_style = ("✗", self.s("dropped")) if dropped else ("∎", self.s("muted")) if eos else (" ", Style())
        cell_style = self.s("muted") if run.stopped(s, i) else self.s("bar")
        if selected:
            cell_style = self.s("cursor") + Style(underline=True)
        # a cell's marks sit together, before its bar: "←j✗▎" (a gap after it, before the next cell)
        return [Segment(f"{lineage:>{self.digits + 1}}", self.s("muted") + band), Segment(mark, mark_style + band),
                Segment(shown, cell_style + band), Segment(" ", band)]
