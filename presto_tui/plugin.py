"""What a method author needs: the names a sampling method is built from, in one place.

A method is a `Method` in a module of its own, exported as `METHOD` and registered through the
entry-point group `presto_tui.methods` of its package (see docs/extending.md, and the example
plugins in the repository's `examples/`).  Its exactness is checked with the law-test kit,
`presto_tui.testing`.

- An MH chain method: a `ChainMethod` whose `family(params)` is its decision rule (a `SamplerFamily`;
  `PowerMHFamily` with a `CutLaw` of its own covers most), proposing at `params.proposal_tau` or at
  one of its `score_taus` (`at_temperature`: a state scored at the temperature the family proposes at).
- A one-shot selection method: a `OneShotMethod` with a `count_param` (how many samples) and a
  `select(samples, params, eos_id) -> Selection` (which one is the answer, its rule and one score per
  sample, labelled `score_label`); `best_by` picks the highest score.
- A session of its own: a `SessionDriver` (or `BatchDriver`) whose hooks `begin`, `on_delivered` and
  `advance_session` act through `submit_request`, `emit` and `end`.
- Helpers: `eps_class`, `cut_at_eos`, `samples_cost`, `whole_number`, `Limit.check`, `sample_seed`,
  `decision_inputs`; the trace readers (`read_int`, ...); `problems()`: plugin methods that failed to load.

    from presto_tui.plugin import ChainMethod, CutLaw, PowerMHFamily

These names are versioned with the API (`presto_tui.API_VERSION`); everything else in the
package is internal.
"""

from __future__ import annotations

from presto_tui.runtime.core.cutlaw import CutLaw, EntropyJumpCut, UniformCut
from presto_tui.runtime.core.fields import (
    SchemaError,
    check,
    get,
    read_bool,
    read_finite,
    read_float,
    read_int,
    read_list,
    read_str,
    read_tokens,
    write_num,
)
from presto_tui.runtime.core.method import Axis, Cost, EventType, Method, MethodInfo, MethodKind
from presto_tui.runtime.core.mh import Score, eps_class, score
from presto_tui.runtime.core.paramkit import whole_number
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import (
    DecisionInputs,
    decision_inputs,
    pick_uniform,
    resample_uniform,
    sample_seed,
)
from presto_tui.runtime.core.registry import Problem, problems, register
from presto_tui.runtime.core.spec import Group, Limit, Naming, Param, ParamError
from presto_tui.runtime.core.types import Proposal, Request, SeqState, cut_at_eos
from presto_tui.runtime.methods.chain import ChainMethod
from presto_tui.runtime.methods.powermh import PowerMHFamily, at_temperature
from presto_tui.runtime.methods.samples import (
    OneShotInfo,
    OneShotMethod,
    SamplesDriver,
    Selection,
    best_by,
    samples_cost,
)
from presto_tui.runtime.samplers.families import Draw, SamplerFamily
from presto_tui.runtime.session.batch import BatchDriver, draw, ess, normalised, sample_event, systematic
from presto_tui.runtime.session.driver import RoundTag, SessionDriver
from presto_tui.runtime.session.events import Choice, MethodEvent, ModelCall, Sample

__all__ = [
    "Axis", "BatchDriver", "ChainMethod", "Choice", "Cost", "CutLaw", "DecisionInputs", "Draw", "EntropyJumpCut",
    "EventType", "Group", "Limit", "Method", "MethodEvent", "MethodInfo", "MethodKind", "ModelCall", "Naming",
    "OneShotInfo", "OneShotMethod", "Param", "ParamError", "PowerMHFamily", "Problem", "Proposal", "Request",
    "RoundTag", "Sample", "SamplerFamily", "SamplerParams", "SamplesDriver", "SchemaError", "Score", "Selection",
    "SeqState", "SessionDriver", "UniformCut", "at_temperature", "best_by", "check", "cut_at_eos",
    "decision_inputs", "draw", "eps_class", "ess", "get", "normalised", "pick_uniform", "problems", "read_bool",
    "read_finite", "read_float", "read_int", "read_list", "read_str", "read_tokens", "register",
    "resample_uniform", "sample_event", "sample_seed", "samples_cost", "score", "systematic", "whole_number",
    "write_num",
]
