"""The pane under the tree: the prompt and the chain's text, marking what the round on screen changed."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from presto_tui.api.events import Pieces, RoundDone, cut_at_eos
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state.evolution import DiffStyles, clip, evolution_text, span_note
from presto_tui.views.state.reducer import SessionView


class ChainText(VerticalScroll):
    """The session's prompt and text (`after`: the tokens to show); where they are the result of the
    round on screen, the span it changed is marked (struck: before it, underlined: after it), and the
    pane's border title says so."""

    COMPONENT_CLASSES = {"output--removed", "output--added"}

    def compose(self) -> ComposeResult:
        yield Static(id="output-text")

    def show(self, session: SessionView | None, after: Sequence[int], rd: RoundDone | None, pieces: Pieces) -> None:
        text, title = self.text(session, list(after), rd, pieces)
        self.query_one("#output-text", Static).update(text)
        self.border_title = title  # what the marks mean, at no cost of a line

    def text(self, session: SessionView | None, after: list[int], rd: RoundDone | None,
             pieces: Pieces) -> tuple[Text, str]:
        if session is None:
            return Text("the chain's current state appears here", style="dim"), ""
        t = Text()
        t.append("> " + clip(session.start.prompt.replace("\n", " ⏎ "), 300) + "\n", style="bold")
        eos = session.start.backend_info.get("eos_id")
        if session.method_run is not None:  # a sample stops at its EOS: no state beyond it to speak of
            after = list(cut_at_eos(after, eos))
        # mark what the round on screen changed, when the text shown is that round's result
        before = rd.tree.root.tokens if rd is not None and tuple(after) == rd.tree.final_state.tokens else None
        styles = DiffStyles(removed=self.get_component_rich_style("output--removed"),
                            added=self.get_component_rich_style("output--added"))
        t.append_text(evolution_text(before, after, pieces, eos_id=eos, styles=styles))
        if session.method_run is not None:
            return t, bt.answer_title(session)
        title = "the chain's current text"
        if before is not None and rd is not None:
            title = f"{session.unit} {rd.round + 1}: {span_note(before, after)}"
            if tuple(before) != tuple(after):
                title += " · struck: before it, underlined: after it"
        return t, title
