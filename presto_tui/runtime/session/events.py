"""The typed events a session emits: the only thing traces, the TUI and progress consume."""

from __future__ import annotations

from dataclasses import dataclass, field

from presto_tui.runtime.prefetch.tree import RoundTree


@dataclass(frozen=True)
class SessionStart:
    session_id: str
    tool_version: str
    backend: str
    model: str
    params: dict
    prompt: str
    prompt_ids: tuple[int, ...]
    started_at: float  # unix time
    backend_info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ModelCall:
    block: int
    round: int  # -1 for the call that extends the state by a block
    purpose: str  # "extend" or "propose"
    requests: int
    tokens: int
    wall_s: float


@dataclass(frozen=True)
class BlockStart:
    block: int
    L: int  # generated tokens before the block
    T: int  # after it
    tokens: tuple[int, ...]  # the block's new tokens (the extension, alg. 1 line 2)


@dataclass(frozen=True)
class RoundDone:
    block: int
    round: int
    k_before: int
    k_after: int
    steps: int  # K
    tree: RoundTree
    call_wall_s: float
    sampler_s: dict = field(default_factory=dict)  # the sampler's own time: plan, finish


@dataclass(frozen=True)
class SessionEnd:
    reason: str  # "done" or "cancelled"
    tokens: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class SessionError:
    message: str
    kind: str  # "engine", "input", "internal", ...


Event = SessionStart | ModelCall | BlockStart | RoundDone | SessionEnd | SessionError
