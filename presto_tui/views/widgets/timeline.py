"""The replay's timeline: one line, a bar over every round (or epoch); click or drag on it to seek."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget


class Timeline(Widget):
    COMPONENT_CLASSES = {"timeline--done", "timeline--todo"}
    HEAD = 2  # "▶ " before the bar
    TAIL = 34  # room for " 1234/1234  256 epochs/s  session 9 of 9" after it

    class Seek(Message):
        """A person clicked or dragged on the bar: go to timeline position `index`."""

        def __init__(self, index: int) -> None:
            self.index = index
            super().__init__()

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pos = 0
        self.total = 0
        self.playing = False
        self.info = ""
        self._dragging = False

    def show(self, pos: int, total: int, playing: bool, info: str) -> None:
        self.pos, self.total, self.playing, self.info = pos, total, playing, info
        self.refresh()

    @property
    def bar_width(self) -> int:
        return max(10, self.content_size.width - self.HEAD - self.TAIL)

    def render(self) -> Text:
        if not self.total:
            return Text("empty trace")
        width = self.bar_width
        filled = round(width * (self.pos + 1) / self.total)
        t = Text("▶ " if self.playing else "⏸ ", no_wrap=True, overflow="ellipsis")
        t.append("█" * filled, style=self.get_component_rich_style("timeline--done"))
        t.append("░" * (width - filled), style=self.get_component_rich_style("timeline--todo"))
        t.append(f" {self.pos + 1}/{self.total}  {self.info}")
        return t

    def index_at(self, x: int, clamp: bool = False) -> int | None:
        """The timeline position under content column x (None: not on the bar; a drag that
        leaves the bar clamps to its ends)."""
        col = x - self.HEAD
        if clamp:
            col = max(0, min(self.bar_width - 1, col))
        if not self.total or not 0 <= col < self.bar_width:
            return None
        return min(self.total - 1, col * self.total // self.bar_width)

    def _seek(self, x: int) -> None:
        i = self.index_at(x, clamp=self._dragging)
        if i is not None and i != self.pos:
            self.post_message(self.Seek(i))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        x = event.x - self.styles.padding.left
        if self.index_at(x) is None:
            return  # a click beside the bar (the play symbol, the counters)
        self._dragging = True
        self.capture_mouse()
        self._seek(x)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self._seek(event.x - self.styles.padding.left)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()
