"""A scored node's MH ratio per token (`t` on a round view): which tokens drive the decision.

It draws the `TokenSplit` it is given (`state/tokens.py`), with the token texts of the table it
is given."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from presto_tui.api.events import Pieces
from presto_tui.safetext import visible
from presto_tui.views.screens.drawing import number_cell
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.layout import symbol
from presto_tui.views.state.ratio import ratio_terms
from presto_tui.views.state.tokens import NOT_RECORDED, RatioKind, TokenSplit
from presto_tui.views.widgets.footer import FittedFooter

TOKEN_TEXT = 14  # characters of a token's text in a table cell
DRIVERS = 3  # positions marked as the largest shares of log r


def token_label(piece: str) -> str:
    """A token's text in a table cell: line breaks and tabs as ⏎ and ⇥, a token of spaces as ␣
    (a blank cell says nothing), everything else as visible() shows it, cut to TOKEN_TEXT."""
    shown = piece.replace("\n", "⏎").replace("\t", "⇥")
    if shown and not shown.strip():
        shown = shown.replace(" ", "␣")
    return clip(visible(shown, keep_newlines=False), TOKEN_TEXT)


class TokenScreen(Screen[None]):
    """Per position from the cut: the proposal's token with log p0 and log q_tau, the replaced
    state's token with its own, the running target and proposal terms and the position's share of
    log r; the totals against the node's recorded terms below."""

    BINDINGS = [
        Binding("escape,t", "close", "back"),
        Binding("s", "sort", "sort: position / share"),
    ]
    COMPONENT_CLASSES = {"tok--driver", "tok--same", "tok--bad"}
    COLUMNS = ("pos", "proposal y", "log p0", "log q", "replaced x", "log p0 ", "log q ", "Σ target", "Σ proposal",
               "Δ log r")

    def __init__(self, split: TokenSplit, pieces: Pieces, where: str = "") -> None:
        super().__init__()
        self.split, self.pieces, self.where = split, pieces, where
        self.by_share = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="tok-info")
        yield DataTable(id="tok-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="tok-totals"):
            yield Static(id="tok-totals-body")
        yield FittedFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        delta = "Δ target" if self.split.ratio is RatioKind.MULTIPLE_TRY else "Δ log r"
        for name in self.COLUMNS:
            table.add_column(delta if name == "Δ log r" else name.strip(), key=name)
        self.query_one("#tok-info", Static).update(self._info())
        self.query_one("#tok-totals-body", Static).update(self._totals())
        self._fill()
        table.focus()

    def _info(self) -> Text:
        sp, v = self.split, self.split.node
        d = v.decision
        t = Text()
        t.append(f"{self.where}node #{v.id} ({symbol(sp.score.eps_class)} {sp.score.eps_class}, depth {v.depth})",
                 style="bold")
        t.append(f" · decision k={d.index + 1 if d else '?'} · cut {sp.cut} of T={sp.T} · alpha {sp.alpha:g} · "
                 f"{sp.ratio}")
        t.append(f"\nthe proposal y ({len(sp.rows)} tokens from the cut) against the suffix x of the state it would "
                 "replace; target = alpha (log p0(y) - log p0(x)), proposal = log q(x) - log q(y)", style="dim")
        if not sp.recorded:
            t.append(f"\n{NOT_RECORDED}: the tokens are listed, their values are not",
                     style=self.get_component_rich_style("tok--bad"))
        return t

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        sp = self.split
        drivers = set(sp.drivers(DRIVERS))
        order: list[int] = list(range(len(sp.rows)))
        if self.by_share and sp.recorded:
            order = sorted(order, key=lambda i: -abs(sp.rows[i].delta) if math.isfinite(sp.rows[i].delta) else 0.0)
        driver_style = self.get_component_rich_style("tok--driver")
        same_style = self.get_component_rich_style("tok--same")
        for i in order:
            r = sp.rows[i]
            # the same token in both: dim (it moves log r only through its context)
            style = same_style if r.x == r.y else ""
            tok = lambda t, style=style: Text(token_label(self.pieces([t])[0]), style=style)
            delta = number_cell(r.delta, 3) if sp.recorded else number_cell(None)
            if i in drivers:
                delta.stylize(driver_style)
                delta = Text("◆ ", style=driver_style) + delta
            cell = number_cell
            table.add_row(Text(str(r.pos), justify="right"), tok(r.y), cell(r.y_logp), cell(r.y_logq), tok(r.x),
                          cell(r.x_logp), cell(r.x_logq), cell(r.target if sp.recorded else None, 3),
                          cell(r.proposal if sp.recorded else None, 3), delta, key=str(i))

    def _totals(self) -> Text:
        sp, sc = self.split, self.split.score
        bad = self.get_component_rich_style("tok--bad")
        t = Text()
        for c in sp.checks:
            t.append(f"{c.name:<9} Σ over the tokens {c.total:9.3f}   recorded {c.recorded:9.3f}   ")
            if c.agrees:
                exact = "equal" if c.total == c.recorded else f"equal within the values' rounding (±{c.tolerance:.4f})"
                t.append(f"✓ {exact}\n")
            else:
                t.append(f"✗ differ by {c.total - c.recorded:.4f}: the trace is inconsistent\n", style=bad)
        # the inspector's own equation: the same named terms, which add up to log r
        terms = ratio_terms(sc)
        t.append(f"log r = {sc.log_ratio:.3f} =" + "".join(
            f"{' ' + sign if i else ''} {name} {value:.3f}" for i, (sign, name, value) in enumerate(terms)) + "   ")
        t.append(f"A = {sc.accept_prob:.4f}", style="bold")
        drivers = sp.drivers(DRIVERS)
        if drivers:
            t.append("\nlargest shares (◆): ")
            for n, i in enumerate(drivers):
                r = sp.rows[i]
                t.append(("  " if n else "") + f"pos {r.pos} {token_label(self.pieces([r.y])[0])} {r.delta:+.3f}")
        for note in sp.notes:
            t.append("\n" + note, style="dim")
        return t

    def action_sort(self) -> None:
        if not self.split.recorded:
            self.notify(f"{NOT_RECORDED}: there are no shares to sort by", timeout=3)
            return
        self.by_share = not self.by_share
        self._fill()
        self.notify("sorted by the size of each position's share" if self.by_share else "sorted by position",
                    timeout=2)

    def action_close(self) -> None:
        self.dismiss(None)
