"""Events on the wire: the trace's own JSON objects, plus the two transient events.

`GET /v1/presto/events` sends every event as the object a trace line holds
(`logs.schema.encode`, with its session's `sid`), so a client decodes it through
the same gate a trace goes through (`logs.schema.decode`).  Token text travels
in `vocab` objects before the first event that uses those ids, as in a trace.
The transient events (the round in flight, the streaming epoch's live tree) are
never recorded, so the schema has no line for them; here they get one for the
wire only, the live tree as a round tree (`encode_tree`), checked on the way in
by the same tree gate (`decode_tree`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from presto_tui.api.events import Event, InFlight, LiveTree, event_token_ids
from presto_tui.logs.schema import SchemaError, decode, decode_tree, encode, encode_tree, vocab_of

IN_FLIGHT, LIVE_TREE, VOCAB = "in_flight", "live_tree", "vocab"
DROPPED = "dropped"  # an event stream's last object when the server dropped it (its `reason` says why)


def encode_event(ev: Event) -> dict:
    """The wire object of any event, recorded or transient."""
    if isinstance(ev, InFlight):
        return {"type": IN_FLIGHT, "requests": ev.requests, "decoded": ev.decoded, "total": ev.total}
    if isinstance(ev, LiveTree):
        return {"type": LIVE_TREE, "block": ev.block, "k_before": ev.k_before, "k_now": ev.k_now,
                "tree": encode_tree(ev.tree)}
    return encode(ev)


@dataclass(frozen=True, slots=True)
class Wired:
    """An event's wire object, encoded once where the event is made (the engine's thread: a round's tree
    of long states takes a while to encode, and the server's asyncio loop must not wait on it), and
    the token ids whose text must go before it."""

    data: bytes  # a JSON object
    ids: tuple[int, ...]


def wired(ev: Event) -> Wired:
    return Wired(orjson.dumps(encode_event(ev)), tuple(event_token_ids(ev)))


def _count(d: dict, key: str) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"field '{key}' should be a whole number >= 0")
    return v


def decode_event(d: Any) -> Event:
    """An event from its wire object, through the trace's gate (SchemaError names what is wrong)."""
    if isinstance(d, dict) and d.get("type") == IN_FLIGHT:
        return InFlight(_count(d, "requests"), _count(d, "decoded"), _count(d, "total"))
    if isinstance(d, dict) and d.get("type") == LIVE_TREE:
        tree = d.get("tree")
        if not isinstance(tree, dict):
            raise SchemaError("field 'tree' should be an object")
        return LiveTree(_count(d, "block"), _count(d, "k_before"), _count(d, "k_now"), decode_tree(tree))
    return decode(d)


def vocab_object(pieces: dict[int, str]) -> dict:
    return {"type": VOCAB, "pieces": {str(i): p for i, p in pieces.items()}}


def decode_vocab(d: dict) -> dict[int, str]:
    return vocab_of(d)
