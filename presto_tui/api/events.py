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
from presto_tui.runtime.prefetch.tree import NodeStatus, NodeView, RoundTree, TableTree
from presto_tui.runtime.samplers.multitry import log_ratio_terms
from presto_tui.runtime.session.batch import normalised
from presto_tui.runtime.session.critpath import CAUSES, SHORT, CriticalPath, Phase, critical_path
from presto_tui.runtime.session.events import (
    TRANSIENT,
    BarrierMet,
    BlockStart,
    Choice,
    DecisionWalked,
    EngineCost,
    EngineSteps,
    Event,
    InFlight,
    LiveTree,
    MemberEvent,
    MethodEvent,
    ModelCall,
    RequestEvent,
    RequestKind,
    RoundDone,
    Sample,
    SessionEnd,
    SessionError,
    SessionStart,
    Transition,
)
from presto_tui.runtime.session.limit import Limits, limits
from presto_tui.runtime.session.metrics import first_difference
from presto_tui.runtime.session.summary import SessionSummary, is_one_shot, summarize
from presto_tui.runtime.session.vocab import Pieces, Vocab, event_token_ids

__all__ = [
    "ACCEPT", "BarrierMet", "BlockStart", "CAUSES", "Choice", "CriticalPath", "DecisionWalked", "EPS_CLASSES",
    "EngineCost", "EngineSteps", "Event", "InFlight", "Limits", "LiveTree", "ModelCall", "NodeStatus", "NodeView",
    "Phase", "Pieces", "Proposal", "REJECT", "Request", "RequestEvent", "RequestKind", "RoundDone", "RoundTree",
    "SHORT", "Sample", "Score", "SeqState", "SessionEnd", "SessionError", "SessionStart", "SessionSummary",
    "MemberEvent", "MethodEvent", "TRANSIENT", "TableTree", "Transition", "UNCERTAIN", "Vocab", "critical_path",
    "cut_at_eos", "cut_at_stop", "event_token_ids", "first_difference", "is_one_shot", "limits", "log_ratio_terms",
    "normalised", "summarize",
]
