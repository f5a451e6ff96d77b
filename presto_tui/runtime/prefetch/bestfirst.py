"""Best-first expansion by reach, written once (paper appendix C: eqs. 17 and 19).

Reach weights only shrink along a path (each child's is its parent's times a
branch probability below 1), so popping the largest reach first visits nodes in
an order whose every prefix is ancestor-closed.  The predictive rule's
allocation, the streaming scheduler's speculation tree and the record of a
streaming epoch all walk a tree this way; they differ only in what a visit does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

Node = TypeVar("Node")
Result = TypeVar("Result")

Visit = Callable[[float, Node], tuple[Result | None, Iterable[tuple[float, Node]]]]


def best_first(root: Node, visit: Visit, reach: float = 1.0) -> Iterator[Result]:
    """Visit nodes by decreasing reach from `root`; `visit(reach, node)` returns (a result or
    None, the node's children as (reach, child) pairs).  Yields the results, each after its
    node's children have joined the queue, so a consumer may stop at any point.  Ties go
    to the node pushed first, so a parent always precedes its children."""
    order = itertools.count()
    heap: list[tuple[float, int, Node]] = [(-reach, next(order), root)]
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        neg, _, node = pop(heap)
        result, children = visit(-neg, node)
        for r, child in children:
            push(heap, (-r, next(order), child))
        if result is not None:
            yield result
