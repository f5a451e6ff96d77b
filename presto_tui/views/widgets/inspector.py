"""The inspector: the numbers of the selected node, its MH ratio in named terms, and its text diff."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from presto_tui.api.events import NodeStatus, NodeView, Pieces, RoundTree
from presto_tui.views.state.evolution import PLAIN_DIFF, DiffStyles, Writer
from presto_tui.views.state.folding import Paragraphs, Units
from presto_tui.views.state.layout import symbol
from presto_tui.views.state.ratio import ratio_text


def node_diff(tree: RoundTree, v: NodeView, pieces: Pieces, context: int = 12, budget: int = 1500,
              styles: DiffStyles = PLAIN_DIFF) -> Text:
    """The proposal made at this node against the state it holds, from the cut on (at most
    `budget` characters of each: the inspector is a small pane)."""
    text = Text()
    if v.decision is None:
        return text
    cut = v.decision.cut
    state = tree.state_of(v.src)
    text.append("…", style="dim")
    Writer(text, pieces, budget // 4).tokens(state.tokens[max(0, cut - context):cut], "dim")
    text.append("\n- ")
    Writer(text, pieces, budget).tokens(state.tokens[cut:], styles.removed)
    req = tree.requests[v.decision.request] if v.decision.request is not None else None
    if req is not None and req.done is not None:
        text.append(f"\n+ (not finished: {req.done} of {tree.T - cut} tokens decoded)", style="italic")
    elif req is not None:
        text.append("\n+ ")
        Writer(text, pieces, budget).tokens(req.proposal.tokens, styles.added)
    else:
        text.append("\n+ (not generated: deferred to a later round)", style="italic")
    return text


class Inspector(Static):
    """Numbers and text diff of the selected node."""

    COMPONENT_CLASSES = {"inspector--removed", "inspector--added"}

    def show(self, tree: RoundTree | None, v: NodeView | None, pieces: Pieces) -> None:
        if tree is None or v is None:
            self.update(Text("no round yet", style="dim"))
            return
        t = Text()
        t.append(f"node #{v.id}  depth {v.depth}  ", style="bold")
        t.append(f"{symbol(v.score.eps_class if v.status == NodeStatus.EXPANDED and v.score else v.status)} {v.status}")
        t.append("  on path" if v.on_path else "")
        t.append(f"\nreach {v.reach:.3g}{'  in eps-rounded subtree' if v.rounded else ''}")
        d = v.decision
        if d is not None:
            t.append(f"\ndecision k={d.index + 1}  cut {d.cut}/{tree.T} ({d.cut / tree.T:.2f})  u={d.accept_u:.3f}")
            if d.h_pred is not None:
                t.append(f"  h+={d.h_pred:.2f}")
        parts: list[Text | Units] = [t]
        t = Text()
        sc = v.score
        if sc is not None:
            parts += ratio_text(sc).parts
            t.append(f"A = {sc.accept_prob:.4f}  class {sc.eps_class}  -> "
                     f"{'accept' if d is not None and d.accept_u < sc.accept_prob else 'reject'}")
            t.append("\nt: this ratio per token", style="dim")  # the per-token view (screens/tokens.py)
            if sc.candidates:  # MultiTryMH: the candidate table
                t.append("\ncand  tau   log w    P(select)", style="bold")
                for j, (tau, log_w, prob) in enumerate(sc.candidates):
                    mark = "*" if j == sc.selected else " "
                    t.append(f"\n{mark}{j:<4} {tau:<5} {log_w:8.2f}  {prob:.3f}")
        elif v.status == NodeStatus.DEFERRED:
            t.append("request infeasible this round (Condition 1); the decision keeps its inputs")
        elif v.status == NodeStatus.LEAF:
            t.append("not expanded this round")
        elif v.status == NodeStatus.UNREACHABLE:
            t.append("issued below a deferred node's reject child: the walk cannot get here")
        elif v.status == NodeStatus.LIVE:
            t.append("its request is still decoding (streaming): scored once it finishes")
        elif v.status == NodeStatus.ABORTED:
            t.append("its request was aborted: no state the chain can still reach asks for it")
        if d is not None:
            styles = DiffStyles(self.get_component_rich_style("inspector--removed"),
                                self.get_component_rich_style("inspector--added"))
            t.append("\n" if t.plain else "")
            t.append_text(node_diff(tree, v, pieces, styles=styles))
        parts.append(t)
        self.update(Paragraphs(parts))
