"""The events a session reports, as `presto_tui.stream` yields them and a trace holds them.

Each is a frozen dataclass; a session's events come in this order: `SessionStart`, then its
work (an MH chain's `BlockStart`, `ModelCall`, `RoundDone` and `Transition` per transition; a
one-shot method's `Sample`s and its `Choice`; a method's own events, subclasses of `MethodEvent`,
declared in its module), then `SessionEnd` (done or cancelled) or `SessionError`.  `EngineCost`,
`EngineSteps`, `RequestEvent` and `DecisionWalked` carry the timing the critical path reads, and a
population's `BarrierMet` its phases between barriers.
`InFlight` and `LiveTree` are for a person watching (`stream(..., transient=True)`) and are never
written to a trace.  docs/trace-format.md gives every field.
"""

from __future__ import annotations

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
    MethodEvent,
    ModelCall,
    RequestEvent,
    RoundDone,
    Sample,
    SessionEnd,
    SessionError,
    SessionStart,
    Transition,
)

__all__ = ["TRANSIENT", "BarrierMet", "BlockStart", "Choice", "DecisionWalked", "EngineCost", "EngineSteps", "Event",
           "InFlight", "LiveTree", "MethodEvent", "ModelCall", "RequestEvent", "RoundDone", "Sample", "SessionEnd",
           "SessionError", "SessionStart", "Transition"]
