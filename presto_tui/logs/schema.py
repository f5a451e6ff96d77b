"""The versioned JSONL trace format: runtime events <-> plain JSON objects, and its one gate.

A trace is a header line followed by one line per event.  Every line is a JSON
object whose first key is "type".  Token text travels in "vocab" lines (token
id -> piece), written before the first line that uses those ids, so replay
needs neither model nor tokenizer.  Every number a view or statistic needs
(each node's terms, A, the uniform, the class) is stored with its score.

Schema 1.4 (read: 1.0 to 1.4) adds `member` lines: a population's member's own events (its rounds or
epochs, transitions, requests, blocks, start and end: `MemberEvent`), each an event line of a session
inside, so that a replica's or a particle's chain replays as a session of its own.  Nothing else
changed; a 1.3 reader refuses a trace with them (an unknown line type).

Schema 1.3 adds `sps_step`, a step of Scalable Power Sampling (its
candidate chunks, their log p0, the rollouts' log weights, zeta and the estimates, and the
chunk drawn), with one change of meaning: a `transition`'s, a `sample`'s and a `choice`'s
log-likelihood and confidence (eqs. 21-22) are those of the response a person gets, up to and
excluding its first EOS, for every method (NaN, written "nan", for an empty response); 1.2
scored an MH state over all its T tokens and a baseline's sample with its EOS.
It also adds what the critical path (runtime/session/critpath.py) needs: `steps` lines (when
each engine step began and ended and how many requests were live), the engine times at which a
model call's requests were submitted and at which it finished (`start`, `clock`), when a block's
decisions could first be requested (`block_start`'s `open`), how long an issued streaming request
had waited refused by the policy, by why (`request`'s `waited`), and the call purpose
`extend-overlap` (a block's extension decoded while its first proposals already decode). A population
writes a `barrier` line per phase (when each member arrived at the barrier that ended it, and each
member's path through it by cause: `BarrierMet`).  A trace
without them reads as before; only the critical path is then not shown.

Schema 1.2 numbers tree nodes compactly: a table row names its
parent and which child it is, and a level tree's walked path is nodes 0..n, so ids
stay small however deep a tree grows (1.0 and 1.1 wrote ids as 2i+1 / 2i+2, which
grow as 2^depth; reading converts them).  It also adds the epoch stop reason
`length` (an epoch cut after a long run of rejects), the streaming rule's
`engine_cost` (the engine's learned step cost, before a session's end),
`transition` (an MH chain's log-target, log-likelihood, confidence and
distance from its block's start after each transition: MCMC diagnostics),
`chain`, `chains` and `group` on a `session_start` of `--chains M`, the
baselines' `sample`, `smc_step` and `choice` (appendix E.8),
`extend-ahead` calls and `request` purposes (the next block's extension
decoded while a block still runs), `gap` lines (an event
the writer could not encode, in place of that event; readers warn and go on),
and a round tree's optional `per_token` values: log q_tau and log p0 of every
token of its root state and of every request's proposal, rounded to 4
decimals, from which the per-token view splits a node's terms (a tree without
them reads as before, its per-token values NaN).

Schema 1.1 added the streaming rule's `request` and
`walked` events, a session id on every event line ("sid": sessions of many
chains interleave), the round's engine `clock`, the tree statuses `live` and
`aborted`, the stop reason `accepted`, and each request's `parent` state and
`done` tokens.

Decoding is the single gate every consumer stands behind (stats, replay,
fit-classifier, the app): it checks types, ranges and the structure the views
walk (a round tree has its root, node depths match their ids, a walk follows
the tree, every accepted step has its proposal), so that whatever it accepts
they can all show.  `SchemaError` names the field; the reader adds file and line.
Nothing in a trace is ever evaluated.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from presto_tui.errors import InputError
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.fields import MAX_TOKEN_ID, SchemaError
from presto_tui.runtime.core.fields import (
    check as _check,
)
from presto_tui.runtime.core.fields import (
    get as _get,
)
from presto_tui.runtime.core.fields import (
    read_bool as _bool,
)
from presto_tui.runtime.core.fields import (
    read_choice as _choice,
)
from presto_tui.runtime.core.fields import (
    read_finite as _finite,
)
from presto_tui.runtime.core.fields import (
    read_float as _float,
)
from presto_tui.runtime.core.fields import (
    read_int as _int,
)
from presto_tui.runtime.core.fields import (
    read_list as _list,
)
from presto_tui.runtime.core.fields import (
    read_opt_int as _opt_int,
)
from presto_tui.runtime.core.fields import (
    read_row as _row,
)
from presto_tui.runtime.core.fields import (
    read_str as _str,
)
from presto_tui.runtime.core.fields import (
    read_tokens as _tokens,
)
from presto_tui.runtime.core.fields import (
    write_num as _num,
)
from presto_tui.runtime.core.mh import EPS_CLASSES, Score
from presto_tui.runtime.core.names import InputMode, PrefetchRule
from presto_tui.runtime.core.params import params_from
from presto_tui.runtime.core.spec import Target, param_table
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.tree import (
    ROOT,
    DecisionRec,
    LevelTree,
    NodeRec,
    NodeStatus,
    RequestRec,
    RoundTree,
    Step,
    TableTree,
)
from presto_tui.runtime.session.critpath import CAUSES
from presto_tui.runtime.session.events import (
    BarrierMet,
    BlockStart,
    Choice,
    DecisionWalked,
    EngineCost,
    EngineSteps,
    Event,
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

SCHEMA_VERSION = "1.4"  # major.minor: a reader refuses another major version
MAGIC = "presto-tui-trace"

REQUEST_KINDS = tuple(RequestKind)  # a request line's kind
STATUSES = tuple(NodeStatus)  # the values a table row's status may take (the enum's values are what traces hold)
STOP_REASONS = (NodeStatus.LEAF, NodeStatus.DEFERRED, "cap", "accepted", "length")
def params_of(d: Any, where: str = "params") -> dict:
    """A session's sampler parameters, read on the parameter spec's one reading path (`params_from`:
    each value by `Param.read`, then `SamplerParams.validate`), so a value of the wrong type or out
    of range is refused here, naming it as `params.steps`, and every consumer gets typed values."""
    _check(isinstance(d, dict), where, "should be an object")
    table = param_table()
    known = {k: v for k, v in d.items() if k in table and table[k].target is Target.SAMPLER}
    known.setdefault("budget_policy", "fill")  # before schema 1.2 the streaming rule kept N live
    sampler = known.get("sampler")
    if isinstance(sampler, str) and registry.installed(sampler) is None:
        # a method not installed here (a plugin's): its sessions read with a stand-in, as far as the generic
        # records go (the reader says once what was skipped and what to install)
        if not registry.NAME.match(sampler):
            raise SchemaError(f"{where}.sampler: {sampler[:40]!r} is no method's name")
        registry.stand_in(sampler)
    try:
        return params_from(known, naming=lambda name: f"{where}.{name}").to_dict()
    except InputError as e:
        raise SchemaError(str(e)) from None


def _info(d: Any, where: str) -> dict:
    """Engine details: a flat object of short scalars (eos_id an id or null)."""
    if d is None:
        return {}
    _check(isinstance(d, dict), where, "should be an object")
    out = {}
    for k, v in d.items():
        _check(isinstance(v, (str, int, float, bool)) or v is None, f"{where}.{k[:40]}", "should be a scalar")
        if isinstance(v, str):
            _str(v, f"{where}.{k[:40]}", 1000)
        out[_str(k, where, 100)] = v
    if "eos_id" in out:
        _opt_int(out["eos_id"], f"{where}.eos_id", 0, MAX_TOKEN_ID)
    return out


# -- header -------------------------------------------------------------------

def header(tool_version: str, command: str, backend: str, model: str, params: dict,
           engine: dict | None = None, created: float = 0.0) -> dict:
    return {"type": "header", "format": MAGIC, "schema": SCHEMA_VERSION,
            "tool_version": tool_version, "command": command, "created": created,
            "backend": backend, "model": model, "params": params, "engine": engine or {}}


def check_header(d: Any) -> dict:
    if not isinstance(d, dict) or d.get("type") != "header" or d.get("format") != MAGIC:
        raise SchemaError("not a presto-tui trace (first line is not its header)")
    version = _str(_get(d, "schema"), "schema", 20)
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise SchemaError(f"trace schema {version} is not readable by this presto-tui "
                          f"(reads schema {SCHEMA_VERSION}); use a matching presto-tui version")
    for key in ("tool_version", "backend", "model"):
        _str(_get(d, key), key, 1000)
    params_of(_get(d, "params"))
    return d


def vocab_of(d: dict) -> dict[int, str]:
    pieces = d.get("pieces")
    if not isinstance(pieces, dict):
        raise SchemaError("field 'pieces' should be an object")
    out = {}
    for k, v in pieces.items():
        # ASCII digits only: int() also takes "²" and other Unicode digits
        ok = isinstance(k, str) and 0 < len(k) <= 10 and k.isascii() and k.isdigit() and isinstance(v, str)
        _check(ok and len(v) <= 1000 and int(k) <= MAX_TOKEN_ID, f"pieces.{str(k)[:20]}",
               "should map a token id to its text (at most 1000 characters)")
        out[int(k)] = v
    return out


def gap_of(d: dict) -> str:
    """What a `gap` line says was lost (an event the writer could not encode, schema 1.2)."""
    event = _str(d.get("event", "an"), "event", 100)
    reason = _str(d.get("reason", ""), "reason", 1000)
    return f"a {event} event could not be recorded and is missing ({reason})"


# -- events -------------------------------------------------------------------

def encode(ev: Event) -> dict:
    if isinstance(ev, SessionStart):
        return {"type": "session_start", "session_id": ev.session_id, "tool_version": ev.tool_version,
                "backend": ev.backend, "model": ev.model, "params": ev.params, "prompt": ev.prompt,
                "prompt_ids": list(ev.prompt_ids), "started_at": ev.started_at,
                "backend_info": ev.backend_info,
                **({"chain": ev.chain, "chains": ev.chains, "group": ev.group} if ev.chains > 1 else {})}
    if isinstance(ev, Sample):
        return {"type": "sample", "index": ev.index, "tokens": list(ev.tokens), "logq": _num(ev.logq),
                "logp": _num(ev.logp), "loglik": _num(ev.loglik), "confidence": _num(ev.confidence),
                "clock": ev.clock}
    if isinstance(ev, MethodEvent):  # a method's own event: its module says how it is written
        et = registry.event_type_of(ev)
        if et is None:
            raise TypeError(f"not a recorded event: {type(ev).__name__} (no registered method declares it)")
        return {"type": et.type, **et.encode(ev)}
    if isinstance(ev, Choice):
        return {"type": "choice", "index": ev.index, "rule": ev.rule, "scores": [_num(x) for x in ev.scores],
                "loglik": _num(ev.loglik), "confidence": _num(ev.confidence)}
    if isinstance(ev, Transition):
        return {"type": "transition", "block": ev.block, "k": ev.k, "accepted": ev.accepted,
                "log_target": _num(ev.log_target), "loglik": _num(ev.loglik), "confidence": _num(ev.confidence),
                "first_diff": ev.first_diff}
    if isinstance(ev, ModelCall):
        return {"type": "model_call", "block": ev.block, "round": ev.round, "purpose": ev.purpose,
                "requests": ev.requests, "tokens": ev.tokens, "wall_s": ev.wall_s,
                **_present(start=ev.start, clock=ev.clock)}
    if isinstance(ev, BlockStart):
        return {"type": "block_start", "block": ev.block, "L": ev.L, "T": ev.T, "tokens": list(ev.tokens),
                **_present(open=ev.open)}
    if isinstance(ev, EngineSteps):
        return {"type": "steps", "start": list(ev.start), "end": list(ev.end), "live": list(ev.live)}
    if isinstance(ev, RoundDone):
        return {"type": "round", "block": ev.block, "round": ev.round, "k_before": ev.k_before,
                "k_after": ev.k_after, "steps": ev.steps, "call_wall_s": ev.call_wall_s, "clock": ev.clock,
                "tree": encode_tree(ev.tree, ev.sampler_s)}
    if isinstance(ev, RequestEvent):
        return {"type": "request", "kind": ev.kind, "block": ev.block, "request": ev.request,
                "decision": ev.decision, "cut": ev.cut, "size": ev.size, "tokens": ev.tokens,
                "clock": ev.clock, "live": ev.live, **({"purpose": ev.purpose} if ev.purpose != "propose" else {}),
                **({"waited": ev.waited} if ev.waited else {})}
    if isinstance(ev, EngineCost):
        return {"type": "engine_cost", "a": ev.a, "b": ev.b, "steps": ev.steps, "best_n": ev.best_n,
                "best_rate": ev.best_rate}
    if isinstance(ev, DecisionWalked):
        return {"type": "walked", "block": ev.block, "k": ev.k, "cut": ev.cut, "request": ev.request,
                "accepted": ev.accepted, "accept_prob": ev.accept_prob, "eps_class": ev.eps_class,
                "clock": ev.clock}
    if isinstance(ev, BarrierMet):
        return {"type": "barrier", "step": ev.step, "block": ev.block, "k": ev.k, "final": ev.final,
                "start": ev.start, "end": ev.end, "arrived": list(ev.arrived),
                **({"paths": [dict(p) for p in ev.paths], "tokens": list(ev.tokens)} if ev.paths is not None
                   else {})}
    if isinstance(ev, MemberEvent):
        return {"type": "member", "member": ev.member, "event": encode(ev.event)}
    if isinstance(ev, SessionEnd):
        return {"type": "session_end", "reason": ev.reason, "tokens": list(ev.tokens), "text": ev.text}
    if isinstance(ev, SessionError):
        return {"type": "error", "message": ev.message, "kind": ev.kind}
    raise TypeError(f"not a recorded event: {type(ev).__name__}")


def _present(**fields: Any) -> dict:
    """The fields that hold a value (schema 1.3's optional clocks are left out where unknown)."""
    return {k: v for k, v in fields.items() if v is not None}


def _opt_time(d: dict, key: str) -> float | None:
    v = d.get(key)
    return None if v is None else _finite(v, key, 0.0)


WAIT_REASONS = ("budget", "ranked")
CALL_PURPOSES = ("extend", "propose", "extend-ahead", "extend-overlap")


def _waited(v: Any) -> dict:
    _check(isinstance(v, dict), "waited", "should map reasons to seconds")
    return {_choice(k, "waited", WAIT_REASONS): _finite(x, f"waited.{k}", 0.0) for k, x in v.items()}


def _steps(d: dict) -> EngineSteps:
    start = tuple(_finite(x, "start", 0.0) for x in _list(_get(d, "start"), "start"))
    end = tuple(_finite(x, "end", 0.0) for x in _list(_get(d, "end"), "end"))
    live = tuple(_int(n, "live") for n in _list(_get(d, "live"), "live"))
    _check(len(start) == len(end) == len(live), "end", "should hold one time per step, as start and live do")
    _check(all(a <= b for a, b in zip(start, end)), "end", "should not come before its step's start")
    return EngineSteps(start, end, live)


def _barrier(d: dict) -> BarrierMet:
    start, end = _finite(_get(d, "start"), "start", 0.0), _finite(_get(d, "end"), "end", 0.0)
    _check(start <= end, "end", "should not come before the phase's start")
    arrived = tuple(_finite(x, "arrived", start) for x in _list(_get(d, "arrived"), "arrived"))
    _check(all(a <= end for a in arrived), "arrived", "should not come after the phase's end")
    paths: tuple[dict[str, float], ...] | None = None
    tokens: tuple[int, ...] = tuple(0 for _ in arrived)
    if "paths" in d:
        raw = _list(d["paths"], "paths")
        _check(all(isinstance(p, dict) for p in raw) and len(raw) == len(arrived), "paths",
               "should hold one object of seconds by cause per member")
        paths = tuple({_choice(c, "paths", CAUSES): _finite(v, f"paths.{c[:20]}") for c, v in p.items()} for p in raw)
        tokens = tuple(_int(n, "tokens") for n in _list(_get(d, "tokens"), "tokens"))
        _check(len(tokens) == len(arrived), "tokens", "should hold one count per member")
    return BarrierMet(_int(_get(d, "step"), "step", 1), _int(_get(d, "block"), "block"), _int(_get(d, "k"), "k"),
                      _bool(_get(d, "final"), "final"), start, end, arrived, paths, tokens)


MEMBER_EVENTS = ("session_start", "block_start", "model_call", "round", "transition", "request", "walked",
                 "session_end", "error")  # what a population's member records (`MemberEvent`)


def _member(d: dict) -> MemberEvent:
    """A `member` line: a member's own event, read by the same gate as a session's (the field it names is
    the inner event's, as `event.<field>`)."""
    inner = _get(d, "event")
    _check(isinstance(inner, dict), "event", "should be an object")
    _choice(_get(inner, "type", "event."), "event.type", MEMBER_EVENTS)
    try:
        ev = decode(inner)
    except SchemaError as e:
        raise SchemaError(str(e).replace("field '", "field 'event.", 1)) from None
    return MemberEvent(_int(_get(d, "member"), "member", 0, 1 << 16), ev)


def _chain_of(d: dict) -> tuple[int, int, str]:
    """(chain, chains, group) of a session_start: one of `--chains M` (schema 1.2), or 0, 1, ""."""
    chains = _int(d.get("chains", 1), "chains", 1, 1 << 16)
    chain = _int(d.get("chain", 0), "chain", 0, chains - 1)
    return chain, chains, _str(d.get("group", ""), "group", 100)


def decode(d: Any) -> Event:
    if not isinstance(d, dict):
        raise SchemaError(f"line is not a JSON object but {type(d).__name__}")
    kind = _str(_get(d, "type"), "type", 40)
    g = lambda key: _get(d, key)
    if kind == "session_start":
        return SessionStart(_str(g("session_id"), "session_id", 100), _str(g("tool_version"), "tool_version", 100),
                            _str(g("backend"), "backend", 100), _str(g("model"), "model", 1000),
                            params_of(g("params")), _str(g("prompt"), "prompt"),
                            _tokens(g("prompt_ids"), "prompt_ids"), _finite(g("started_at"), "started_at"),
                            _info(d.get("backend_info"), "backend_info"), *_chain_of(d))
    if kind == "sample":
        return Sample(_int(g("index"), "index"), _tokens(g("tokens"), "tokens"), _float(g("logq"), "logq"),
                      _float(g("logp"), "logp"), _float(g("loglik"), "loglik"), _float(g("confidence"), "confidence"),
                      _finite(g("clock"), "clock", 0.0))
    if kind == "choice":
        scores = tuple(_float(x, "scores") for x in _list(g("scores"), "scores"))
        return Choice(_int(g("index"), "index", 0, max(0, len(scores) - 1)), _str(g("rule"), "rule", 200), scores,
                      _float(g("loglik"), "loglik"), _float(g("confidence"), "confidence"))
    if kind == "transition":
        return Transition(_int(g("block"), "block"), _int(g("k"), "k"), _bool(g("accepted"), "accepted"),
                          _float(g("log_target"), "log_target"), _float(g("loglik"), "loglik"),
                          _float(g("confidence"), "confidence"), _int(g("first_diff"), "first_diff"))
    if kind == "model_call":
        return ModelCall(_int(g("block"), "block"), _int(g("round"), "round", -1),
                         _choice(g("purpose"), "purpose", CALL_PURPOSES),
                         _int(g("requests"), "requests"),
                         _int(g("tokens"), "tokens"), _finite(g("wall_s"), "wall_s", 0.0),
                         _opt_time(d, "start"), _opt_time(d, "clock"))
    if kind == "block_start":
        L, T = _int(g("L"), "L"), _int(g("T"), "T", 1)
        tokens = _tokens(g("tokens"), "tokens")
        _check(len(tokens) == T - L, "tokens", "should hold T - L token ids")
        return BlockStart(_int(g("block"), "block"), L, T, tokens, _opt_time(d, "open"))
    if kind == "steps":
        return _steps(d)
    if kind == "round":
        tree_d = g("tree")
        _check(isinstance(tree_d, dict), "tree", "should be an object")
        phase = tree_d.get("phase_s") or {}
        _check(isinstance(phase, dict), "tree.phase_s", "should map phases to seconds")
        sampler_s = {_str(k, "tree.phase_s", 40): _finite(v, f"tree.phase_s.{k[:20]}", 0.0) for k, v in phase.items()}
        k_before, k_after = _int(g("k_before"), "k_before"), _int(g("k_after"), "k_after")
        tree = decode_tree(tree_d)
        _check(k_after - k_before == tree.transitions and tree.k0 == k_before, "k_after",
               "does not match the round's walk")
        clock = d.get("clock")
        return RoundDone(_int(g("block"), "block"), _int(g("round"), "round"), k_before, k_after,
                         _int(g("steps"), "steps", 1), tree, _finite(g("call_wall_s"), "call_wall_s", 0.0),
                         sampler_s, None if clock is None else _finite(clock, "clock", 0.0))
    if kind == "request":
        return RequestEvent(RequestKind(_choice(g("kind"), "kind", REQUEST_KINDS)), _int(g("block"), "block"),
                            _int(g("request"), "request"), _int(g("decision"), "decision"), _int(g("cut"), "cut"),
                            _int(g("size"), "size", 1), _int(g("tokens"), "tokens"), _finite(g("clock"), "clock", 0.0),
                            _int(g("live"), "live"),
                            _choice(d.get("purpose", "propose"), "purpose", ("propose", "extend")),
                            _waited(d.get("waited", {})))
    if kind == "engine_cost":
        return EngineCost(_finite(g("a"), "a", 0.0), _finite(g("b"), "b", 0.0), _int(g("steps"), "steps"),
                          _int(g("best_n"), "best_n", 1), _finite(g("best_rate"), "best_rate", 0.0))
    if kind == "walked":
        return DecisionWalked(_int(g("block"), "block"), _int(g("k"), "k"), _int(g("cut"), "cut"),
                              _int(g("request"), "request"), _bool(g("accepted"), "accepted"),
                              _finite(g("accept_prob"), "accept_prob", 0.0, 1.0),
                              _choice(g("eps_class"), "eps_class", EPS_CLASSES), _finite(g("clock"), "clock", 0.0))
    if kind == "barrier":
        return _barrier(d)
    if kind == "member":
        return _member(d)
    if kind == "session_end":
        return SessionEnd(_choice(g("reason"), "reason", ("done", "cancelled")), _tokens(g("tokens"), "tokens"),
                          _str(g("text"), "text"))
    if kind == "error":
        return SessionError(_str(g("message"), "message", 10_000), _str(g("kind"), "kind", 40))
    et = registry.event_type(kind)  # a method's own event: its module reads it
    if et is not None:
        return et.decode(d)
    raise UnknownEvent(kind)


class UnknownEvent(SchemaError):
    """A line whose type no installed method declares (a method's own record, where its method is not
    installed here, is skipped by the reader)."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"unknown event type {kind[:40]!r}")
        self.kind = kind


# -- round trees --------------------------------------------------------------

def encode_tree(t: RoundTree, phase_s: dict | None = None) -> dict:
    return {
        "rule": t.rule, "inputs": t.inputs, "T": t.T, "k0": t.k0, "depth_cap": t.depth_cap,
        "levels": isinstance(t, LevelTree), "quirk": isinstance(t, LevelTree) and t.quirk,
        "prompt": list(t.root.prompt), "root": list(t.root.tokens),
        "decisions": [[d.index, d.depth, d.cut, d.cut_u, d.seed, d.accept_u, d.request, d.h_pred, d.node,
                       list(d.candidates)] for d in t.decisions],
        "requests": [[r.decision, r.cut, r.seed, list(r.proposal.tokens), r.tau]
                     + ([r.parent, r.done] if (r.parent, r.done) != (ROOT, None) else []) for r in t.requests],
        "scores": [[pos, src, _num(s.log_q_x), _num(s.log_q_y), _num(s.log_p_x), _num(s.log_p_y),
                    _num(s.log_target), _num(s.log_proposal), _num(s.log_ratio), s.accept_prob, s.eps_class,
                    _num(s.log_cut_x), _num(s.log_cut_y), [[c[0], _num(c[1]), c[2]] for c in s.candidates],
                    s.selected]
                   for (pos, src), s in t.scores.items()],
        "table": [[v, r.depth, r.status, r.src, r.decision, r.parent, r.accept] for v, r in t.table.items()]
        if isinstance(t, TableTree) else [],
        "steps": [[s.node, s.decision, s.src, s.accepted] for s in t.steps],
        "stop_node": t.stop_node, "stop_reason": t.stop_reason, "phase_s": phase_s or {},
        **({"per_token": per_token} if (per_token := _encode_per_token(t)) is not None else {}),
    }


PER_TOKEN_DECIMALS = 4  # keeps traces small: a sum of n such values is within n * 5e-5 of the exact term


def _rounded(values: tuple[float, ...]) -> list[float | str]:
    return [round(x, PER_TOKEN_DECIMALS) if math.isfinite(x) else _num(x) for x in values]


def _encode_per_token(t: RoundTree) -> dict | None:
    """log q_tau and log p0 of every token of the root state and of every request's proposal
    (schema 1.2); None for a tree that has none (one read from a trace that did not record them)."""
    root = t.root
    if not (len(root.logq) == len(root.logp) == root.T) or any(math.isnan(x) for x in root.logp):
        return None
    return {"root": [_rounded(root.logq), _rounded(root.logp)],
            "requests": [[_rounded(r.proposal.logq), _rounded(r.proposal.logp)] for r in t.requests]}


def _values(v: Any, where: str, n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """[log q values, log p0 values], n of each."""
    pair = _row(v, where, (2,))
    out = []
    for j, name in enumerate(("logq", "logp")):
        xs = _list(pair[j], f"{where}.{name}")
        _check(len(xs) == n, f"{where}.{name}", f"should hold {n} values, one per token")
        out.append(tuple(_float(x, f"{where}.{name}") for x in xs))
    return out[0], out[1]


def _decode_per_token(d: dict, root: SeqState, requests: list[RequestRec]) -> tuple[SeqState, list[RequestRec]]:
    """The root and requests with their recorded per-token values, where the tree holds them."""
    if d.get("per_token") is None:
        return root, requests
    w = "tree.per_token"
    pt = d["per_token"]
    _check(isinstance(pt, dict), w, "should be an object")
    logq, logp = _values(_get(pt, "root", f"{w}."), f"{w}.root", root.T)
    root = SeqState(root.prompt, root.tokens, logq, logp, root.entropy)
    rows = _list(_get(pt, "requests", f"{w}."), f"{w}.requests")
    _check(len(rows) == len(requests), f"{w}.requests", "should hold one entry per request")
    out = []
    for i, (row, r) in enumerate(zip(rows, requests)):
        q, p = _values(row, f"{w}.requests[{i}]", len(r.proposal.tokens))
        out.append(replace(r, proposal=Proposal(r.proposal.tokens, q, p, r.proposal.entropy)))
    return root, out


def decode_tree(d: dict) -> RoundTree:
    w = "tree."
    g = lambda key: _get(d, key, w)
    T = _int(g("T"), "tree.T", 1, 1 << 20)
    prompt = _tokens(g("prompt"), "tree.prompt")
    root_tokens = _tokens(g("root"), "tree.root")
    _check(len(root_tokens) == T, "tree.root", f"should hold T={T} tokens")
    k0 = _int(g("k0"), "tree.k0")
    levels = _bool(g("levels"), "tree.levels")
    decisions: list[DecisionRec] = []
    for i, r in enumerate(_list(g("decisions"), "tree.decisions")):
        at = f"tree.decisions[{i}]"
        r = _row(r, at, (10,))
        decisions.append(DecisionRec(
            _int(r[0], f"{at}[0]"), _int(r[1], f"{at}[1]", 0, 1 << 20), _int(r[2], f"{at}[2]", 0, T - 1),
            _finite(r[3], f"{at}[3]", 0.0, 1.0), _int(r[4], f"{at}[4]", 0, 2**63), _finite(r[5], f"{at}[5]", 0.0, 1.0),
            _opt_int(r[6], f"{at}[6]"), None if r[7] is None else _finite(r[7], f"{at}[7]", 0.0, 1.0),
            _opt_int(r[8], f"{at}[8]", 0, 2**62), tuple(_int(c, f"{at}[9]") for c in _list(r[9], f"{at}[9]"))))
    requests: list[RequestRec] = []
    for i, r in enumerate(_list(g("requests"), "tree.requests")):
        at = f"tree.requests[{i}]"
        r = _row(r, at, (5, 7))
        pos = _int(r[0], f"{at}[0]", 0, len(decisions) - 1)
        cut = _int(r[1], f"{at}[1]", 0, T - 1)
        tokens = _tokens(r[3], f"{at}[3]")
        parent, done = (_int(r[5], f"{at}[5]", ROOT, i - 1), _opt_int(r[6], f"{at}[6]", 0, T - cut)) \
            if len(r) == 7 else (ROOT, None)
        _check(len(tokens) == (T - cut if done is None else 0), f"{at}[3]",
               "should hold T - cut token ids (none for a request that did not finish)")
        requests.append(RequestRec(pos, cut, _int(r[2], f"{at}[2]", 0, 2**63), Proposal.tokens_only(tokens),
                                   _finite(r[4], f"{at}[4]", 1e-6, 1e6), parent, done))
    n_req = len(requests)
    for i, dec in enumerate(decisions):
        _check(dec.request is None or dec.request < n_req, f"tree.decisions[{i}][6]", "is not a request index")
        _check(all(c < n_req for c in dec.candidates), f"tree.decisions[{i}][9]",
               "holds a candidate that is not a request index")
    scores: dict[tuple[int, int], Score] = {}
    for i, r in enumerate(_list(g("scores"), "tree.scores")):
        at = f"tree.scores[{i}]"
        r = _row(r, at, (15,))
        key = (_int(r[0], f"{at}[0]", 0, len(decisions) - 1), _int(r[1], f"{at}[1]", ROOT, n_req - 1))
        cands = tuple((_finite(_row(c, f"{at}[13]", (3,))[0], f"{at}[13]", 0.0), _float(c[1], f"{at}[13]"),
                       _finite(c[2], f"{at}[13]", 0.0, 1.0)) for c in _list(r[13], f"{at}[13]"))
        nums = [_float(r[j], f"{at}[{j}]") for j in range(2, 9)]
        scores[key] = Score(
            log_q_x=nums[0], log_q_y=nums[1], log_p_x=nums[2], log_p_y=nums[3], log_target=nums[4],
            log_proposal=nums[5], log_ratio=nums[6], accept_prob=_finite(r[9], f"{at}[9]", 0.0, 1.0),
            eps_class=_choice(r[10], f"{at}[10]", EPS_CLASSES), log_cut_x=_float(r[11], f"{at}[11]"),
            log_cut_y=_float(r[12], f"{at}[12]"), candidates=cands, selected=_int(r[14], f"{at}[14]", -1, 1 << 20))
    table: dict[int, NodeRec] = {}
    for i, r in enumerate(_list(g("table"), "tree.table")):
        at = f"tree.table[{i}]"
        r = _row(r, at, (5, 7))
        if len(r) == 7:  # schema 1.2: compact ids, each row names its parent
            v = _int(r[0], f"{at}[0]")
            parent, accept = _int(r[5], f"{at}[5]", -1), _bool(r[6], f"{at}[6]")
        else:  # 1.0 and 1.1: heap ids (children of i at 2i+1 and 2i+2)
            v = _int(r[0], f"{at}[0]", 0, 2**62)
            parent, accept = (v - 1) // 2, v % 2 == 1
        _check(v not in table, f"{at}[0]", "repeats a node id")
        rec = NodeRec(_int(r[1], f"{at}[1]", 0, 1 << 20), NodeStatus(_choice(r[2], f"{at}[2]", STATUSES)),
                      _int(r[3], f"{at}[3]", ROOT, n_req - 1),
                      None if r[4] is None else _int(r[4], f"{at}[4]", 0, len(decisions) - 1), parent, accept)
        _check(rec.status == NodeStatus.LEAF or rec.decision is not None, f"{at}[4]", "is missing the node's decision")
        table[v] = rec
    steps = []
    for i, r in enumerate(_list(g("steps"), "tree.steps")):
        at = f"tree.steps[{i}]"
        r = _row(r, at, (4,))
        steps.append(Step(_int(r[0], f"{at}[0]", 0, 2**62), _int(r[1], f"{at}[1]", 0, len(decisions) - 1),
                          _int(r[2], f"{at}[2]", ROOT, n_req - 1), _bool(r[3], f"{at}[3]")))
    stop_node = _int(g("stop_node"), "tree.stop_node", 0, 2**62)
    if levels:  # a level tree's walked path is nodes 0..n (1.0 and 1.1 wrote heap ids: renumber)
        steps = [Step(i, s.decision, s.src, s.accepted) for i, s in enumerate(steps)]
        stop_node = len(steps)
    root, requests = _decode_per_token(d, SeqState.tokens_only(prompt, root_tokens), requests)
    common: dict[str, Any] = dict(
        rule=_choice(g("rule"), "tree.rule", PrefetchRule.names()),
        inputs=_choice(g("inputs"), "tree.inputs", InputMode.names()),
        T=T, k0=k0, depth_cap=_int(g("depth_cap"), "tree.depth_cap", 0), root=root,
        decisions=tuple(decisions), requests=tuple(requests), scores=scores, steps=tuple(steps),
        stop_node=stop_node,
        stop_reason=_choice(g("stop_reason"), "tree.stop_reason", STOP_REASONS),
    )
    if levels:
        for j, dec in enumerate(decisions):  # the layout reads level j's decision as decisions[j]
            _check(dec.depth == j and dec.request is not None, f"tree.decisions[{j}]",
                   "should be level j's issued decision")
        tree: RoundTree = LevelTree(**common, quirk=_bool(g("quirk"), "tree.quirk"))
    else:
        _check_table(table)
        tree = TableTree(**common, table=table)
    for src in {s.src for s in tree.steps} | {src for _, src in scores} | {r.src for r in table.values()}:
        _check(src == ROOT or requests[src].done is None, "tree", f"holds the state of request {src}, "
               "which did not finish")
    _check_walk(tree)
    return tree


def _check_table(table: dict[int, NodeRec]) -> None:
    """A tree: the root 0 at depth 0, every other node one level below a parent in the table,
    no two nodes in one child's place (so every node is reached from the root by one path)."""
    root = table.get(0)
    _check(root is not None and root.depth == 0, "tree.table", "should hold the root node 0 at depth 0")
    places: set[tuple[int, bool]] = set()
    for v, rec in table.items():
        if v == 0:
            continue
        parent = table.get(rec.parent)
        _check(parent is not None and rec.parent != v, f"tree.table node {v}", "has no parent in the table")
        _check(rec.depth == parent.depth + 1, f"tree.table node {v}",  # type: ignore[union-attr]
               "is not one level below its parent")
        _check((rec.parent, rec.accept) not in places, f"tree.table node {v}", "takes a place another node holds")
        places.add((rec.parent, rec.accept))


def _check_walk(tree: RoundTree) -> None:
    """The walk starts at the root, follows accept/reject children, and every step was scored
    against the state its node holds, with a proposal wherever it accepted."""
    path: tuple[bool, ...] = ()
    for i, s in enumerate(tree.steps):
        at = f"tree.steps[{i}]"
        v = tree.node_at(path)
        _check(v is not None and s.node == v.id, at, "does not follow the walk from the root")
        _check((s.decision, s.src) in tree.scores, at, "refers to a decision that was not scored")
        _check(v is not None and v.pos == s.decision and v.src == s.src, at, "does not match its node")
        if s.accepted:
            _check(tree.decisions[s.decision].request is not None, at, "accepts a decision that has no proposal")
        path += (s.accepted,)
    end = tree.node_at(path)
    _check(end is not None and tree.stop_node == end.id, "tree.stop_node", "is not where the walk ends")
    _check(tree.transitions <= tree.depth_cap, "tree.steps", "walks past the block's transitions")
