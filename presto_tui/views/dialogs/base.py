"""The base of every modal dialog."""

from __future__ import annotations

from typing import TypeVar

from textual.binding import Binding
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    """A modal screen that ctrl+q still quits from (a modal stops the app's own bindings, even
    priority ones; quitting is asked about where a prompt runs, as everywhere)."""

    BINDINGS = [Binding("ctrl+q", "app.quit", "quit", show=False)]
