"""Search over every round's nodes: by decision index, cut, class or proposal text (pure).

A query is a few space-separated terms, all of which a node must meet:

    k=5  k=3-7          the transition the node decides (k within its block, from 1)
    cut=12  cut=10-20   its decision's cut position
    class=reject        its class or status: accept, reject, uncertain, deferred,
                        leaf, unreachable, live, aborted (a prefix will do: class=unc)
    anything else       text in the proposal made at the node (case-insensitive)

Matches are the nodes the tree view lists (full tree, at its reach threshold),
in timeline order and, within a round, top to bottom, so that stepping through
them (`n`/`N`) lands on rows a person can see.  Rounds are filtered on their
decisions, scores and requests before any node is laid out, and each round's
matches are computed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from presto_tui.api.events import ACCEPT, REJECT, UNCERTAIN, NodeView, Pieces, RoundTree, TableTree
from presto_tui.views.state.layout import MEANINGS, layout, node_kind
from presto_tui.views.state.reducer import AppState

KINDS = tuple(kind for kind, _ in MEANINGS)
TEXT_LIMIT = 4096  # characters of a proposal searched (a hostile piece can be huge)

Cursor = tuple[int, int]  # (session, round)


class QueryError(ValueError):
    """A query that cannot be read; the message is one line for the person."""


def _range(value: str, name: str) -> tuple[int, int]:
    lo, sep, hi = value.partition("-")
    try:
        a = int(lo)
        b = int(hi) if sep else a
    except ValueError:
        raise QueryError(f"{name}= wants a number or a range like 3-7, got {value!r}") from None
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class Query:
    raw: str
    k: tuple[int, int] | None = None
    cut: tuple[int, int] | None = None
    kind: str | None = None
    text: str | None = None  # lower case

    def round_may_match(self, tree: RoundTree, proposal_text: Callable[[int], str]) -> bool:
        """A cheap necessary condition on the round's records, before any node is laid out."""
        if self.k and not any(self.k[0] <= d.index + 1 <= self.k[1] for d in tree.decisions):
            return False
        if self.cut and not any(self.cut[0] <= d.cut <= self.cut[1] for d in tree.decisions):
            return False
        if self.kind in (ACCEPT, REJECT, UNCERTAIN) and not any(
                s.eps_class == self.kind for s in tree.scores.values()):
            return False
        if self.kind and self.kind not in (ACCEPT, REJECT, UNCERTAIN) and isinstance(tree, TableTree) and not any(
                r.status == self.kind for r in tree.table.values()):
            return False
        return not self.text or any(self.text in proposal_text(i) for i in range(len(tree.requests)))

    def node_matches(self, tree: RoundTree, v: NodeView, proposal_text: Callable[[int], str]) -> bool:
        d = v.decision
        if self.k and not (d is not None and self.k[0] <= d.index + 1 <= self.k[1]):
            return False
        if self.cut and not (d is not None and self.cut[0] <= d.cut <= self.cut[1]):
            return False
        if self.kind and node_kind(v) != self.kind:
            return False
        return not self.text or (d is not None and d.request is not None and self.text in proposal_text(d.request))


def parse(raw: str) -> Query:
    k = cut = None
    kind = None
    words = []
    for term in raw.split():
        key, eq, value = term.partition("=")
        key = key.lower()
        if eq and key == "k":
            k = _range(value, "k")
        elif eq and key == "cut":
            cut = _range(value, "cut")
        elif eq and key == "class":
            hits = [c for c in KINDS if c.startswith(value.lower())] if value else []
            if len(hits) != 1:
                raise QueryError(f"class= wants one of {', '.join(KINDS)}, got {value!r}")
            kind = hits[0]
        else:
            words.append(term)
    text = " ".join(words).lower() or None
    if not (k or cut or kind or text):
        raise QueryError("empty search: try k=5, cut=10-20, class=reject or some text")
    return Query(raw.strip(), k, cut, kind, text)


class Search:
    """A query's matches over an `AppState`, found round by round as they are asked for."""

    def __init__(self, query: Query, state: AppState, min_reach: float = 1e-3) -> None:
        self.query = query
        self.state = state
        self.min_reach = min_reach
        self._matches: dict[Cursor, tuple[int, ...]] = {}

    def _proposal_text(self, tree: RoundTree, pieces: Pieces) -> Callable[[int], str]:
        cache: dict[int, str] = {}

        def text(i: int) -> str:
            if i not in cache:
                tokens = tree.requests[i].proposal.tokens
                s, n = [], 0
                for piece in pieces(list(tokens[:TEXT_LIMIT])):
                    s.append(piece[:TEXT_LIMIT - n])
                    n += len(s[-1])
                    if n >= TEXT_LIMIT:
                        break
                cache[i] = "".join(s).lower()
            return cache[i]

        return text

    def matches(self, cursor: Cursor) -> tuple[int, ...]:
        """Node ids of the round's matches, top to bottom."""
        if cursor not in self._matches:
            rd = self.state.round_at(cursor)
            if rd is None:  # a baseline session's place on the timeline: no rounds, no nodes
                self._matches[cursor] = ()
                return ()
            tree = rd.tree
            text = self._proposal_text(tree, self.state.pieces)
            found: tuple[int, ...] = ()
            if self.query.round_may_match(tree, text):
                rows = layout(tree, "full", self.min_reach).rows
                found = tuple(row.node.id for row in rows if self.query.node_matches(tree, row.node, text))
            self._matches[cursor] = found
        return self._matches[cursor]

    def step(self, cursor: Cursor | None, node: int, forward: bool = True) -> tuple[Cursor, int, bool] | None:
        """The next (or previous) match after node `node` of round `cursor`: (round, node, wrapped
        around the end of the timeline); None if nothing matches anywhere."""
        total = self.state.total_rounds
        if not total:
            return None
        start = self.state.timeline_index(cursor) if cursor is not None else (0 if forward else total - 1)
        if cursor is not None and self.matches(cursor):  # first the rest of the round on screen
            here = self.matches(cursor)
            if node in here:
                i = here.index(node)
                rest = here[i + 1:] if forward else here[:i][::-1]
            else:  # the selection is no match: order by row
                rows = [row.node.id for row in layout(self._tree(cursor), "full", self.min_reach).rows]
                at = rows.index(node) if node in rows else -1
                rest = tuple(m for m in (here if forward else here[::-1])
                             if (rows.index(m) > at if forward else rows.index(m) < at))
            if rest:
                return cursor, rest[0], False
        for n in range(1, total + 1):
            i = start + n if forward else start - n
            c = self.state.timeline_cursor(i % total)
            assert c is not None
            found = self.matches(c)
            if found:
                return c, (found[0] if forward else found[-1]), not (0 <= i < total)
        return None

    def _tree(self, cursor: Cursor) -> RoundTree:
        return self.state.sessions[cursor[0]].rounds[cursor[1]].tree
