"""Token text that travels with events, so that what draws them needs no tokenizer.

The trace writer records `vocab` lines from it and the chat worker sends the
same pieces to the app: live and replayed sessions read token text from one
kind of table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from presto_tui.runtime.core import registry
from presto_tui.runtime.session.events import (
    BlockStart,
    Event,
    MemberEvent,
    MethodEvent,
    RoundDone,
    Sample,
    SessionEnd,
    SessionStart,
)

Pieces = Callable[[Sequence[int]], list[str]]


def event_token_ids(ev: Event) -> list[int]:
    """The token ids an event carries (the text a consumer must be able to show)."""
    if isinstance(ev, SessionStart):
        return list(ev.prompt_ids)
    if isinstance(ev, BlockStart):
        return list(ev.tokens)
    if isinstance(ev, RoundDone):
        ids = list(ev.tree.root.prompt) + list(ev.tree.root.tokens)
        for r in ev.tree.requests:
            ids += r.proposal.tokens
        return ids
    if isinstance(ev, SessionEnd):
        return list(ev.tokens)
    if isinstance(ev, Sample):  # a baseline's samples and particles are shown, not only its answer
        return list(ev.tokens)
    if isinstance(ev, MemberEvent):
        return event_token_ids(ev.event)
    if isinstance(ev, MethodEvent):  # a method's own: its declaration says which tokens it carries
        et = registry.event_type_of(ev)
        return list(et.tokens(ev)) if et is not None else []
    return []


class Vocab:
    """Remembers which token ids have been described; gives the text of new ones."""

    def __init__(self, pieces: Pieces):
        self._pieces = pieces
        self._seen: set[int] = set()

    def new_pieces(self, ev: Event) -> dict[int, str]:
        new = sorted({i for i in event_token_ids(ev) if i not in self._seen})
        self._seen.update(new)
        return dict(zip(new, self._pieces(new))) if new else {}
