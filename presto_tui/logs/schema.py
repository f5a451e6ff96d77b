"""The versioned JSONL trace format: runtime events <-> plain JSON objects.

A trace is a header line followed by one line per event.  Every line is a JSON
object whose first key is "type".  Token text travels in "vocab" lines (token
id -> piece), written before the first line that uses those ids, so replay
needs neither model nor tokenizer.  Per-token log-probabilities are not
recorded: every number a view or statistic needs (each node's terms, A, the
uniform, the class) is stored with its score.

Decoding validates each object and raises `SchemaError` naming the field; the
reader adds file and line.  Nothing in a trace is ever evaluated.
"""

from __future__ import annotations

import math
from typing import Any

from presto_tui.runtime.core.mh import EPS_CLASSES, Score
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.tree import (
    DEFERRED,
    EXPANDED,
    LEAF,
    UNREACHABLE,
    DecisionRec,
    LevelTree,
    NodeRec,
    RequestRec,
    RoundTree,
    Step,
    TableTree,
)
from presto_tui.runtime.session.events import (
    BlockStart,
    Event,
    ModelCall,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
)

SCHEMA_VERSION = "1.0"  # major.minor: a reader refuses another major version
MAGIC = "presto-tui-trace"

STATUSES = (EXPANDED, DEFERRED, LEAF, UNREACHABLE)
STOP_REASONS = (LEAF, DEFERRED, "cap")


class SchemaError(ValueError):
    """An object that does not fit the schema; the message names the field."""


# -- validation helpers -------------------------------------------------------

def _get(d: dict, key: str, kind, where: str = ""):
    if key not in d:
        raise SchemaError(f"missing field '{where}{key}'")
    v = d[key]
    if not _is(v, kind):
        raise SchemaError(f"field '{where}{key}' should be {_name(kind)}, got {type(v).__name__}")
    return v


def _is(v, kind) -> bool:
    if kind is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "int?":
        return v is None or _is(v, int)
    if kind == "float?":
        return v is None or _is(v, float)
    if kind == "ints":
        return isinstance(v, list) and all(_is(x, int) for x in v)
    return isinstance(v, kind)


def _name(kind) -> str:
    return {float: "a number", int: "an integer", str: "a string", bool: "a boolean", list: "a list",
            dict: "an object", "int?": "an integer or null", "float?": "a number or null",
            "ints": "a list of integers"}.get(kind, str(kind))


