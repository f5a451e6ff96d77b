"""Sampler settings for the next prompt (ctrl+s in a chat)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Static

from presto_tui.runtime.core.names import PrefetchRule, SamplerName
from presto_tui.runtime.core.params import BON_RANKS, INPUT_MODES, PREFETCH_RULES, SAMPLERS, ParamError, SamplerParams
from presto_tui.runtime.session.chains import CHAINS
from presto_tui.safetext import visible
from presto_tui.views.dialogs.base import Dialog

# (field, label): every SamplerParams field a person sets; an empty tau or block size takes its default
FIELDS = [
    ("sampler", "sampler (the choices: above)"),  # all six do not fit a label
    ("prefetch", f"rule ({'/'.join(PREFETCH_RULES)})"),
    ("inputs", f"inputs ({'/'.join(INPUT_MODES)})"),
    ("alpha", "alpha"),
    ("tau", "tau (empty: 1/alpha)"),
    ("max_new_tokens", "new tokens n"),
    ("block_size", "block size B (empty: n)"),
    ("steps", "steps K per block"),
    ("budget", "budget N"),
    ("epsilon", "epsilon"),
    ("seed", "seed"),
    ("beta", "beta (EntropyCut)"),
    ("cut_mix", "cut_mix (EntropyCut)"),
    ("tries", "tries (MultiTryMH)"),
    ("samples", "samples N (best-of-N)"),
    ("bon_rank", f"rank by ({'/'.join(BON_RANKS)}) (best-of-N)"),
    ("particles", "particles P (PowerSMC)"),
    ("smc_block", "tokens per block (PowerSMC)"),
    ("smc_ramp", "ramp: tokens to reach alpha (PowerSMC)"),
]
NUMBERS = {"alpha": float, "tau": float, "max_new_tokens": int, "block_size": int, "steps": int, "budget": int,
           "epsilon": float, "seed": int, "beta": float, "cut_mix": float, "tries": int, "samples": int,
           "particles": int, "smc_block": int, "smc_ramp": int}
OPTIONAL = {"tau", "block_size"}
# what applies to which sampler: an MH chain's own fields mean nothing to a baseline (no rounds, no
# transitions), a baseline's own fields only to it; the rest (alpha, tau, n, seed) to every sampler
CHAIN_ONLY = {"prefetch", "inputs", "block_size", "steps", "budget", "epsilon", "beta", "cut_mix", "tries"}
BASELINE_OWN = {SamplerName.BESTOFN.value: {"samples", "bon_rank"},
                SamplerName.POWERSMC.value: {"particles", "smc_block", "smc_ramp"}}


def applies(name: str, sampler: str) -> bool:
    """Whether settings field `name` means anything to `sampler` (a known sampler's name)."""
    baseline = not SamplerName.of(sampler).chain
    if name in CHAIN_ONLY:
        return not baseline
    if any(name in own for own in BASELINE_OWN.values()):
        return name in BASELINE_OWN.get(sampler, set())
    return True


class SettingsScreen(Dialog[tuple[SamplerParams, str | None, int] | None]):
    """Sampler settings, chains per prompt (and model) for the next prompt; validated before closing.

    Only the fields that apply to the sampler typed show (`applies`): a baseline hides
    the MH chain's (its prefetch rule, budget, K...) and shows its own; a field out of view
    keeps its value, and a baseline is saved without a prefetch rule.  The fields scroll;
    Save and Cancel stay at the bottom of the dialog, always in view."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, params: SamplerParams, model: str | None, backend: str = "", chains: int = 1) -> None:
        super().__init__()
        self.params = params
        self.model = model
        self.backend = backend
        self.chains = chains

    def _shown(self, name: str) -> str:
        if name == "prefetch" and not SamplerName.of(self.params.sampler).chain:
            return SamplerParams().prefetch  # a baseline's "none" is forced, not chosen: a chain starts anew
        if name == "tau":
            return "" if self.params.tau is None else f"{self.params.tau:g}"
        if name == "block_size":
            return "" if self.params.block_size is None else str(self.params.block_size)
        return str(getattr(self.params, name))

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="settings"):
            yield Static(Text("Settings for the next prompt", style="bold"))
            yield Static("", id="settings-note")
            with VerticalScroll(id="settings-fields"):
                for name, title in FIELDS:
                    with Horizontal(classes="field", id=f"row-{name}") as row:
                        row.display = applies(name, self.params.sampler)
                        yield Label(title)
                        yield Input(self._shown(name), id=f"f-{name}", compact=True)
                with Horizontal(classes="field"):
                    yield Label("chains M per prompt (at once)")
                    yield Input(str(self.chains), id="f-chains", compact=True)
                with Horizontal(classes="field"):
                    yield Label("model (restarts the engine)")
                    if self.backend == "synthetic":  # the synthetic backend is its own tiny model
                        yield Input("", placeholder="none: the synthetic backend's own model", id="f-model",
                                    compact=True, disabled=True)
                    else:
                        yield Input(self.model or "", placeholder="smollm2-135m (embedded)", id="f-model",
                                    compact=True)
            yield Static("", id="settings-error")
            with Horizontal(id="settings-buttons"):
                yield Button("Save", variant="primary", id="save", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one(f"#f-{FIELDS[0][0]}", Input).focus()  # ctrl+s, then type: it goes into a field
        self._note(self.params.sampler)

    def on_input_changed(self, event: Input.Changed) -> None:
        sampler = event.value.strip()
        if event.input.id != "f-sampler" or sampler not in SAMPLERS:
            return  # a name half typed changes nothing yet
        for name, _ in FIELDS:
            self.query_one(f"#row-{name}").display = applies(name, sampler)
        self._note(sampler)

    def _note(self, sampler: str) -> None:
        name = SamplerName.of(sampler)
        kinds = [" ".join(n.value for n in SamplerName if n.chain == chain) for chain in (True, False)]
        note = Text(f"samplers: MH chains {kinds[0]}; baselines {kinds[1]}", style="dim")
        if not name.chain:
            note.append(f"\n{name.display} is a baseline, not an MH chain: no prefetch rule, budget, K, B or "
                        "epsilon (their fields are hidden)", style="dim")
        self.query_one("#settings-note", Static).update(note)

    def sampler(self) -> str:
        """The sampler the dialog stands at (the one given, while the field names none)."""
        typed = self.query_one("#f-sampler", Input).value.strip()
        return typed if typed in SAMPLERS else self.params.sampler

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
        changes: dict[str, object] = {}
        sampler = self.sampler()
        try:
            for name, title in FIELDS:
                if not applies(name, sampler):
                    continue  # out of view: it keeps its value
                raw = self.query_one(f"#f-{name}", Input).value.strip()
                kind = NUMBERS.get(name)
                if kind is None:
                    changes[name] = raw
                elif raw == "" and name in OPTIONAL:
                    changes[name] = None
                else:
                    try:
                        changes[name] = kind(raw)
                    except ValueError:
                        raise ParamError(f"{title.split(' (')[0]}: not {'an integer' if kind is int else 'a number'}: "
                                         f"{visible(raw[:40], keep_newlines=False)!r}") from None
            if not SamplerName.of(sampler).chain:
                changes["prefetch"] = PrefetchRule.NONE.value  # a baseline has no prefetch rule
            params = self.params.with_(**changes).validate()
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
        self.dismiss((params, model if self.backend != "synthetic" else self.model, chains))
