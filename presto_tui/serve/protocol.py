"""OpenAI request bodies in, `Ask`s out; `Ask`s' results back as OpenAI objects.

A body is checked field by field before anything runs.  The sampler's fields are the
parameter specification's (runtime/core/spec.py: each parameter's request field, `max_tokens`
for n) and every value goes through its one validation path (`params_from`), so a bad value
is refused (HTTP 400) with the line `presto-tui run` prints for it, naming the request field
rather than a flag the client never sent, and the error's `param` is that field.  The
server's flags are the defaults a body overrides.

The OpenAI sampling fields that power sampling has no use for (`temperature`,
`top_p`, penalties: the chain's law is set by alpha and tau) are accepted and
ignored, and the answer lists them; fields that ask for something this server
cannot give (log-probabilities, echo, tools) are refused; an unknown field is
refused with the closest known name, since a misspelt `alpah` silently ignored
would sample with the wrong law.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from presto_tui.api.params import (
    SAMPLER_PARAMS,
    Limit,
    ParamError,
    SamplerParams,
    params_from,
    raw_text,
    unknown_name,
    whole_number,
)
from presto_tui.api.sessions import CHAINS
from presto_tui.errors import InputError

COMPLETION, CHAT = "completion", "chat"

# body field -> the parameter it sets (the spec's request fields and their aliases)
SAMPLER_FIELDS = {f: p.name for p in SAMPLER_PARAMS if p.request_field for f in (p.request_field, *p.aliases)}
FIELD_OF = {p.name: p.request_field for p in SAMPLER_PARAMS if p.request_field}


def field_naming(name: str) -> str:
    """How a request names a parameter (its field), for messages."""
    return FIELD_OF.get(name, name)


# accepted and ignored: the chain's law is p0^alpha, proposals at tau (the answer says so)
IGNORED = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty",
           "length_penalty", "do_sample", "user", "metadata", "store", "service_tier", "parallel_tool_calls")
# accepted only with a value that asks for nothing (their OpenAI defaults)
NOTHING_ASKED: dict[str, tuple[Any, ...]] = {
    "logprobs": (None, False, 0), "top_logprobs": (None, 0), "echo": (None, False), "best_of": (None, 1),
    "suffix": (None, ""), "logit_bias": (None, {}), "tools": (None, []), "tool_choice": (None, "none"),
    "functions": (None, []), "response_format": (None, {"type": "text"}),
}
COMMON = ("model", "n", "stream", "stream_options", "stop", "request_id")
FIELDS = {
    COMPLETION: ("prompt", *COMMON),
    CHAT: ("messages", *COMMON),
}
MAX_STOPS = 4  # as OpenAI
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_schema(kind: str) -> dict[str, Any]:
    """The OpenAPI request body of a completion (`kind`): OpenAI's fields and every sampler parameter
    of the specification as its request field, with its type, range, default and help."""
    from presto_tui.api.params import PARAMS, json_schema

    props: dict[str, Any] = {
        "model": {"type": "string", "description": "The model served here (GET /v1/models); optional."},
        "n": {"type": "integer", "minimum": CHAINS.lo, "maximum": CHAINS.hi, "default": 1,
              "description": "Choices per prompt: chain j of n runs on the seed of chain j, as --chains does."},
        "stream": {"type": "boolean", "default": False},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": MAX_STOPS}]},
        "request_id": {"type": "string", "pattern": REQUEST_ID.pattern},
        "paper_settings": {"type": "boolean", "description": "The paper's sizes: n=1024, one block, K=100, N=20."},
    }
    if kind == COMPLETION:
        props["prompt"] = {"anyOf": [{"type": "string"}, {"type": "array"}],
                           "description": "A string, a list of strings, token ids or a list of lists of them."}
    else:
        props["messages"] = {"type": "array", "items": {"type": "object"},
                             "description": "The chat: system, user and assistant messages, the user's last."}
    for name, param in SAMPLER_FIELDS.items():
        props[name] = json_schema(PARAMS[param])
    for name in IGNORED:
        props[name] = {"description": "accepted and ignored: the chain's law is set by alpha and tau"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["prompt" if kind == COMPLETION else "messages"], "properties": props,
        "additionalProperties": False}}}}}


class FieldError(InputError):
    """A request field's value is wrong: OpenAI's error object names the field (`param`)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Prompt:
    """One prompt: text through the model's chat template (after `history`, earlier (user, assistant)
    turns), as `presto-tui run` encodes it, or token ids given as they are."""

    text: str
    ids: tuple[int, ...] | None = None
    history: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Ask:
    """A checked request: every prompt runs `n` chains with `params` (choice j of a prompt on the
    chain seed of chain j, as `--chains` does)."""

    kind: str
    prompts: tuple[Prompt, ...]
    params: SamplerParams
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    stop: tuple[str, ...] = ()
    request_id: str | None = None
    model: str | None = None
    ignored: tuple[str, ...] = field(default_factory=tuple)

    @property
    def chains(self) -> int:
        return len(self.prompts) * self.n


