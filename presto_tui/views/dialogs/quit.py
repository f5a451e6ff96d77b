"""Quitting while a prompt runs: asked first."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from presto_tui.views.dialogs.base import Dialog


class ConfirmQuitScreen(Dialog[bool]):
    """Quitting would end a running prompt: ask first (y quits, n or escape keeps it running).

    "Keep running" has the focus, so a stray Enter loses nothing; a second ctrl+q means yes
    (`PrestoApp.action_quit`)."""

    BINDINGS = [Binding("y", "answer(True)", "quit"), Binding("n,escape", "answer(False)", "keep running")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm"):
            yield Static(Text("A prompt is running: quit and end its session as cancelled? (y/n)"))
            with Horizontal(id="confirm-buttons"):
                yield Button("y  quit", variant="error", id="quit", compact=True)
                yield Button("n  keep running", id="keep", compact=True)

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def action_answer(self, quit_: bool) -> None:
        self.dismiss(quit_)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit")
