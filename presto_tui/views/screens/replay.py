"""`presto-tui replay`: a trace's rounds on a timeline, no model needed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer

from presto_tui.views.screens.compare import CompareScreen
from presto_tui.views.screens.round import RoundScreen
from presto_tui.views.state.reducer import AppState, SessionView
from presto_tui.views.widgets.timeline import Timeline

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)  # replay rounds per second
FRAME_HZ = 10.0  # at most ten screen updates a second: faster speeds step several rounds per frame


class ReplayScreen(RoundScreen):
    BINDINGS = [
        Binding("space", "play", "play/pause"),
        Binding("less_than_sign", "speed(-1)", "slower"),
        Binding("greater_than_sign", "speed(1)", "faster"),
    ]

    def __init__(self, state: AppState, autoplay: bool = False, compare: tuple[int, int] | None = None) -> None:
        super().__init__(state)
        self.follow = False
        self.playing = autoplay
        self.compare_at_start = compare  # two sessions to open side by side (replay --compare)
        self.speed_i = 2
        self._timer: Timer | None = None

    def compose_bottom(self) -> ComposeResult:
        yield Timeline(id="timeline")

    def on_mount(self) -> None:
        if self.state.total_rounds:
            self.cursor = self.state.timeline_cursor(0)
        if self.playing:
            self._start_timer()
        self.redraw()
        self.main_view.focus()  # the tree, or a baseline session's view in its place
        if self.compare_at_start is not None:
            self.app.push_screen(CompareScreen(self.state, *self.compare_at_start))

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
        pos = self.state.timeline_index(self.cursor) if self.cursor else 0
        self.query_one("#timeline", Timeline).show(pos, self.state.total_rounds, self.playing,
                                                   f"{SPEEDS[self.speed_i]:g} {self.unit_at(self.cursor)}s/s")

    def on_timeline_seek(self, message: Timeline.Seek) -> None:
        self.go_to(message.index)

    def action_play(self) -> None:
        self.playing = not self.playing
        if self.playing:
            if self.cursor is not None and self.state.timeline_index(self.cursor) == self.state.total_rounds - 1:
                self.cursor = self.state.timeline_cursor(0)
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
        self._timer = self.set_interval(1.0 / min(SPEEDS[self.speed_i], FRAME_HZ), self._tick)

    def _tick(self) -> None:
        last = self.state.total_rounds - 1
        if self.cursor is None or self.state.timeline_index(self.cursor) >= last:
            self.playing = False
            if self._timer is not None:
                self._timer.stop()
            self.draw_panels()
            return
        self.action_round(max(1, round(SPEEDS[self.speed_i] / FRAME_HZ)))

    def go_to(self, i: int, node: int | None = None) -> None:
        super().go_to(i, node)
        self.follow = False
