"""Sampler settings for the next prompt (ctrl+s in a chat)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Static

from presto_tui.api.params import (
    BackendName,
    MethodKind,
    Param,
    ParamError,
    PrefetchRule,
    SamplerParams,
    applies,
    budget_text,
    find_method,
    label,
    methods,
    sampler_table,
)
from presto_tui.api.sessions import CHAINS
from presto_tui.safetext import visible
from presto_tui.views.dialogs.base import Dialog


def fields() -> tuple[Param, ...]:
    """Every sampler parameter a person sets, in the specification's order, labelled as it says (a
    plugin's method's among them: the table is read when the dialog opens)."""
    return tuple(p for p in sampler_table() if p.settings)


def is_chain(sampler: str) -> bool:
    m = find_method(sampler)
    return m is None or m.chain


def shown(p: Param, sampler: str, rule: str) -> bool:
    """Whether field `p` means anything to a session of `sampler` under `rule` (the spec says)."""
    return applies(p, {"sampler": sampler, "prefetch": rule if is_chain(sampler) else PrefetchRule.NONE.value})


class SettingsScreen(Dialog[tuple[SamplerParams, str | None, int] | None]):
    """Sampler settings, chains per prompt (and model) for the next prompt; validated before closing.

    Every field is a sampler parameter of the specification (its label, its one validation path,
    the message the command line gives).  Only the fields that apply to the sampler and rule typed
    show (`shown`): a one-shot method hides the MH chain's (its prefetch rule, budget, K...) and
    shows its own; a field out of view keeps its value, and a one-shot method is saved without a
    prefetch rule.
    The fields scroll; Save and Cancel stay at the bottom of the dialog, always in view."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, params: SamplerParams, model: str | None, backend: str = "", chains: int = 1) -> None:
        super().__init__()
        self.params = params
        self.model = model
        self.backend = backend
        self.chains = chains
        self.fields = fields()

    def _shown(self, name: str) -> str:
        if name == "prefetch" and not is_chain(self.params.sampler):
            return SamplerParams().prefetch  # a one-shot's "none" is forced, not chosen: a chain starts anew
        if name == "budget":
            return budget_text(self.params.to_dict())  # as -N writes it: auto, a cap, fill:N
        value = getattr(self.params, name)
        if value is None:
            return ""  # an optional one (tau, B): empty takes its default
        if isinstance(value, bool):
            return "true" if value else "false"
        return f"{value:g}" if isinstance(value, float) else str(value)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="settings"):
            yield Static(Text("Settings for the next prompt", style="bold"))
            yield Static("", id="settings-note")
            with VerticalScroll(id="settings-fields"):
                for p in self.fields:
                    with Horizontal(classes="field", id=f"row-{p.name}") as row:
                        row.display = shown(p, self.params.sampler, self.params.prefetch)
                        yield Label(p.label)
                        yield Input(self._shown(p.name), id=f"f-{p.name}", compact=True)
                with Horizontal(classes="field"):
                    yield Label("chains M per prompt (at once)")
                    yield Input(str(self.chains), id="f-chains", compact=True)
                with Horizontal(classes="field"):
                    yield Label("model (restarts the engine)")
                    if self.builtin_model:  # the synthetic backend is its own tiny model
                        yield Input("", placeholder=f"{self.backend}'s own", id="f-model", compact=True,
                                    disabled=True)
                    else:
                        yield Input(self.model or "", placeholder="smollm2-135m (embedded)", id="f-model",
                                    compact=True)
            yield Static("", id="settings-error")
            with Horizontal(id="settings-buttons"):
                yield Button("Save", variant="primary", id="save", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    @property
    def builtin_model(self) -> bool:
        return self.backend in BackendName.names() and BackendName.of(self.backend).builtin_model

    def on_mount(self) -> None:
        self.query_one(f"#f-{self.fields[0].name}", Input).focus()  # ctrl+s, then type: it goes into a field
        self._note(self.params.sampler)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id not in ("f-sampler", "f-prefetch"):
            return
        sampler, rule = self.sampler(), self.rule()
        for p in self.fields:
            self.query_one(f"#row-{p.name}").display = shown(p, sampler, rule)
        self._note(sampler)

    def _note(self, sampler: str) -> None:
        kinds = {k: " ".join(m.name for m in methods() if m.kind is k) for k in MethodKind}
        note = Text("samplers: " + "; ".join(f"{k.plural} {names}" for k, names in kinds.items() if names),
                    style="dim")
        m = find_method(sampler)
        if m is not None and not m.chain:
            note.append(f"\n{m.display} is a one-shot sampler, not an MH chain: no prefetch rule, budget, K, B or "
                        "epsilon (their fields are hidden)", style="dim")
        self.query_one("#settings-note", Static).update(note)

    def sampler(self) -> str:
        """The sampler the dialog stands at (the one given, while the field names none)."""
        typed = self.query_one("#f-sampler", Input).value.strip()
        return typed if find_method(typed) is not None else self.params.sampler

    def rule(self) -> str:
        """The rule the dialog stands at (the one given, while the field names none)."""
        typed = self.query_one("#f-prefetch", Input).value.strip()
        return typed if typed in PrefetchRule.names() else self.params.prefetch

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
        values: dict[str, object] = {}
        sampler, rule = self.sampler(), self.rule()
        try:
            for p in self.fields:
                if not shown(p, sampler, rule):
                    continue  # out of view: it keeps its value
                # the one validation path, its messages naming each field by its label
                values.update(p.read(self.query_one(f"#f-{p.name}", Input).value, label))
            if not is_chain(sampler):
                values["prefetch"] = PrefetchRule.NONE.value  # a one-shot method has no prefetch rule
            try:
                params = self.params.with_(**values).validate(label)
            except ParamError as e:  # (a public Params checks itself when built, naming its fields)
                raise e.named(label) from None
            raw = self.query_one("#f-chains", Input).value.strip()
            try:
                chains = int(raw)
            except ValueError:
                raise ParamError(f"chains: not an integer: {visible(raw[:40], keep_newlines=False)!r}") from None
            CHAINS.check("chains", chains)
        except ParamError as e:
            self.query_one("#settings-error", Static).update(Text(str(e)))
            return
        model = self.query_one("#f-model", Input).value.strip() or None
        self.dismiss((params, self.model if self.builtin_model else model, chains))
