"""Lay a round's prefetch tree out as text rows (pure; the tree widget draws the rows).

The binary tree is drawn sideways: depth grows to the right, the accept child
sits above its parent and the reject child below, so a run of accepts climbs
and a run of rejects falls, and the realized path reads left to right:

    │   ┌─✓ #3 d2 c=40 A=1.00
    ┌─✓ #1 d1 c=61 A=0.98
    │   └─✗ #4 d2 c=12 A=0.00
    ● #0 d0 c=80 A=0.98
    └─✗ #2 d1 ...

Decision inputs can make a round's full tree astronomically large, so rows
are unfolded lazily and only for nodes worth showing: the realized path
always; in `rounded` mode the epsilon-rounded subtree; in `full` mode every
node whose reach probability is at least `min_reach`.  `hidden` counts the
rest.  Every node carries a symbol for its class or status, so the tree reads
without colour.
"""

from __future__ import annotations

from dataclasses import dataclass

from presto_tui.api.events import ACCEPT, REJECT, UNCERTAIN, NodeStatus, NodeView, RoundTree

SYMBOLS = {ACCEPT: "✓", REJECT: "✗", UNCERTAIN: "?", NodeStatus.DEFERRED: "⏸", NodeStatus.LEAF: "○",
           NodeStatus.UNREACHABLE: "·", NodeStatus.LIVE: "◌", NodeStatus.ABORTED: "⊘"}
# (kind, short name): the one-line legend under the tree's title
LEGEND = ((ACCEPT, "accept"), (REJECT, "reject"), (UNCERTAIN, "uncertain"), (NodeStatus.DEFERRED, "deferred"),
          (NodeStatus.LEAF, "leaf"), ("path", "path"), (NodeStatus.UNREACHABLE, "unreachable"),
          (NodeStatus.LIVE, "decoding"), (NodeStatus.ABORTED, "aborted"))
# (kind, symbol, meaning): the help screen's legend
MEANINGS = (
    (ACCEPT, "certain accept (A >= 1 - eps)"), (REJECT, "certain reject (A <= eps)"),
    (UNCERTAIN, "uncertain (eps < A < 1 - eps)"), (NodeStatus.DEFERRED, "deferred: request infeasible this round"),
    (NodeStatus.LEAF, "leaf: not expanded this round"), (NodeStatus.UNREACHABLE, "issued but unreachable"),
    (NodeStatus.LIVE, "decoding (streaming)"), (NodeStatus.ABORTED, "aborted (streaming)"),
)
MAX_ROWS = 4000
# `+` stops here.  Below a certain reject (A = 1 exactly) or a deferred node the reach is exactly
# 0: such nodes are listed only once a person navigates to them with the arrow keys.
REACH_FLOOR = 1e-12


@dataclass(frozen=True)
class Row:
    node: NodeView
    prefix: str  # connector characters before the node's symbol
    kind: str  # an epsilon class for expanded nodes, else the status


@dataclass(frozen=True)
class Layout:
    rows: tuple[Row, ...]
    hidden: int  # nodes of the full tree not shown
    total: int

    def row_of(self, node_id: int) -> int | None:
        for i, r in enumerate(self.rows):
            if r.node.id == node_id:
                return i
        return None


def node_kind(v: NodeView) -> str:
    return v.score.eps_class if v.status == NodeStatus.EXPANDED and v.score is not None else v.status


def label(tree: RoundTree, v: NodeView) -> str:
    d = v.decision
    parts = [f"#{v.id}"]
    if d is not None:
        parts.append(f"k{d.index + 1} c={d.cut}")  # the transition it decides, from 1
    if v.score is not None and v.status == NodeStatus.EXPANDED:
        parts.append(f"A={v.score.accept_prob:.2f}")
    elif v.status in (NodeStatus.LIVE, NodeStatus.ABORTED) and d is not None and d.request is not None:
        done = tree.requests[d.request].done or 0
        parts.append(f"{'decoding' if v.status == NodeStatus.LIVE else 'aborted at'} {done}/{tree.T - d.cut}")
    elif v.status != NodeStatus.EXPANDED:
        parts.append(v.status)
    return " ".join(parts)


def visible(tree: RoundTree, v: NodeView, mode: str, min_reach: float,
            pinned: frozenset[int] = frozenset()) -> bool:
    if v.id == 0 or v.on_path or v.id in pinned:
        return True
    if mode == "rounded":
        return v.rounded
    # explicit trees are small (a few nodes per request): show them whole
    return not tree.lazy or v.reach >= min_reach


def layout(tree: RoundTree, mode: str = "full", min_reach: float = 1e-3,
           pinned: frozenset[int] = frozenset()) -> Layout:
    """Rows to draw; `pinned` nodes (ones a person navigated to) are shown whatever their reach."""
    rows: list[Row] = []
    root = tree.node(0)
    assert root is not None  # every round has its root
    # In-order (accept subtree, the node, reject subtree) without recursion: a walked path can be
    # thousands of nodes deep.  Stack items: (node, prefix, branch, up, its row is due).
    stack: list[tuple[NodeView, str, str, bool | None, bool]] = [(root, "", "", None, False)]
    while stack and len(rows) < MAX_ROWS:
        v, prefix, branch, up, due = stack.pop()
        if due:
            rows.append(Row(v, prefix + branch, node_kind(v)))
            continue
        kids = {c.accept: c for c in tree.children(v.id) if visible(tree, c, mode, min_reach, pinned)}
        if False in kids:  # reject child below
            stack.append((kids[False], prefix + ("│   " if up is True else "    "), "└─", False, False))
        stack.append((v, prefix, branch, up, True))
        if True in kids:  # accept child above
            stack.append((kids[True], prefix + ("    " if up in (True, None) else "│   "), "┌─", True, False))
    total = tree.count_nodes()
    return Layout(tuple(rows), max(0, total - len(rows)), total)


def symbol(kind: str) -> str:
    return SYMBOLS.get(kind, "?")


def row_text(tree: RoundTree, row: Row) -> str:
    """One row as plain text (the export's tree drawing): connectors, symbol, label, path marker."""
    return f"{row.prefix}{symbol(row.kind)} {label(tree, row.node)}{' ▶' if row.node.on_path else ''}"


def tree_text(tree: RoundTree, lay: Layout) -> str:
    lines = [row_text(tree, r) for r in lay.rows]
    if lay.hidden:
        lines.append(f"({lay.hidden:,} of {lay.total:,} nodes not shown)")
    return "\n".join(lines) + "\n"
