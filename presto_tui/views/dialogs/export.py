"""What to export and where to: a round view's exports (`e`), a chain history's, a prompt's chains'."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from presto_tui.views.dialogs.base import Dialog

EXPORTS = (  # (key, kind, what)
    ("s", "svg", "the screen as SVG"),
    ("t", "text", "this round's tree as text"),
    ("j", "json", "this round's tree as JSON"),
    ("c", "clipboard", "the answer to the clipboard"),
    ("a", "answer", "the answer to a file"),
)


ExportOption = tuple[str, str, str]  # (key, kind, what)


def export_bindings(options: tuple[ExportOption, ...]) -> list[BindingType]:
    return [Binding(key, f"export('{kind}')", what, show=False) for key, kind, what in options]


class ChoiceExportScreen(Dialog[tuple[str, Path] | None]):
    """Pick what to export (a key or a click) and the folder the files go to; a subclass names
    its OPTIONS (and binds their keys with export_bindings) and its HEADING."""

    BINDINGS = [Binding("escape,q", "cancel", "cancel")]
    HEADING = "Export (a key, or click)"
    OPTIONS: tuple[ExportOption, ...] = ()

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Static(Text(self.HEADING, style="bold"))
            for key, kind, what in self.OPTIONS:
                yield Button(f"{key}  {what}", id=f"export-{kind}", compact=True, classes="export-option")
            with Horizontal(classes="field"):
                yield Label("folder")
                yield Input(str(self.folder), id="export-folder", compact=True)

    def first_option(self) -> Button:
        return self.query(".export-option").first(Button)

    def on_mount(self) -> None:
        self.first_option().focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_export(self, kind: str) -> None:
        folder = self.query_one("#export-folder", Input).value.strip() or "."
        self.dismiss((kind, Path(folder).expanduser()))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_export((event.button.id or "").removeprefix("export-"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter in the folder field: keep the dialog open for a choice
        self.first_option().focus()


class ExportScreen(ChoiceExportScreen):
    """A round's exports: the screen, the tree, the answer."""

    OPTIONS = EXPORTS
    BINDINGS = export_bindings(EXPORTS)


POPULATION_EXPORTS = (
    ("s", "svg", "the screen as SVG"),
    ("t", "text", "every member's records as text"),
    ("j", "json", "every member's records as JSON, with the trace's"),
    ("c", "clipboard", "the answer to the clipboard"),
    ("a", "answer", "the answer to a file"),
)


class PopulationExportScreen(ChoiceExportScreen):
    """A population's exports (tempering's replicas, the particles): the screen, its members, the answer."""

    OPTIONS = POPULATION_EXPORTS
    BINDINGS = export_bindings(POPULATION_EXPORTS)


HISTORY_EXPORTS = (
    ("j", "json", "JSON: every transition and every distinct state"),
    ("v", "csv", "CSV: the transitions, and the states in a second file"),
)


class HistoryExportScreen(ChoiceExportScreen):
    """JSON (transitions and states) or CSV (two files), into a folder."""

    HEADING = "Export the chain's history (a key, or click)"
    OPTIONS = HISTORY_EXPORTS
    BINDINGS = export_bindings(HISTORY_EXPORTS)


DRAWS_EXPORTS = (
    ("v", "csv", "CSV: every chain's draws, one row per transition"),
    ("n", "nc", "NetCDF: the DataTree ArviZ writes (.nc)"),
    ("b", "both", "both files"),
)


class DrawsExportScreen(ChoiceExportScreen):
    """Every chain's draws as `run --draws` writes them: a tidy CSV, ArviZ's NetCDF, or both."""

    HEADING = "Export the chains' draws (a key, or click)"
    OPTIONS = DRAWS_EXPORTS
    BINDINGS = export_bindings(DRAWS_EXPORTS)