def parse(body: Any, kind: str, defaults: dict[str, Any]) -> Ask:
    """Check a request body; InputError (one line) names the first thing wrong."""
    if not isinstance(body, dict):
        raise InputError(f"the request body should be a JSON object, got {json_kind(body)}")
    known = set(FIELDS[kind]) | set(SAMPLER_FIELDS) | {"paper_settings"} | set(IGNORED) | set(NOTHING_ASKED)
    for name in body:
        if name not in known:
            raise InputError(unknown_name("field", name, known, " (see presto-tui serve --help)"))
    for name, allowed in NOTHING_ASKED.items():
        if name in body and body[name] not in allowed:
            raise InputError(f"{name} is not available from presto-tui serve: the answer is the chain's final "
                             "state, with no per-token log-probabilities, echo, tools or formats")
    values = dict(defaults)
    for name, key in SAMPLER_FIELDS.items():
        if name in body and body[name] is not None:
            values[key] = body[name]
    paper = _flag("paper_settings", body["paper_settings"]) if "paper_settings" in body else \
        bool(defaults.get("paper_settings"))
    try:
        params = params_from(values, paper=paper, naming=field_naming)
    except ParamError as e:
        raise FieldError(str(e.named(field_naming)), field_naming(e.param) if e.param else None) from None
    _own_fields_only(body, params)
    if kind == COMPLETION:
        prompts = _prompts(body.get("prompt"))
    else:
        prompts = (_messages(body.get("messages")),)
    n = _whole("n", body.get("n"), CHAINS, 1)  # as --chains
    stream = _flag("stream", body.get("stream"))
    options = body.get("stream_options")
    if options is not None and not (isinstance(options, dict) and set(options) <= {"include_usage"}):
        raise InputError("stream_options should be an object with at most include_usage")
    include_usage = _flag("stream_options.include_usage", (options or {}).get("include_usage"))
    request_id = body.get("request_id")
    if request_id is not None and not (isinstance(request_id, str) and REQUEST_ID.fullmatch(request_id)):
        raise InputError("request_id should be 1 to 64 letters, digits or . _ : -")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InputError("model should be a string (see GET /v1/models)")
    return Ask(kind, prompts, params, n, stream, include_usage, _stops(body.get("stop")), request_id, model,
               tuple(name for name in IGNORED if body.get(name) is not None))


# body field -> the methods that read its parameter (a method's own parameters: PowerSMC's particles)
METHOD_FIELDS = {f: p.samplers for p in SAMPLER_PARAMS if p.request_field and p.samplers is not None
                 for f in (p.request_field, *p.aliases)}


def methods_read(params: SamplerParams) -> set[str]:
    """The methods whose own parameters a session with `params` reads: its own, and a population's
    members' (tempering's replica chain)."""
    method = params.method
    ours = {method.name}
    if method.population:
        ours |= method.member_samplers(params)
    return ours


def _own_fields_only(body: dict, params: SamplerParams) -> None:
    """Another method's own field (particles on powermh) is refused as an unknown field is: silently
    ignored, it would let a client believe it had set something.  A population's members' methods
    (tempering's replica chain) count as its own."""
    method, ours = params.method, methods_read(params)
    for name in body:
        samplers = METHOD_FIELDS.get(name)
        if samplers is not None and body[name] is not None and not samplers & ours:
            owners = " or ".join(sorted(samplers))
            raise FieldError(f"unknown field {name!r} for sampler {method.name} (a field of {owners}; see presto-tui "
                             "serve --help)", name)


def json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words (null, not NoneType)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def _whole(name: str, value: Any, limit: Limit, default: int) -> int:
    if value is None:
        return default
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(value)
        n = whole_number(value)
    except ValueError:
        raise FieldError(limit.unparsable(name, str(value)), name) from None
    message = limit.message(name, n)
    if message is not None:
        raise FieldError(message, name)
    return n


def _flag(name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"{name} should be true or false, got {raw_text(value)}")
    return value


def _text(value: Any) -> str:
    if not value.strip():
        raise InputError("the prompt is empty")
    return value


