"""Modal screens: help, sampler settings, go to a round, export, confirming a quit."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from presto_tui.runtime.core.names import PrefetchRule, SamplerName
from presto_tui.runtime.core.params import BON_RANKS, INPUT_MODES, PREFETCH_RULES, SAMPLERS, ParamError, SamplerParams
from presto_tui.runtime.session.chains import CHAINS
from presto_tui.safetext import visible
from presto_tui.views.layout import MEANINGS, symbol

# (section, ((keys, what it does), ...)): the help screen, and the one place every key is taught
KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Where keys go", (
        ("tab", "next pane: prompt, tree, stats and inspector, the chain's text (shift+tab: back); the "
                "focused pane is marked (the tree: its title turns into a band)"),
        ("letters", "single-letter keys (o e / n g f p q [ ] + - ...) act on the tree and the other panes, "
                    "never in a text field: in the prompt or the search they are typed"),
        ("ctrl F1 esc", "work everywhere, the prompt included"),
    )),
    ("Tree (focus it with Tab or a click)", (
        ("← / h", "parent"),
        ("↑ / k", "accept child (drawn above)"),
        ("↓ / j", "reject child (drawn below)"),
        ("→ / l", "the child on the realized path"),
        ("click", "select a node"),
        ("f", "full prefetched tree / epsilon-rounded subtree"),
        ("+ / -", "more / fewer low-probability nodes, down to reach 1e-12; nodes of reach exactly 0 "
                  "(below a certain reject or a deferred node) show once the arrows reach them"),
    )),
    ("Baseline sessions (low temperature, best-of-N, PowerSMC: no rounds, no tree)", (
        ("↑ ↓ / k j", "best-of-N: the next sample down or up the ranking; PowerSMC: the next particle"),
        ("← → / h l", "PowerSMC: the block before or after (the inspector: that particle's text up to it)"),
        ("pgup pgdn", "a page of samples or particles"),
        ("[ / ]", "a baseline session is one place among the rounds: [ ] reach it and leave it"),
    )),
    ("Rounds (epochs in a streaming session)", (
        ("[ / ]", "previous / next round"),
        ("home / end", "first / latest round (end follows new rounds)"),
        ("g", "go to round N of this session, or S:N (round N of session S)"),
        ("o", "session overview: the whole chain, one column per round (or epoch)"),
        ("m", "chains of the prompt (--chains M, or chains in ctrl+s): the log-target of each over its "
              "transitions, split R-hat, ESS and MCSE, and the answer they agree on"),
    )),
    ("Search", (
        ("/", "search nodes: k=5 (decision), cut=10-20, class=reject, or text in a proposal; "
              "terms combine; an empty search ends it"),
        ("n / N", "next / previous match (• marks matches in the tree)"),
    )),
    ("Export", (
        ("e", "the screen as SVG, this round's tree as text or JSON, the answer to the clipboard "
              "or to a file"),
    )),
    ("Compare, per token, history", (
        ("c", "mark the session on screen; c on another session opens the two side by side: parameters "
              "(≠ where they differ), acceptance curves, both answers and a diff of them (x swaps A and B)"),
        ("t", "the selected node's ratio per token: the proposal's and the replaced state's tokens with log p0 "
              "and log q, the running target and proposal terms, each position's share of log r (s sorts)"),
        ("H", "the session's whole chain: log-target and log-likelihood over transitions, accepted ones "
              "marked, the distinct states visited (e exports JSON or CSV)"),
    )),
    ("Chat", (
        ("i", "back to the prompt (enter runs it; pasted line breaks show as ⏎ and are kept); the "
              "prompt keeps the focus while its run goes on"),
        ("p", "pause / resume"),
        ("escape", "cancel (within one round), from the prompt too"),
        ("ctrl+s", "sampler settings for the next prompt"),
        ("ctrl+p", "command palette"),
    )),
    ("Replay", (
        ("space", "play / pause"),
        ("< / >", "slower / faster (up to 256 rounds or epochs a second)"),
        ("timeline", "click or drag on it to seek"),
    )),
    ("Chains", (
        ("← / →", "previous / next chain (the selected one is drawn on top)"),
        ("enter", "open the selected chain's latest round"),
        ("escape / m", "back to the tree"),
    )),
    ("Overview", (
        ("← / →", "previous / next round or epoch; or click its column"),
        ("enter", "open its tree (or click its column again)"),
        ("[ / ]", "previous / next session"),
        ("escape / o", "back to the tree"),
    )),
    ("Everywhere", (
        ("? / F1", "this help"),
        ("q / ctrl+q", "quit; with a prompt running, asks first (y quits and ends its session as cancelled); "
                       "q types a q in a text field"),
    )),
)


ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    """A modal screen that ctrl+q still quits from (a modal stops the app's own bindings, even
    priority ones; quitting is asked about where a prompt runs, as everywhere)."""

    BINDINGS = [Binding("ctrl+q", "app.quit", "quit", show=False)]


def help_text(styles: dict[str, Style]) -> Group:
    """Keys as a two-column grid: a description wraps inside its own column, never mid-row."""
    parts: list = []
    for section, rows in KEYS:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, min_width=12, style="bold")
        grid.add_column(ratio=1, overflow="fold")
        for keys, what in rows:
            grid.add_row(keys, what)
        parts += [Text(section, style="bold underline"), grid, Text("")]
    legend = Table.grid(padding=(0, 2))
    legend.add_column(no_wrap=True, min_width=12)
    legend.add_column(ratio=1, overflow="fold")
    for kind, meaning in MEANINGS:
        legend.add_row(Text(symbol(kind), style=styles.get(kind, Style())), meaning)
    legend.add_row(Text("▶ band", style=styles.get("path", Style())), "the realized path (the walk of the round)")
    legend.add_row("❯ bold", "the selected node")
    parts += [Text("Symbols", style="bold underline"), legend,
              Text("Colours: accept blue, reject vermillion, uncertain yellow, deferred purple (chosen to "
                   "stay apart for red-green colour blindness; the symbols say the same).", style="dim")]
    return Group(*parts)


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen > .help--accept { color: $mh-accept; }
    HelpScreen > .help--reject { color: $mh-reject; }
    HelpScreen > .help--uncertain { color: $mh-uncertain; }
    HelpScreen > .help--deferred { color: $mh-deferred; }
    HelpScreen > .help--path { background: $mh-path; }
    """
    COMPONENT_CLASSES = {"help--accept", "help--reject", "help--uncertain", "help--deferred", "help--path"}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="help"):
            with VerticalScroll(id="help-body"):
                yield Static(id="help-text")
            yield Button("Close", id="close", compact=True)

    def on_mount(self) -> None:
        styles = {c.split("--")[1]: self.get_component_rich_style(c) for c in self.COMPONENT_CLASSES}
        self.query_one("#help-text", Static).update(help_text(styles))

    def on_button_pressed(self, _event: Button.Pressed) -> None:
        self.dismiss()


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
    ("sps_top_k", "candidates K per step (SPS)"),
    ("sps_draws", "draws L per step (SPS; empty: K)"),
    ("sps_rollouts", "rollouts M per candidate (SPS)"),
    ("sps_horizon", "rollout horizon H (SPS; 0: to the end)"),
    ("sps_chunk", "tokens per step (SPS)"),
    ("sps_jackknife", "jackknife 1 or plain 0 (SPS)"),
]
NUMBERS = {"alpha": float, "tau": float, "max_new_tokens": int, "block_size": int, "steps": int, "budget": int,
           "epsilon": float, "seed": int, "beta": float, "cut_mix": float, "tries": int, "samples": int,
           "particles": int, "smc_block": int, "smc_ramp": int, "sps_top_k": int, "sps_draws": int,
           "sps_rollouts": int, "sps_horizon": int, "sps_chunk": int, "sps_jackknife": int}
