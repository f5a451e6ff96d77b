"""Modal screens: help and sampler settings."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from presto_tui.runtime.core.params import ParamError, SamplerParams

HELP = """\
Tree (focus it with Tab or a click)
  left / h        parent
  up / k          accept child (drawn above)
  down / j        reject child (drawn below)
  right / l       the child on the realized path
  [ / ]           previous / next round
  home / end      first / latest round (end follows new rounds)
  f               full prefetched tree <-> epsilon-rounded subtree
  + / -           show more / fewer low-probability nodes
  click           select a node

Chat
  i or /          type a prompt        enter  run it
  p               pause / resume       escape cancel (within one round)
  ctrl+s          sampler settings     ctrl+p command palette

Replay
  space           play / pause         < / >  slower / faster

?  this help      ctrl+q  quit

Symbols: ✓ certain accept (A >= 1-eps), ✗ certain reject (A <= eps), ? uncertain,
⏸ deferred (request infeasible this round), ○ leaf, · issued but unreachable,
▶ realized path.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(Text(HELP))
            yield Button("Close", id="close")

    def on_button_pressed(self, _event: Button.Pressed) -> None:
        self.dismiss()


FIELDS = [
    ("sampler", "sampler (powermh/entropycut/multitry)"),
    ("prefetch", "rule (none/bfs/predictive/spine)"),
    ("inputs", "inputs (decision/node)"),
    ("alpha", "alpha"),
    ("budget", "budget N"),
    ("steps", "steps K"),
    ("max_new_tokens", "new tokens n"),
    ("seed", "seed"),
]


class SettingsScreen(ModalScreen[tuple[SamplerParams, str | None] | None]):
    """Sampler settings (and model) for the next prompt; validated before closing."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, params: SamplerParams, model: str | None) -> None:
        super().__init__()
        self.params = params
        self.model = model

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(Text("Settings for the next prompt", style="bold"))
            for name, title in FIELDS:
                with Horizontal(classes="field"):
                    yield Label(title)
                    yield Input(str(getattr(self.params, name)), id=f"f-{name}")
            with Horizontal(classes="field"):
                yield Label("model (restarts engine)")
                yield Input(self.model or "", placeholder="smollm2-135m", id="f-model")
            yield Static("", id="settings-error")
            with Horizontal(classes="field"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.save()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter in a field saves the settings; it is not a prompt
        self.save()

    def save(self) -> None:
        values = {name: self.query_one(f"#f-{name}", Input).value.strip() for name, _ in FIELDS}
        try:
            changes = dict(sampler=values["sampler"], prefetch=values["prefetch"], inputs=values["inputs"],
                           alpha=float(values["alpha"]),
                           budget=int(values["budget"]), steps=int(values["steps"]),
                           max_new_tokens=int(values["max_new_tokens"]), seed=int(values["seed"]),
                           block_size=None)
            params = self.params.with_(**changes).validate()
        except ValueError as e:  # ParamError is a ValueError; so are bad numbers
            msg = str(e) if isinstance(e, ParamError) else f"not a number: {e}"
            self.query_one("#settings-error", Static).update(Text(msg))
            return
        model = self.query_one("#f-model", Input).value.strip() or None
        self.dismiss((params, model))