def _num(x: float) -> float | str:
    """JSON has no infinities; MH ratios can be -inf when a proposal has p0 = 0."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def _unnum(v, where: str) -> float:
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if not _is(v, float):
        raise SchemaError(f"field '{where}' should be a number")
    return float(v)


# -- header -------------------------------------------------------------------

def header(tool_version: str, command: str, backend: str, model: str, params: dict,
           engine: dict | None = None, created: float = 0.0) -> dict:
    return {"type": "header", "format": MAGIC, "schema": SCHEMA_VERSION,
            "tool_version": tool_version, "command": command, "created": created,
            "backend": backend, "model": model, "params": params, "engine": engine or {}}


def check_header(d: dict) -> dict:
    if d.get("type") != "header" or d.get("format") != MAGIC:
        raise SchemaError("not a presto-tui trace (first line is not its header)")
    version = _get(d, "schema", str)
    major = version.split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise SchemaError(f"trace schema {version} is not readable by this presto-tui "
                          f"(reads schema {SCHEMA_VERSION}); use a matching presto-tui version")
    for key, kind in (("tool_version", str), ("backend", str), ("model", str), ("params", dict)):
        _get(d, key, kind)
    return d


# -- events -------------------------------------------------------------------

def encode(ev: Event) -> dict:
    if isinstance(ev, SessionStart):
        return {"type": "session_start", "session_id": ev.session_id, "tool_version": ev.tool_version,
                "backend": ev.backend, "model": ev.model, "params": ev.params, "prompt": ev.prompt,
                "prompt_ids": list(ev.prompt_ids), "started_at": ev.started_at,
                "backend_info": ev.backend_info}
    if isinstance(ev, ModelCall):
        return {"type": "model_call", "block": ev.block, "round": ev.round, "purpose": ev.purpose,
                "requests": ev.requests, "tokens": ev.tokens, "wall_s": ev.wall_s}
    if isinstance(ev, BlockStart):
        return {"type": "block_start", "block": ev.block, "L": ev.L, "T": ev.T, "tokens": list(ev.tokens)}
    if isinstance(ev, RoundDone):
        return {"type": "round", "block": ev.block, "round": ev.round, "k_before": ev.k_before,
                "k_after": ev.k_after, "steps": ev.steps, "call_wall_s": ev.call_wall_s,
                "tree": encode_tree(ev.tree, ev.sampler_s)}
    if isinstance(ev, SessionEnd):
        return {"type": "session_end", "reason": ev.reason, "tokens": list(ev.tokens), "text": ev.text}
    if isinstance(ev, SessionError):
        return {"type": "error", "message": ev.message, "kind": ev.kind}
    raise TypeError(f"not an event: {type(ev).__name__}")


def decode(d: Any) -> Event:
    if not isinstance(d, dict):
        raise SchemaError(f"line is not a JSON object but {type(d).__name__}")
    kind = _get(d, "type", str)
    if kind == "session_start":
        return SessionStart(_get(d, "session_id", str), _get(d, "tool_version", str),
                            _get(d, "backend", str), _get(d, "model", str), _get(d, "params", dict),
                            _get(d, "prompt", str), tuple(_get(d, "prompt_ids", "ints")),
                            float(_get(d, "started_at", float)), dict(d.get("backend_info") or {}))
    if kind == "model_call":
        purpose = _get(d, "purpose", str)
        if purpose not in ("extend", "propose"):
            raise SchemaError(f"field 'purpose' must be extend or propose, got {purpose!r}")
        return ModelCall(_get(d, "block", int), _get(d, "round", int), purpose,
                         _get(d, "requests", int), _get(d, "tokens", int), float(_get(d, "wall_s", float)))
    if kind == "block_start":
        return BlockStart(_get(d, "block", int), _get(d, "L", int), _get(d, "T", int),
                          tuple(_get(d, "tokens", "ints")))
    if kind == "round":
        tree_d = _get(d, "tree", dict)
        phase = tree_d.get("phase_s") or {}
        _check(isinstance(phase, dict) and all(_is(v, float) for v in phase.values()), "tree.phase_s",
               "should map phases to seconds")
        return RoundDone(_get(d, "block", int), _get(d, "round", int), _get(d, "k_before", int),
                         _get(d, "k_after", int), _get(d, "steps", int), decode_tree(tree_d),
                         float(_get(d, "call_wall_s", float)), dict(phase))
    if kind == "session_end":
        return SessionEnd(_get(d, "reason", str), tuple(_get(d, "tokens", "ints")), _get(d, "text", str))
    if kind == "error":
        return SessionError(_get(d, "message", str), _get(d, "kind", str))
    raise SchemaError(f"unknown event type {kind!r}")


# -- round trees --------------------------------------------------------------

def encode_tree(t: RoundTree, phase_s: dict | None = None) -> dict:
    return {
        "rule": t.rule, "inputs": t.inputs, "T": t.T, "k0": t.k0, "depth_cap": t.depth_cap,
        "levels": isinstance(t, LevelTree), "quirk": isinstance(t, LevelTree) and t.quirk,
        "prompt": list(t.root.prompt), "root": list(t.root.tokens),
        "decisions": [[d.index, d.depth, d.cut, d.cut_u, d.seed, d.accept_u, d.request, d.h_pred, d.node,
                       list(d.candidates)] for d in t.decisions],
        "requests": [[r.decision, r.cut, r.seed, list(r.proposal.tokens), r.tau] for r in t.requests],
        "scores": [[pos, src, _num(s.log_q_x), _num(s.log_q_y), _num(s.log_p_x), _num(s.log_p_y),
                    _num(s.log_target), _num(s.log_proposal), _num(s.log_ratio), s.accept_prob, s.eps_class,
                    _num(s.log_cut_x), _num(s.log_cut_y), [[c[0], _num(c[1]), c[2]] for c in s.candidates],
                    s.selected]
                   for (pos, src), s in t.scores.items()],
        "table": [[v, r.depth, r.status, r.src, r.decision] for v, r in t.table.items()]
        if isinstance(t, TableTree) else [],
        "steps": [[s.node, s.decision, s.src, s.accepted] for s in t.steps],
        "stop_node": t.stop_node, "stop_reason": t.stop_reason, "phase_s": phase_s or {},
    }


def _rows(d: dict, key: str, width: int) -> list[list]:
    rows = _get(d, key, list, "tree.")
    for i, r in enumerate(rows):
        if not isinstance(r, list) or len(r) != width:
            raise SchemaError(f"tree.{key}[{i}] should be a list of {width} values")
    return rows


def _check(ok: bool, where: str, what: str):
    if not ok:
        raise SchemaError(f"field '{where}' {what}")


def decode_tree(d: dict) -> RoundTree:
    T = _get(d, "T", int, "tree.")
    prompt = tuple(_get(d, "prompt", "ints", "tree."))
    root_tokens = tuple(_get(d, "root", "ints", "tree."))
    _check(len(root_tokens) == T, "tree.root", f"should hold T={T} tokens")
    decisions = []
    for i, r in enumerate(_rows(d, "decisions", 10)):
        w = f"tree.decisions[{i}]"
        for j, kind in ((0, int), (1, int), (2, int), (3, float), (4, int), (5, float), (6, "int?"),
                        (7, "float?"), (8, "int?"), (9, "ints")):
            _check(_is(r[j], kind), f"{w}[{j}]", f"should be {_name(kind)}")
        _check(0 <= r[2] < T, f"{w}[2]", "is a cut outside 0..T-1")
        decisions.append(DecisionRec(r[0], r[1], r[2], float(r[3]), r[4], float(r[5]), r[6],
                                     None if r[7] is None else float(r[7]), r[8], tuple(r[9])))
    requests = []
    for i, r in enumerate(_rows(d, "requests", 5)):
        w = f"tree.requests[{i}]"
        _check(_is(r[0], int) and 0 <= r[0] < len(decisions), f"{w}[0]", "is not a decision position")
        _check(_is(r[1], int) and 0 <= r[1] < T, f"{w}[1]", "is a cut outside 0..T-1")
        _check(_is(r[2], int), f"{w}[2]", "should be an integer")
        _check(_is(r[3], "ints") and len(r[3]) == T - r[1], f"{w}[3]", "should hold T - cut token ids")
        _check(_is(r[4], float), f"{w}[4]", "should be a temperature")
        requests.append(RequestRec(r[0], r[1], r[2], Proposal.tokens_only(tuple(r[3])), float(r[4])))
    for i, dec in enumerate(decisions):
        _check(dec.request is None or 0 <= dec.request < len(requests), f"tree.decisions[{i}][6]",
               "is not a request index")
        _check(all(0 <= c < len(requests) for c in dec.candidates), f"tree.decisions[{i}][9]",
               "holds a candidate that is not a request index")
    n_src = len(requests)
    scores = {}
    for i, r in enumerate(_rows(d, "scores", 15)):
        w = f"tree.scores[{i}]"
        _check(_is(r[0], int) and 0 <= r[0] < len(decisions), f"{w}[0]", "is not a decision position")
        _check(_is(r[1], int) and -1 <= r[1] < n_src, f"{w}[1]", "is not a state source")
        _check(_is(r[9], float) and 0.0 <= r[9] <= 1.0, f"{w}[9]", "is not a probability")
        _check(r[10] in EPS_CLASSES, f"{w}[10]", f"should be one of {', '.join(EPS_CLASSES)}")
        nums = [_unnum(r[j], f"{w}[{j}]") for j in range(2, 9)]
        _check(isinstance(r[13], list) and all(isinstance(c, list) and len(c) == 3 for c in r[13]),
               f"{w}[13]", "should list [temperature, log weight, probability] per candidate")
        _check(_is(r[14], int), f"{w}[14]", "should be an integer")
        cands = tuple((_unnum(c[0], f"{w}[13]"), _unnum(c[1], f"{w}[13]"), _unnum(c[2], f"{w}[13]"))
                      for c in r[13])
        scores[(r[0], r[1])] = Score(
            log_q_x=nums[0], log_q_y=nums[1], log_p_x=nums[2], log_p_y=nums[3], log_target=nums[4],
            log_proposal=nums[5], log_ratio=nums[6], accept_prob=float(r[9]), eps_class=r[10],
            log_cut_x=_unnum(r[11], f"{w}[11]"), log_cut_y=_unnum(r[12], f"{w}[12]"), candidates=cands,
            selected=r[14])
    table = {}
    for i, r in enumerate(_rows(d, "table", 5)):
        w = f"tree.table[{i}]"
        _check(_is(r[0], int) and r[0] >= 0 and _is(r[1], int), w, "has a bad node id or depth")
        _check(r[2] in STATUSES, f"{w}[2]", f"should be one of {', '.join(STATUSES)}")
        _check(_is(r[3], int) and -1 <= r[3] < n_src, f"{w}[3]", "is not a state source")
        _check(r[4] is None or (_is(r[4], int) and 0 <= r[4] < len(decisions)), f"{w}[4]",
               "is not a decision position")
        table[r[0]] = NodeRec(r[1], r[2], r[3], r[4])
    steps = []
    for i, r in enumerate(_rows(d, "steps", 4)):
        w = f"tree.steps[{i}]"
        _check(_is(r[0], int) and _is(r[1], int) and _is(r[2], int) and isinstance(r[3], bool), w,
               "should be [node, decision, source, accepted]")
        _check((r[1], r[2]) in scores, w, "refers to a decision that was not scored")
        steps.append(Step(r[0], r[1], r[2], r[3]))
    levels = _get(d, "levels", bool, "tree.")
    if not levels:
        for i, s in enumerate(steps):
            _check(s.node in table, f"tree.steps[{i}]", "names a node outside the table")
    stop_reason = _get(d, "stop_reason", str, "tree.")
    _check(stop_reason in STOP_REASONS, "tree.stop_reason", f"should be one of {', '.join(STOP_REASONS)}")
    common = dict(
        rule=_get(d, "rule", str, "tree."), inputs=_get(d, "inputs", str, "tree."), T=T,
        k0=_get(d, "k0", int, "tree."), depth_cap=_get(d, "depth_cap", int, "tree."),
        root=SeqState.tokens_only(prompt, root_tokens), decisions=tuple(decisions),
        requests=tuple(requests), scores=scores, steps=tuple(steps),
        stop_node=_get(d, "stop_node", int, "tree."), stop_reason=stop_reason,
    )
    quirk = _get(d, "quirk", bool, "tree.")
    return LevelTree(**common, quirk=quirk) if levels else TableTree(**common, table=table)
