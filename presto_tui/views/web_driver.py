"""The driver of an app served to a browser by `presto-tui web` (each tab's process)."""

from __future__ import annotations

from textual import messages
from textual.drivers.web_driver import WebDriver


class TabDriver(WebDriver):
    """Textual's web driver, which also quits the app when the server goes away.

    Input ends when the app stops or when the server closed the pipe (it stopped without asking
    the app to quit, or was killed).  Textual's own driver then leaves the app running with
    nobody to see it, a prompt included, for ever; this one quits it, so that the prompt's
    session ends `cancelled` in the trace and the process ends."""

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        finally:
            if not self.exit_event.is_set():  # (set when the app itself is stopping)
                self._app.post_message(messages.ExitApp())
