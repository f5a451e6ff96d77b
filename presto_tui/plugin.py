"""What a method author needs: the names a sampling method is built from, in one place.

A method is a `Method` (an MH chain method: a `ChainMethod` with a `family`; a one-shot method: a
`OneShotMethod` with a `driver`) in a module of its own, exported as `METHOD` and registered
through the entry-point group `presto_tui.methods` of its package (see docs/extending.md, and the
example plugin in the repository's `examples/plugin/`).  Its exactness is checked with the law-test
kit, `presto_tui.testing`.

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
from presto_tui.runtime.core.mh import Score, score
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs, pick_uniform, resample_uniform, sample_seed
from presto_tui.runtime.core.registry import Problem, problems, register
from presto_tui.runtime.core.spec import Group, Limit, Naming, Param, ParamError
from presto_tui.runtime.core.types import Proposal, Request, SeqState
from presto_tui.runtime.methods.chain import ChainMethod
from presto_tui.runtime.methods.powermh import PowerMHFamily
from presto_tui.runtime.methods.samples import OneShotInfo, OneShotMethod, SamplesDriver
from presto_tui.runtime.samplers.families import Draw, SamplerFamily
from presto_tui.runtime.session.batch import BatchDriver, draw, ess, normalised, sample_event, systematic
from presto_tui.runtime.session.driver import RoundTag, SessionDriver
from presto_tui.runtime.session.events import Choice, MethodEvent, ModelCall, Sample

__all__ = [
    "Axis", "BatchDriver", "ChainMethod", "Choice", "Cost", "CutLaw", "DecisionInputs", "Draw", "EntropyJumpCut",
    "EventType", "Group", "Limit", "Method", "MethodEvent", "MethodInfo", "MethodKind", "ModelCall", "Naming",
    "OneShotInfo", "OneShotMethod", "Param", "ParamError", "PowerMHFamily", "Problem", "Proposal", "Request",
    "RoundTag", "Sample", "SamplerFamily", "SamplerParams", "SamplesDriver", "SchemaError", "Score", "SeqState",
    "SessionDriver", "UniformCut", "check", "draw", "ess", "get", "normalised", "pick_uniform", "read_bool",
    "problems", "read_finite", "read_float", "read_int", "read_list", "read_str", "read_tokens", "register",
    "resample_uniform", "sample_event", "sample_seed", "score", "systematic", "write_num",
]
