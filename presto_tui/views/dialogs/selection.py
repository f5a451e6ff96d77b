"""Which transitions the chains screen's diagnostics read (`b` there): the burn-in B (the first B
transitions of each block dropped as warm-up) and the thinning T (every T-th of the rest kept),
as `--burn-in` and `--thin` set them for `run`, `bench`, `eval` and `stats`."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

from presto_tui.api.diagnostics import Selection
from presto_tui.safetext import visible
from presto_tui.views.dialogs.base import Dialog


def read_selection(burn_in: str, thin: str, steps: int) -> Selection:
    """The two fields as a Selection; ValueError (one line, naming the field) where one is wrong:
    B a whole number below K (K would leave no draw), T a whole number from 1 to K."""
    values = []
    for name, raw, lo, hi in (("burn-in B", burn_in, 0, steps - 1), ("thin T", thin, 1, steps)):
        try:
            v = int(raw.strip())
        except ValueError:
            raise ValueError(f"{name} must be a whole number, got {visible(raw.strip()[:40], keep_newlines=False)!r}"
                             ) from None
        if not lo <= v <= hi:
            why = " (below K: it drops transitions of each block)" if name.startswith("burn") else ""
            raise ValueError(f"{name} must lie in [{lo}, {hi}]{why}, got {v}")
        values.append(v)
    return Selection(*values)


class SelectionScreen(Dialog[Selection | None]):
    """Burn-in and thinning for the chains' diagnostics; Enter applies, Escape keeps what was."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, selection: Selection, steps: int) -> None:
        super().__init__()
        self.selection, self.steps = selection, max(1, steps)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Static(Text("Which transitions the diagnostics read (Enter applies, Escape cancels)", style="bold"))
            yield Static(Text(f"per block of K={self.steps}: the first B dropped (warm-up), then every T-th kept; "
                              "the answers are the chains' final states, never dropped", style="dim"))
            with Horizontal(classes="field"):
                yield Label("burn-in B")
                yield Input(str(self.selection.burn_in), id="sel-burn-in", compact=True)
            with Horizontal(classes="field"):
                yield Label("thin T")
                yield Input(str(self.selection.thin), id="sel-thin", compact=True)
            yield Static("", id="sel-error")

    def on_mount(self) -> None:
        self.query_one("#sel-burn-in", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            chosen = read_selection(self.query_one("#sel-burn-in", Input).value,
                                    self.query_one("#sel-thin", Input).value, self.steps)
        except ValueError as e:
            self.query_one("#sel-error", Static).update(Text(str(e)))
            return
        self.dismiss(chosen)
