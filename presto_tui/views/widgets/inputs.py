"""The one-line text fields of a round view: the search bar and the chat's prompt."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Input

NEWLINE = "⏎"  # how a pasted line break shows in the one-line prompt; sent as a line break


class SearchBar(Input):
    """The search query; Enter searches, Escape closes it (the screen's `close_search`, before the
    screen's own Escape, which cancels a run)."""

    BINDINGS = [Binding("escape", "screen.close_search", "close search", show=False)]


class PromptInput(Input):
    """The prompt: one line on screen, but a pasted text keeps its line breaks (shown as ⏎).

    Textual's Input keeps only a paste's first line, silently; a prompt pasted from an
    editor would lose everything after it."""

    def _on_paste(self, event: events.Paste) -> None:
        lines = event.text.splitlines()
        if len(lines) <= 1:
            return  # Input's own handler (Textual calls every class's handler in the MRO)
        event.prevent_default()  # not Input's handler too: it would paste the first line again
        event.stop()
        joined = NEWLINE.join(lines)
        if self.selection.is_empty:
            self.insert_text_at_cursor(joined)
        else:
            self.replace(joined, *self.selection)
        self.notify(f"pasted {len(lines)} lines: line breaks show as {NEWLINE} and are kept", timeout=4)

    @property
    def prompt(self) -> str:
        return self.value.replace(NEWLINE, "\n").strip()
