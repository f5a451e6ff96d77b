"""How the chain's text evolved: one state against an earlier one, the changed span marked (pure).

Used by the round screen (the state before and after the round on screen) and
the overview (the text after any round of the chain).  Token text is untrusted
and unbounded (a trace may hold a 1000-character piece or a megabyte prompt),
so everything drawn here goes through `visible()` and a character budget: the
cost is bounded by what a pane can show, never by what the trace holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from presto_tui.api.events import Pieces, cut_at_eos
from presto_tui.safetext import visible
from presto_tui.words import count

TEXT_BUDGET = 4000  # characters of token text per pane: many screens' worth, cheap to lay out
PIECE_MAX = 200  # one token's text is cut beyond this


def changed_span(before: Sequence[int], after: Sequence[int]) -> tuple[int, int, int] | None:
    """(start, end in before, end in after) of the smallest span outside which the two states
    agree; None if they are equal."""
    n = min(len(before), len(after))
    i = 0
    while i < n and before[i] == after[i]:
        i += 1
    if i == len(before) == len(after):
        return None
    j = 0
    while j < n - i and before[-1 - j] == after[-1 - j]:
        j += 1
    return i, len(before) - j, len(after) - j


def clip(s: str, limit: int) -> str:
    """At most `limit` characters of untrusted text, made visible (cut first: visible() of a
    megabyte string would cost a megabyte)."""
    cut = s[:limit]
    return visible(cut) + ("…" if len(s) > limit else "")


@dataclass
class Writer:
    """Appends token text to a Text until a character budget runs out."""

    text: Text
    pieces: Pieces
    budget: int = TEXT_BUDGET

    def tokens(self, ids: Sequence[int], style: Style | str = "") -> None:
        if self.budget <= 0 or not ids:
            return
        # one character per token at least: never look up more tokens than the budget can show
        for piece in self.pieces(list(ids[:self.budget])):
            shown = clip(piece, min(PIECE_MAX, self.budget))
            self.text.append(shown, style=style)
            self.budget -= max(1, len(shown))
            if self.budget <= 0:
                self.text.append(" …(cut)", style="dim")
                return

    def note(self, s: str) -> None:
        self.text.append(s, style="dim")


@dataclass(frozen=True)
class DiffStyles:
    removed: Style | str = "strike"
    added: Style | str = "bold underline"


PLAIN_DIFF = DiffStyles()  # without colour: the marks alone say which is which


def evolution_text(before: Sequence[int] | None, after: Sequence[int], pieces: Pieces, *,
                   eos_id: int | None = None, styles: DiffStyles = PLAIN_DIFF,
                   budget: int = TEXT_BUDGET) -> Text:
    """`after` as a reader sees it (up to its first EOS), with the span that changed since
    `before` marked: the replaced text (up to `before`'s own EOS) struck through, the new
    text underlined."""
    out = Text()
    w = Writer(out, pieces, budget)
    answer = len(cut_at_eos(list(after), eos_id))
    span = changed_span(before, after) if before is not None else None
    if span is None or before is None:
        w.tokens(after[:answer])
    else:
        i, jb, ja = span
        w.tokens(after[:min(i, answer)])
        if i < answer:
            w.tokens(before[i:min(jb, len(cut_at_eos(list(before), eos_id)))], styles.removed)
            w.tokens(after[i:min(ja, answer)], styles.added)
            w.tokens(after[ja:answer])
    if answer < len(after):
        w.note(f"  [EOS; {count(len(after) - answer, 'more token')} in the state]")
    if span is not None and span[0] >= answer:
        w.note(f"  [the change lies after the EOS, from token {span[0]}]")
    return out


def span_note(before: Sequence[int], after: Sequence[int]) -> str:
    """One line saying what changed: 'tokens 40..46 changed (7 replaced by 7)', or that nothing did."""
    span = changed_span(before, after)
    if span is None:
        return "text unchanged"
    i, jb, ja = span
    return f"tokens {i}..{max(i, ja - 1)} changed ({jb - i} replaced by {ja - i})"