def _prompts(value: Any) -> tuple[Prompt, ...]:
    """OpenAI's four forms: a string, a list of strings, a list of token ids, a list of such lists."""
    if value is None:
        raise InputError("a completion needs a prompt")
    if isinstance(value, str):
        return (Prompt(_text(value)),)
    if not isinstance(value, list) or not value:
        raise InputError("prompt should be a string, a list of strings, or token ids (a list, or a list of lists)")
    if all(_is_id(x) for x in value):
        return (Prompt("", tuple(value)),)
    out = []
    for i, p in enumerate(value):
        if isinstance(p, str):
            out.append(Prompt(_text(p)))
        elif isinstance(p, list) and p and all(_is_id(x) for x in p):
            out.append(Prompt("", tuple(p)))
        else:
            raise InputError(f"prompt[{i}] should be a non-empty string or a non-empty list of token ids")
    return tuple(out)


def _is_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**31


def _content(m: dict, where: str) -> str:
    content = m.get("content")
    if isinstance(content, list):  # parts: only text parts
        texts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise InputError(f"{where}.content[{j}] should be a text part ({{\"type\": \"text\", \"text\": ...}})")
            texts.append(part["text"])
        content = "".join(texts)
    if not isinstance(content, str):
        raise InputError(f"{where}.content should be a string")
    return content


def _messages(value: Any) -> Prompt:
    """A chat as the app runs one: earlier (user, assistant) turns and the last user message.
    System (and developer) messages go before the user message that follows them."""
    if not isinstance(value, list) or not value:
        raise InputError("messages should be a non-empty list of {role, content} objects")
    turns: list[tuple[str, str]] = []
    system: list[str] = []
    user: str | None = None
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise InputError(f"{where} should be an object with role and content")
        role = m.get("role")
        text = _content(m, where)
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            if user is not None:
                raise InputError(f"{where}: two user messages in a row; an assistant message goes between them")
            user = "\n\n".join([*system, text])
            system = []
        elif role == "assistant":
            if user is None:
                raise InputError(f"{where}: an assistant message should follow a user message")
            turns.append((user, text))
            user = None
        else:
            raise InputError(f"{where}.role should be system, user or assistant, got {str(role)[:40]!r}")
    if user is None:
        raise InputError("the last message should be the user's (the one to answer)")
    return Prompt(_text(user), None, tuple(turns))


def _stops(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not (isinstance(stops, list) and len(stops) <= MAX_STOPS and all(isinstance(s, str) and s for s in stops)):
        raise InputError(f"stop should be a string or a list of at most {MAX_STOPS} non-empty strings")
    return tuple(stops)


# -- answers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    index: int
    text: str
    finish_reason: str  # "stop" (EOS or a stop sequence), "length", or "error"/"cancelled"
    completion_tokens: int
    presto: dict  # the session's summary, as `presto-tui run --json` prints it


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def response(ask: Ask, rid: str, model: str, created: int, choices: list[Choice], prompt_tokens: int) -> dict:
    """The whole answer (no streaming)."""
    rows: list[dict[str, Any]]
    if ask.kind == COMPLETION:
        rows = [{"index": c.index, "text": c.text, "finish_reason": c.finish_reason, "logprobs": None}
                for c in choices]
        obj = "text_completion"
    else:
        rows = [{"index": c.index, "message": {"role": "assistant", "content": c.text},
                 "finish_reason": c.finish_reason, "logprobs": None} for c in choices]
        obj = "chat.completion"
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": rows,
            "usage": usage(prompt_tokens, sum(c.completion_tokens for c in choices)),
            "presto": {"request_id": rid, "ignored": list(ask.ignored), "choices": [c.presto for c in choices]}}


def chunk(ask: Ask, rid: str, model: str, created: int, index: int, *, text: str | None = None,
          finish_reason: str | None = None, presto: dict | None = None, first: bool = False) -> dict:
    """One streamed chunk: the opening one (chat: the assistant's role), or a choice's final text."""
    if ask.kind == COMPLETION:
        row: dict[str, Any] = {"index": index, "text": text or "", "finish_reason": finish_reason, "logprobs": None}
        obj = "text_completion"
    else:
        delta = {"role": "assistant", "content": ""} if first else {"content": text or ""}
        row = {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        obj = "chat.completion.chunk"
    out: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": model, "choices": [row]}
    if presto is not None:
        out["presto"] = presto
    return out


def usage_chunk(ask: Ask, rid: str, model: str, created: int, prompt_tokens: int, completion_tokens: int) -> dict:
    obj = "text_completion" if ask.kind == COMPLETION else "chat.completion.chunk"
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
            "usage": usage(prompt_tokens, completion_tokens)}


def error_object(message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}

