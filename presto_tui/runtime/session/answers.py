"""The answer several chains of one prompt agree on (self-consistency's majority vote; pure).

`vote(texts)` groups the chains' final texts by their exact text; `vote(texts,
extract)` by the answer a grader extracts from each (`extract` returns None
where a text holds no answer: that chain votes for nothing, and still counts in
the share's denominator, so a majority of 2 out of 4 chains is 0.5 whether the
other two disagree or said nothing).  Groups come most chains first, ties in
order of their first chain, so the result depends only on the texts and their
order.  `Vote.majority` is the largest group (None when no chain gave an
answer); `tied` says another group is as large.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class AnswerGroup:
    answer: str
    chains: tuple[int, ...]  # the chains that gave it, numbered from 1 (a text's place in the texts)

    @property
    def count(self) -> int:
        return len(self.chains)


@dataclass(frozen=True)
class Vote:
    groups: tuple[AnswerGroup, ...]
    total: int  # chains that voted, with or without an answer
    unanswered: tuple[int, ...] = ()  # chains (from 1) whose text held no answer (extracted votes only)
    by: str = "text"  # "text", or "answer": grouped by an extracted answer

    @property
    def majority(self) -> AnswerGroup | None:
        return self.groups[0] if self.groups else None

    @property
    def share(self) -> float:
        return self.groups[0].count / self.total if self.groups and self.total else 0.0

    @property
    def tied(self) -> bool:
        return len(self.groups) > 1 and self.groups[1].count == self.groups[0].count

    def to_dict(self) -> dict:
        return {"by": self.by, "majority": self.majority.answer if self.majority else None,
                "share": self.share, "tied": self.tied, "total": self.total,
                "groups": [{"answer": g.answer, "chains": list(g.chains), "count": g.count} for g in self.groups],
                "unanswered": list(self.unanswered)}


def vote(texts: Sequence[str], extract: Callable[[str], str | None] | None = None) -> Vote:
    """Group `texts` by exact text, or by `extract(text)` (a grader's answer extraction)."""
    members: dict[str, list[int]] = {}  # insertion order: first appearance
    unanswered = []
    for i, text in enumerate(texts, 1):  # chains are numbered from 1, as everywhere
        key = text if extract is None else extract(text)
        if key is None:
            unanswered.append(i)
        else:
            members.setdefault(key, []).append(i)
    groups = sorted((AnswerGroup(k, tuple(v)) for k, v in members.items()), key=lambda g: (-g.count, g.chains[0]))
    return Vote(tuple(groups), len(texts), tuple(unanswered), "text" if extract is None else "answer")
