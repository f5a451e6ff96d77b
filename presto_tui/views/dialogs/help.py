"""The help: every key, in one place, and what the tree's symbols and colours mean."""

from __future__ import annotations

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Static

from presto_tui.api.params import MethodKind, methods
from presto_tui.views.dialogs.base import Dialog
from presto_tui.views.state.baseline import SmcRun
from presto_tui.views.state.layout import MEANINGS, symbol
from presto_tui.views.state.ppt import PptRun

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
    ("One-shot sessions (best-of-N, PowerSMC, SPS, ...: no rounds, no tree)", (
        ("↑ ↓ / k j", "best-of-N: the next sample down or up the ranking; PowerSMC: the next particle; SPS: the "
                      "next step"),
        ("← → / h l", "PowerSMC: the block before or after (the inspector: that particle's text up to it); SPS: "
                      "the step's next candidate (the inspector: its log p0, zeta, both estimates, its rollouts)"),
        ("pgup pgdn", "a page of samples, particles or steps"),
        ("[ / ]", "a one-shot session is one place among the rounds: [ ] reach it and leave it"),
    )),
    ("Populations (tempering's replica grid; resample-move's and PowerSMC's particles)", (
        ("↑ ↓ / k j", "tempering: the replica above or below (the alpha one, the answer's, is the top row); "
                      "particles: the next particle"),
        ("← → / h l", "tempering: the barrier before or after (the inspector: the replica's exponent there, the "
                      "state it holds and where that began, its swap's A and outcome, its MH acceptance); "
                      "particles: the block before or after"),
        ("replicas", " · ".join(PptRun().legend()) + "; a cell's number: the replica whose start state it holds; "
                     "the footer: swaps accepted / proposed at each barrier; an adaptive ladder (--pt-ladder auto) "
                     "lists its moves in the stats"),
        ("particles", " · ".join(SmcRun().legend())),
        ("enter", "the replica's or resample-move particle's chain: its records at every barrier or block (the "
                  "state it holds, log p0, its swap or weight, its MH transitions and acceptances), their plot and "
                  "the inspector, its every transition plotted; [ ] the member above or below; escape back to the "
                  "grid on the record left on"),
        ("r", "on a member's chain: its own PreSTO rounds (epochs under the streaming rule) as a session of their "
              "own, with the tree, the inspector, t, H, o, search and export; escape back to the member"),
        ("m / H / o", "m: every member's trace (log p0 per barrier, or log weight per block), enter opens one; H: "
                      "the alpha replica's chain; o: a population has no rounds of its own (its members' are: "
                      "enter, then r)"),
        ("e", "the screen, every member's records as text or JSON (with the trace's own records), the answer"),
    )),
    ("Rounds (epochs in a streaming session)", (
        ("[ / ]", "previous / next round"),
        ("home / end", "first / latest round (end follows new rounds)"),
        ("g", "go to round N of this session, or S:N (round N of session S)"),
        ("o", "session overview: the whole chain, one column per round (or epoch)"),
        ("m", "chains of the prompt (--chains M, or chains in ctrl+s): the log-target of each over its "
              "transitions, their autocorrelation and running R-hat, split R-hat, ESS and MCSE, and the answer "
              "they agree on; for a one-shot method, its M answers and their vote"),
    )),
    ("Search", (
        ("/", "search nodes: k=5 (the transition it decides, from 1), cut=10-20, class=reject, or text in a proposal; "
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
        ("b", "burn-in B and thinning T: which transitions of each block the diagnostics read (as --burn-in "
              "and --thin)"),
        ("e", "every chain's draws as run --draws writes them: a tidy CSV, ArviZ's NetCDF, or both"),
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


SAMPLERS = "Samplers (ctrl+s: sampler; --sampler on the command line)"


def samplers_text() -> list:
    """The samplers ctrl+s and --sampler take, from the method registry (a plugin's among them)."""
    parts: list = [Text(SAMPLERS, style="bold underline")]
    for kind in MethodKind:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, min_width=12, style="bold")
        grid.add_column(ratio=1, overflow="fold")
        for m in methods():
            if m.kind is kind:
                grid.add_row(m.name, f"{m.display}: {m.help}")
        parts += [Text(kind.plural, style="italic"), grid]
    return [*parts, Text("")]


def help_text(styles: dict[str, Style]) -> Group:
    """Keys as a two-column grid: a description wraps inside its own column, never mid-row; then the
    samplers and the symbols."""
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
    parts += samplers_text()
    parts += [Text("Symbols", style="bold underline"), legend,
              Text("Colours: accept blue, reject vermillion, uncertain yellow, deferred purple (chosen to "
                   "stay apart for red-green colour blindness; the symbols say the same).", style="dim")]
    return Group(*parts)


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close")]
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
