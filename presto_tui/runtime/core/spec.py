"""Every parameter a person can set, declared once: the one owner of its name, type, range,
default, help and what it applies to.

The table is the core's parameters (`CORE`: which method, the target and the response, the MH
chains', the engine's) and each registered method's own (declared in its module,
`runtime/methods/`, or a plugin's: `core/registry.py`), in the order of --help, the settings
dialog and the docs: the method, the law, the chains', each method's own, the engine's.
Everything else is derived from it:

- `SamplerParams` and `EngineOptions` take their defaults from it (`default`);
- each command's options (`cli/params.py`: a command names the groups it takes);
- the server's request fields, their validation and its OpenAPI schema (`serve/protocol.py`);
- `chat --connect`'s request body, the settings dialog's fields, the compare view's and `stats`'
  notion of which parameters a session's method reads, lm-eval's model arguments;
- the docs' parameter table.

One validation path: a value typed anywhere (a flag, a request field, a settings field, a
model argument) is read by `Param.read` and checked by `Param.check` (`paramkit.py`); every
message names the parameter the way the person wrote it (`Naming`), so `--max-new-tokens` on
the command line is `max_tokens` in a request and "new tokens n" in the settings dialog, with
the same words after it.

`SPEC`, `PARAMS`, `SAMPLER_PARAMS`, `ENGINE_PARAMS` and `LIMITS` are made on first use from the
methods registered then (and again if the registry changes); `tests/test_spec.py` walks every
entry into every front-end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from presto_tui.runtime.core import paramkit, registry
from presto_tui.runtime.core.method import MethodKind
from presto_tui.runtime.core.names import BackendName, InputMode, PrefetchRule
from presto_tui.runtime.core.paramkit import (
    SHOWN_CHARS,
    Group,
    Limit,
    Naming,
    Param,
    ParamError,
    Target,
    dashed,
    number_text,
    raw_text,
    whole_number,
)

# and, made on first use: SPEC, PARAMS, SAMPLER_PARAMS, ENGINE_PARAMS, LIMITS (see __getattr__)
__all__ = ["AUTO_BUDGET", "BUDGET_LIMIT", "BUDGET_POLICIES", "CORE", "DTYPES", "EXECUTORS", "Group", "Limit",
           "Naming", "Param", "ParamError", "SHOWN_CHARS", "SPECULATE", "Target", "applies", "applying",
           "budget_text", "comparable_names", "default", "flag", "json_schema", "label", "number_text",
           "of_group", "param_table", "raw_text", "read_budget", "read_speculate", "read_values",
           "request_field", "rule_words", "sampler_table", "whole_number"]


# -- how a parameter is named --------------------------------------------------------------

def flag(name: str) -> str:
    """The command-line flag of a parameter (the CLI's naming)."""
    p = _find(name)
    return p.cli_flag if p is not None and p.cli_flag else dashed(name)


def request_field(name: str) -> str:
    """The request field of a parameter (the server's naming)."""
    p = _find(name)
    return p.request_field if p is not None and p.request_field else name


def label(name: str) -> str:
    """The settings dialog's label of a parameter (its naming)."""
    p = _find(name)
    return p.label if p is not None else name


# -- the budget: N, auto, cost:N or fill:N -------------------------------------------------------

# The streaming rule's budget: `shared` (the default) keeps the requests whose chance of being used
# pays for what they add to every engine step, the engine's slots shared by every chain on it (N is a
# cap); `cost` keeps as many as make the chain's own critical path shortest (N is a cap); `fill` keeps
# N requests live whatever they cost.
BUDGET_POLICIES = ("shared", "cost", "fill")
AUTO_BUDGET = 64  # `-N auto`: the default policy with this cap
BUDGET_LIMIT = Limit(1, 4096, integer=True)


def read_budget(name: str, text: str) -> dict[str, Any]:
    """`-N`: N (the shared policy, N at most), auto (the shared policy up to AUTO_BUDGET), cost:N or cost:auto
    (the cost policy, one chain's own width), or fill:N."""
    raw = text.strip()
    policy = BUDGET_POLICIES[0]
    for other in BUDGET_POLICIES[1:]:
        if raw.startswith(other + ":"):
            raw, policy = raw[len(other) + 1:], other
            break
    if raw == "auto" and policy != "fill":
        return {"budget": AUTO_BUDGET, "budget_policy": policy}
    if not raw.isascii() or not raw.isdigit():
        raise ParamError(f"{name} must be a whole number {BUDGET_LIMIT.where}, auto, cost:N or fill:N, got "
                         f"{raw_text(text)}", "budget")
    n = int(raw)
    try:
        BUDGET_LIMIT.check(name, n)
    except ParamError as e:
        raise ParamError(str(e), "budget") from None
    return {"budget": n, "budget_policy": policy}


def budget_text(p: Mapping[str, Any]) -> str:
    """The budget as `-N` writes it, from a params dict: auto or a cap (the streaming rule's shared policy),
    cost:auto or cost:N (its cost policy), fill:N (it keeps N live); N for the round rules."""
    b = p.get("budget")
    if p.get("prefetch") == PrefetchRule.STREAM:
        policy = p.get("budget_policy", BUDGET_POLICIES[0])
        size = "auto" if b == AUTO_BUDGET and policy != "fill" else str(b)
        return size if policy == BUDGET_POLICIES[0] else f"{policy}:{size}"
    return str(b)


# What the streaming rule may speculate beyond the walker's state: `proposal` (requests cut inside
# a proposal still decoding), `block` (the next block's extension) and `extension` (a block's first
# proposals while its own extension decodes); `none` for none of them.
SPECULATE = ("proposal", "block", "extension")


def read_speculate(name: str, text: str) -> dict[str, Any]:
    value = text.strip()
    if value != "none" and any(s not in SPECULATE for s in value.split(",")):
        raise ParamError(f"{name} takes none or a comma list of {', '.join(SPECULATE)}, got {raw_text(text)}",
                         "speculate")
    return {"speculate": value}


DTYPES = ("auto", "float32", "bfloat16", "float16")
EXECUTORS = ("uni", "mp", "ray")

_CHAINS = frozenset({MethodKind.CHAIN.value})  # the parameters every MH chain method reads
_PRESTO = frozenset(PrefetchRule.presto_names())
_STREAM = frozenset({PrefetchRule.STREAM.value})


# The order is the order of --help, the settings dialog and the docs' table.
CORE: tuple[Param, ...] = (
    # -- which method ------------------------------------------------------------------------
    Param("sampler", str, "powermh", "The method that draws the response", Group.METHOD, "sampler",
          choices=lambda: tuple((m.name, m.help) for m in registry.methods()), metavar="NAME",
          extra={"missing": registry.missing, "left_out": registry.problems, "recorded": registry.recorded}),
    Param("prefetch", str, PrefetchRule.STREAM.value,
          "The prefetch rule (PreSTO's; none is the sequential sampler). With decision inputs bfs and predictive plan "
          "the same requests as each other; their allocations differ only with --inputs node", Group.METHOD,
          "rule", choices=PrefetchRule, kinds=_CHAINS, metavar="NAME"),
    Param("budget", int, AUTO_BUDGET,
          "Prefetch budget N: distinct requests per model call for the round rules. For stream, the most requests "
          "kept live, each only while its chance of being used pays for what it adds to every engine step, the "
          "engine's slots shared by every chain on it (the step cost is learned as it runs); auto is that with up "
          f"to {AUTO_BUDGET}; cost:N (or cost:auto) as many as make the chain's own path shortest, as if alone; "
          f"fill:N keeps N live whatever they cost; N {BUDGET_LIMIT.where}", Group.METHOD,
          "budget N (N, auto, cost:N or fill:N)",
          limit=BUDGET_LIMIT, kinds=_CHAINS, rules=_PRESTO, short="-N", metavar="N|auto|cost:N|fill:N",
          reader=read_budget,
          default_text="auto for stream, 8 for the round rules",
          extra={"hint": "must be a whole number, auto, cost:N or fill:N", "round_default": 8}),
    Param("budget_policy", str, "shared", "How the streaming rule spends its budget (set through --budget)",
          Group.METHOD, "budget policy", choices=BUDGET_POLICIES, kinds=_CHAINS, rules=_STREAM, flag="", field="",
          settings=False),
    # -- every sampler -----------------------------------------------------------------------
    Param("alpha", float, 4.0, "Power exponent: the target is p0^alpha", Group.LAW, "alpha",
          limit=Limit(0, 1000, lo_open=True)),
    Param("tau", float, None, "Proposal temperature (the baselines sample at it too)", Group.LAW,
          "tau (empty: 1/alpha)", limit=Limit(1e-4, 100), optional=True, default_text="1/alpha"),
    Param("max_new_tokens", int, 96, "Response length n (fixed for the MH chains: EOS does not stop them)",
          Group.LAW, "new tokens n", limit=Limit(1, 65536, integer=True), short="-n", field="max_tokens",
          aliases=("max_completion_tokens",)),
    Param("seed", int, 0, "Session seed; the same seed gives the same response", Group.LAW, "seed",
          limit=Limit(0, 2**63 - 1, integer=True)),
    # -- the MH chains -----------------------------------------------------------------------
    Param("inputs", str, InputMode.DECISION.value, "The decisions' random inputs", Group.CHAIN, "inputs",
          choices=InputMode, kinds=_CHAINS, metavar="NAME"),
    Param("block_size", int, None, "Block size B, must divide n", Group.CHAIN, "block size B (empty: n)",
          limit=Limit(1, 65536, integer=True), kinds=_CHAINS, optional=True, short="-B",
          default_text="n, one block"),
    Param("steps", int, 24, "MH transitions per block K", Group.CHAIN, "steps K per block",
          limit=Limit(1, 1_000_000, integer=True), kinds=_CHAINS, short="-K"),
    Param("epsilon", float, 0.01, "Epsilon of epsilon-certainty: certain accept if A >= 1-eps, certain reject "
          "if A <= eps", Group.CHAIN, "epsilon", limit=Limit(0, 0.5), kinds=_CHAINS),
    Param("speculate", str, "proposal,block,extension", "Stream: what to speculate beyond the chain's state, a "
          "comma list of proposal (requests cut inside a proposal still decoding), block (the next block's "
          "extension) and extension (a block's first proposals while its own extension decodes), or none; what "
          "a sampler cannot use is left out (EntropyCut: proposal and extension; MultiTryMH: proposal)",
          Group.CHAIN, "speculate (proposal,block,extension / none)", kinds=_CHAINS, rules=_STREAM,
          metavar="LIST", reader=read_speculate,
          extra={"hint": "takes none or a comma list of proposal, block, extension"}),
    # -- the engine --------------------------------------------------------------------------
    Param("backend", str, None, "Engine", Group.ENGINE, "backend", choices=BackendName, metavar="NAME",
          default_text="vllm where installed, else transformers", settings=False, envvar="PRESTO_TUI_BACKEND"),
    Param("model", str, None, "smollm2-135m (the embedded default), a local Hugging Face folder, a .gguf file, or "
          "a Hugging Face hub id (org/name, from the local Hugging Face cache; downloaded where a network allows)",
          Group.ENGINE, "model", default_text="smollm2-135m", metavar="MODEL", settings=False),
    Param("chat_template", bool, True, "Wrap prompts in the model's chat template", Group.ENGINE, "chat template",
          negative="--no-chat-template", settings=False),
    Param("dtype", str, None, "Weights' data type", Group.ENGINE, "dtype", choices=DTYPES,
          default_text="float32 on CPU, the model's on GPU", settings=False),
    Param("max_model_len", int, None, "vLLM: context length to reserve", Group.ENGINE, "max model length",
          limit=Limit(1, 10**7, integer=True), default_text="the model's", settings=False),
    Param("gpu_memory_utilization", float, None, "vLLM on GPU: memory fraction", Group.ENGINE, "GPU memory share",
          limit=Limit(0, 1, lo_open=True), default_text="vLLM's", settings=False),
    Param("tensor_parallel_size", int, 1, "vLLM: GPUs to shard the model over", Group.ENGINE, "tensor parallel",
          limit=Limit(1, 1024, integer=True), settings=False),
    Param("pipeline_parallel_size", int, 1, "vLLM: pipeline stages (GPUs or nodes) to split the model over",
          Group.ENGINE, "pipeline parallel", limit=Limit(1, 1024, integer=True), settings=False),
    Param("distributed_executor_backend", str, None, "vLLM: uni (one process), mp (worker processes) or ray (a Ray "
          "cluster, several nodes)", Group.ENGINE, "executor", choices=EXECUTORS,
          default_text="uni, mp with tensor or pipeline parallelism", settings=False),
    Param("enforce_eager", bool, None, "vLLM: skip graph capture", Group.ENGINE, "eager",
          negative="--no-enforce-eager", default_text="eager on CPU", settings=False),
    Param("threads", int, None, "CPU threads for the engine", Group.ENGINE, "threads",
          limit=Limit(1, 4096, integer=True), default_text="all cores; 1 is faster on a busy machine", settings=False),
    Param("kv_cache_gib", float, None, "vLLM on CPU: KV-cache size in GiB", Group.ENGINE, "KV cache GiB",
          limit=Limit(0, 1e6, lo_open=True), default_text="1", settings=False),
    Param("synthetic_cost", float, None, "Synthetic engine: a step with n live requests costs 1 + this x (n - 1) "
          "one-request steps; 0.05 is what a 2-core CPU measured, about 0.004 a GPU", Group.ENGINE, "step cost slope",
          limit=Limit(0, 100), default_text="0.05", settings=False),
    Param("synthetic_prefill", float, None, "Synthetic engine: a request's first step costs what this many more live "
          "requests would (its prefill: a real engine first computes its prefix past the last cached block, about 16 "
          "tokens with vLLM's blocks of 32)", Group.ENGINE, "prefill cost", limit=Limit(0, 10000),
          default_text="0", settings=False),
    Param("synthetic_vocab", int, None, "Synthetic engine: a model of this many tokens (t0, t1, ...) and no EOS "
          "instead of the demo words, small enough that every response of n tokens can be enumerated (eval "
          "--frontier then measures each method's exact distance to pi_alpha)", Group.ENGINE, "vocabulary",
          limit=Limit(2, 1000, integer=True), default_text="26 demo words with EOS", metavar="V", settings=False),
    Param("synthetic_sharpness", float, None, "Synthetic engine: its logits are this times standard normal draws "
          "(lower: a flatter p0)", Group.ENGINE, "sharpness", limit=Limit(0, 100, lo_open=True), default_text="2",
          settings=False),
)

registry.reserve(p.name for p in CORE)
paramkit.default_naming[0] = flag  # a message names a parameter by its declared flag (--rank, -n)
_CORE = {p.name: p for p in CORE}
_cache: dict[str, Any] = {"generation": -1}


def _tables() -> dict[str, Any]:
    """The whole table, made from the core and the methods registered now (once per registry state)."""
    if _cache["generation"] != registry.generation or "SPEC" not in _cache:
        methods = registry.methods()  # (this may change registry.generation: read it after)
        own: list[Param] = []
        seen: set[str] = set()
        for m in methods:
            for p in m.own_table:
                if p.name not in seen:
                    seen.add(p.name)
                    own.append(p)
        engine_at = next(i for i, p in enumerate(CORE) if p.group is Group.ENGINE)
        spec = (*CORE[:engine_at], *own, *CORE[engine_at:])
        _cache.clear()
        _cache.update(generation=registry.generation, SPEC=spec, PARAMS={p.name: p for p in spec},
                      SAMPLER_PARAMS=tuple(p for p in spec if p.target is Target.SAMPLER),
                      ENGINE_PARAMS=tuple(p for p in spec if p.target is Target.ENGINE and p.name != "backend"),
                      LIMITS={p.name: p.limit for p in spec if p.limit is not None})
    return _cache


def __getattr__(name: str) -> Any:
    if name in ("SPEC", "PARAMS", "SAMPLER_PARAMS", "ENGINE_PARAMS", "LIMITS"):
        return _tables()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def param_table() -> dict[str, Param]:
    """Every parameter by name (the core's and the registered methods')."""
    return _tables()["PARAMS"]


def sampler_table() -> tuple[Param, ...]:
    """Every parameter a SamplerParams holds, in the table's order."""
    return _tables()["SAMPLER_PARAMS"]


def _find(name: str) -> Param | None:
    """A parameter by name: a core one without loading any method, else from the whole table."""
    return _CORE.get(name) or _tables()["PARAMS"].get(name)


def of_group(*groups: Group) -> tuple[Param, ...]:
    """The parameters of `groups`, in the table's order."""
    return tuple(p for p in _tables()["SPEC"] if p.group in groups)


def default(name: str) -> Any:
    """A parameter's default, for the dataclasses that hold the values."""
    p = _find(name)
    if p is None:
        raise KeyError(name)
    return p.default


def applies(p: Param, params: Mapping[str, Any]) -> bool:
    """Whether a session with `params` (a SamplerParams dict) reads `p` (its method's kind looked up)."""
    kind = registry.kind_of(params.get("sampler"))
    return p.applies(params, kind.value if kind is not None else None)


def applying(params: Mapping[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The sampler parameters (of `names`, default all) that a session with `params` reads."""
    table = _tables()
    chosen = table["SAMPLER_PARAMS"] if names is None else [table["PARAMS"][n] for n in names if n in table["PARAMS"]]
    return [p.name for p in chosen if applies(p, params)]


def read_values(raw: Mapping[str, Any], naming: Naming | None = None) -> dict[str, Any]:
    """Every given value of `raw` ({name: value as it arrived}, None: not given) read and checked."""
    out: dict[str, Any] = {}
    params = _tables()["PARAMS"]
    for name, value in raw.items():
        if value is not None and name in params:
            out.update(params[name].read(value, naming))
    return out


def json_schema(param: Param) -> dict[str, Any]:
    """A parameter as a JSON-schema property (the server's OpenAPI schema)."""
    kind = {int: "integer", float: "number", str: "string", bool: "boolean"}[param.kind]
    schema: dict[str, Any] = {"description": param.help_text()}
    if param.reader is not None:  # N, auto, cost:N or fill:N
        schema["anyOf"] = [{"type": "integer", "minimum": 1}, {"type": "string"}]
    elif param.choice_names is not None:
        schema["type"], schema["enum"] = "string", list(param.choice_names)
    else:
        schema["type"] = kind
        if param.limit is not None:
            lim = param.limit
            bound = int if lim.integer else float
            schema["exclusiveMinimum" if lim.lo_open else "minimum"] = bound(lim.lo)
            if not math.isinf(lim.hi):
                schema["maximum"] = bound(lim.hi)
    if param.optional or param.default is None:
        schema["nullable"] = True
    if param.default is not None:
        schema["default"] = param.default
    return schema


def rule_words(p: Mapping[str, Any]) -> str:
    """An MH chain's rule in words: 'sequential', 'PreSTO stream N=auto', 'PreSTO bfs N=8, node inputs'."""
    if p.get("prefetch") == PrefetchRule.NONE:
        return "sequential"
    inputs = ", node inputs" if p.get("inputs") == InputMode.NODE else ""
    return f"PreSTO {p.get('prefetch')} N={budget_text(p)}{inputs}"


def comparable_names(params: Mapping[str, Any]) -> list[str]:
    """The sampler parameters that must agree for two sessions to be pooled: every one the session's
    method and rule read, but the seed (and the prompt, which is no parameter)."""
    return [name for name in applying(params) if name != "seed"]
