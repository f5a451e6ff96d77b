"""A population member's own chain as a session of its own: its PreSTO rounds (its epochs under the
streaming rule) on a timeline, with everything the round view has (the tree and its inspector, `t`,
`H`, search, export), folded from the member's recorded events (`SessionView.members`, schema 1.4).
`r` on a member's screen opens it, Escape goes back; in a live chat it takes the member's new rounds
as they come, following the last where it was on it."""

from __future__ import annotations

from textual.binding import Binding

from presto_tui.views.screens.members import POLL_S
from presto_tui.views.screens.replay import ReplayScreen
from presto_tui.views.state.reducer import AppState


class MemberRoundsScreen(ReplayScreen):
    BINDINGS = [Binding("escape", "close", "back to the member")]

    def __init__(self, state: AppState, session: int, member: int, label: str) -> None:
        view = state.sessions[session].members[member]
        super().__init__(AppState(sessions=[view], vocab=state.vocab, label=label, member=(session, member)))
        # (the vocab grows with the chat's; every screen from here names the session by its label, every export
        # by the population's session and the member)
        self._seen = len(view.events)

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(POLL_S, self._poll)

    def _poll(self) -> None:
        view = self.state.sessions[0]
        if len(view.events) == self._seen:
            return
        self._seen = len(view.events)
        last = self.state.total_rounds - 1
        if last < 0:
            return
        if self.cursor is None or self.follow:  # (no round yet when it opened, or on the last one: follow)
            self.cursor = self.state.timeline_cursor(last)
            self.follow = True
        self.redraw(keep_selection=True)

    def go_to(self, i: int, node: int | None = None) -> None:
        super().go_to(i, node)
        self.follow = i == self.state.total_rounds - 1  # (the last round: keep following it as rounds come)

    def action_close(self) -> None:
        self.dismiss(None)
