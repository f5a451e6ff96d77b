"""The streaming rule: speculation that never waits for a round (the repository's docs/streaming.md).

With decision-keyed inputs, the request sequential PowerMH makes at decision d
from state x is a function of (d, x's tokens before the cut): its seed, its
temperature and its horizon are fixed by d.  So proposals can be computed at
any time and in any order; the chain stays exact as long as the walker, at
decision k holding state x, uses only the proposal of exactly that request.

Four parts, one job each, composed per block by `StreamBlock`:
- `decisions.Decisions`: a block's random inputs and the request ("want")
  each decision makes from a given state;
- `requests.RequestBook`: the one owner of request state (planned, live,
  finished, aborted), distinct from the tree's node statuses;
- `walker.Walker`: the exact MH walk, decisions strictly in order, each as
  soon as the proposal its own state asks for has finished;
- `policy.SpeculationPolicy`: what to keep live (`SharedPolicy`: what the
  engine's one budget for every chain on it gives this one, `shared.py`;
  `FillPolicy`: the N most likely requests; `CostPolicy`: as many as make the
  chain's own critical path shortest on the engine's learned step cost), over
  the speculation tree of `speculation.py` (with `moves.py`'s learned move
  rates under the shared policy), whose branch models
  (in-proposal speculation, the next block's extension) are objects too; a
  policy reads the block and returns a `Plan`, which the block applies;
- `refusals.Refusals`: how long each want waited refused before it was issued;
- `recorder.EpochRecorder`: what a person sees of it, one tree per epoch.

Nothing here calls the engine: the session's engine loop submits, aborts and
delivers, and these objects only answer what to submit and what to abort.
"""

from __future__ import annotations

from presto_tui.runtime.prefetch.stream.block import Schedule, StreamBlock
from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.policy import (
    BlockView,
    CostPolicy,
    FillPolicy,
    Plan,
    SharedPolicy,
    SpeculationPolicy,
    speculation_policy,
)
from presto_tui.runtime.prefetch.stream.recorder import EPOCH_DECISIONS, EPOCH_NODES, Epoch, EpochRecorder
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook, RequestState
from presto_tui.runtime.prefetch.stream.shared import Load, SharedBudget
from presto_tui.runtime.prefetch.stream.walker import Scorer, Walked, Walker

__all__ = ["EPOCH_DECISIONS", "EPOCH_NODES", "BlockView", "CostPolicy", "Decisions", "Epoch", "EpochRecorder",
           "FillPolicy", "Group", "Load", "Plan", "RequestBook", "RequestState", "Schedule", "Scorer", "SharedBudget",
           "SharedPolicy", "SpeculationPolicy", "StreamBlock", "Walked", "Walker", "Want", "speculation_policy"]
