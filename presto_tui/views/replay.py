"""`presto-tui replay`: a trace's rounds on a timeline, no model needed."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Static

from presto_tui.views.round_screen import RoundScreen
from presto_tui.views.state import AppState, SessionView

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # replay rounds per second


class ReplayScreen(RoundScreen):
    BINDINGS = [
        Binding("space", "play", "play/pause"),
        Binding("less_than_sign", "speed(-1)", "slower"),
        Binding("greater_than_sign", "speed(1)", "faster"),
    ]

    def __init__(self, state: AppState, autoplay: bool = False) -> None:
        super().__init__(state)
        self.follow = False
        self.playing = autoplay
        self.speed_i = 2
        self._timer: Timer | None = None

    def compose_bottom(self) -> ComposeResult:
        yield Static(id="timeline")

    def on_mount(self) -> None:
        self.tree_view.focus()
        timeline = self.state.all_rounds()
        if timeline:
            self.cursor = timeline[0]
        if self.playing:
            self._start_timer()
        self.redraw()

    # stats and text as they stood at the round on screen
    def shown_session(self) -> SessionView | None:
        return self.state.sessions[self.cursor[0]] if self.cursor else self.state.current

    def stats_upto(self) -> int | None:
        return self.cursor[1] if self.cursor else None

    def shown_tokens(self, session: SessionView) -> list[int]:
        rd = self.current_round()
        return list(rd.tree.final_state.tokens) if rd else list(session.summary.tokens)

    def draw_panels(self) -> None:
        super().draw_panels()
        self.query_one("#timeline", Static).update(self._timeline(), layout=False)  # one fixed line

    def _timeline(self) -> Text:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor is None:
            return Text("empty trace")
        width = max(10, self.size.width - 40)
        pos = timeline.index(self.cursor)
        filled = int(width * (pos + 1) / len(timeline))
        t = Text("▶ " if self.playing else "⏸ ")
        t.append("█" * filled, style="bold")
        t.append("░" * (width - filled), style="dim")
        t.append(f" {pos + 1}/{len(timeline)}  {SPEEDS[self.speed_i]:g} rounds/s")
        return t

    def action_play(self) -> None:
        self.playing = not self.playing
        if self.playing:
            timeline = self.state.all_rounds()
            if timeline and self.cursor == timeline[-1]:
                self.cursor = timeline[0]
            self._start_timer()
        elif self._timer is not None:
            self._timer.stop()
        self.draw_panels()

    def action_speed(self, step: int) -> None:
        self.speed_i = max(0, min(len(SPEEDS) - 1, self.speed_i + step))
        if self.playing:
            self._start_timer()
        self.draw_panels()

    def _start_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1.0 / SPEEDS[self.speed_i], self._tick)

    def _tick(self) -> None:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor == timeline[-1]:
            self.playing = False
            if self._timer is not None:
                self._timer.stop()
            self.draw_panels()
            return
        self.action_round(1)

    def go_to(self, i: int) -> None:
        super().go_to(i)
        self.follow = False
