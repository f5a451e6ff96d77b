"""The typed events a session emits, and what they carry.

Every way of spending the model reports what happened only as these events (frozen
dataclasses; `Event` is their union): the trace writer, the app, the server and every
number presto-tui prints are computed from them.  Their JSON form is the trace format
(docs/trace-format.md); `TRANSIENT` ones (the batch in flight, the epoch so far) are for a
person watching and never written to a trace.
"""

from __future__ import annotations

from presto_tui.runtime.core.mh import ACCEPT, EPS_CLASSES, REJECT, UNCERTAIN, Score
from presto_tui.runtime.core.types import Proposal, Request, SeqState, cut_at_eos, cut_at_stop
from presto_tui.runtime.prefetch.tree import NodeView, RoundTree, TableTree
from presto_tui.runtime.session.events import (
    TRANSIENT,
    BlockStart,
    Choice,
    DecisionWalked,
    EngineCost,
    Event,
    InFlight,
    LiveTree,
    ModelCall,
    RequestEvent,
    RoundDone,
    Sample,
    SessionEnd,
    SessionError,
    SessionStart,
    SmcStep,
    Transition,
)
from presto_tui.runtime.session.limit import Limits, limits
from presto_tui.runtime.session.metrics import first_difference
from presto_tui.runtime.session.summary import SessionSummary, is_baseline, summarize
from presto_tui.runtime.session.vocab import Pieces, Vocab, event_token_ids

__all__ = [
    "ACCEPT", "EPS_CLASSES", "REJECT", "TRANSIENT", "UNCERTAIN", "BlockStart", "Choice", "DecisionWalked",
    "EngineCost", "Event", "InFlight", "Limits", "LiveTree", "ModelCall", "NodeView", "Pieces", "Proposal",
    "Request", "RequestEvent", "RoundDone", "RoundTree", "Sample", "Score", "SeqState", "SessionEnd", "SessionError",
    "SessionStart", "SessionSummary", "SmcStep", "TableTree", "Transition", "Vocab", "cut_at_eos", "cut_at_stop",
    "event_token_ids", "first_difference", "is_baseline", "limits", "summarize",
]