OPTIONAL = {"tau", "block_size", "sps_draws"}
# what applies to which sampler: an MH chain's own fields mean nothing to a baseline (no rounds, no
# transitions), a baseline's own fields only to it; the rest (alpha, tau, n, seed) to every sampler
CHAIN_ONLY = {"prefetch", "inputs", "block_size", "steps", "budget", "epsilon", "beta", "cut_mix", "tries"}
BASELINE_OWN = {SamplerName.BESTOFN.value: {"samples", "bon_rank"},
                SamplerName.POWERSMC.value: {"particles", "smc_block", "smc_ramp"},
                SamplerName.SPS.value: {"sps_top_k", "sps_draws", "sps_rollouts", "sps_horizon", "sps_chunk",
                                        "sps_jackknife"}}


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
        if name in ("block_size", "sps_draws"):
            value = getattr(self.params, name)
            return "" if value is None else str(value)
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


class GoToScreen(Dialog[tuple[int, int] | None]):
    """Go to a round (an epoch in a streaming session): N (of the session on screen) or S:N
    (round N of session S), both from 1."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, rounds_per_session: list[int], session: int, units: list[str] | None = None) -> None:
        super().__init__()
        self.rounds = rounds_per_session
        self.session = session
        self.units = units or ["round"] * len(rounds_per_session)  # each session's word (state.unit_name)

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
