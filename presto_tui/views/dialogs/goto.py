"""Go to a round (or an epoch) of any session: `g`."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from presto_tui.views.dialogs.base import Dialog


class GoToScreen(Dialog[tuple[int, int] | None]):
    """Go to a round (an epoch in a streaming session): N (of the session on screen) or S:N
    (round N of session S), both from 1."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, rounds_per_session: list[int], session: int, units: list[str] | None = None) -> None:
        super().__init__()
        self.rounds = rounds_per_session
        self.session = session
        self.units = units or ["round"] * len(rounds_per_session)  # each session's word (state/reducer.py, unit_name)

    def compose(self) -> ComposeResult:
        unit = self.units[self.session]
        with Vertical(id="dialog", classes="small"):
            yield Static(Text(f"Go to {unit} (session {self.session + 1} has {self.rounds[self.session]} {unit}s; "
                              f"{len(self.rounds)} sessions)"))
            yield Input(placeholder=f"N, or S:N for {unit} N of session S", id="goto-input", compact=True)
            yield Static("", id="goto-error")

    def on_mount(self) -> None:
        self.query_one("#goto-input", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def parse(self, raw: str) -> tuple[int, int]:
        s_raw, sep, r_raw = raw.strip().rpartition(":")
        try:
            s = int(s_raw) - 1 if sep else self.session
            r = int(r_raw) - 1
        except ValueError:
            raise ValueError(f"type the {self.units[self.session]}'s number N, or S:N") from None
        if not 0 <= s < len(self.rounds):
            raise ValueError(f"there is no session {s + 1} (1 to {len(self.rounds)})")
        if not 0 <= r < self.rounds[s]:
            raise ValueError(f"session {s + 1} has {self.units[s]}s 1 to {self.rounds[s]}")
        return s, r

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            self.dismiss(self.parse(event.value))
        except ValueError as e:
            self.query_one("#goto-error", Static).update(Text(str(e)))
