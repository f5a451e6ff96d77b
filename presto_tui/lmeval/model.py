"""`PrestoLM`: an lm-eval model whose answers are drawn by one presto-tui method.

Importing this module registers the model as "presto-tui" with lm-eval:

    import lm_eval
    import presto_tui.lmeval.model  # noqa: F401 (registers "presto-tui")

    lm_eval.simple_evaluate(model="presto-tui", model_args="method=powermh+stream,steps=8", tasks=[...])

model_args are presto-tui's flags with underscores: `method` (a method spec as in
`presto-tui lm-eval --methods`: lowtemp, bon:N, smc:P, sps:M, SAMPLER or SAMPLER+RULE[:N]),
every sampler flag (alpha, tau, max_new_tokens, block_size, steps, budget, seed, ...),
every engine flag (backend, model, chat_template, dtype, threads, ...), `concurrency`,
`classifier`, `trace` (a path) and `no_trace`.

`generate_until` runs all the requests it is given as concurrent chains on one
engine (enough at once to keep about 64 requests live, as `presto-tui run` does),
every session in one trace, progress on stderr; each answer is the session's final
text (cut at EOS), then cut at the request's `until` stop strings (requests.py).
`loglikelihood` and `loglikelihood_rolling` are refused in one line: they score p0
itself, which power sampling does not change, so lm-eval's own hf or vllm model on
the same weights answers them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (before registering: see below)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from presto_tui.api.engine import RuntimeEngine as Engine
from presto_tui.api.events import cut_at_stop
from presto_tui.api.params import ENGINE_PARAMS, PARAMS, SAMPLER_PARAMS, SamplerParams, unknown_name
from presto_tui.errors import InputError
from presto_tui.lmeval.requests import Ask, ask_params, occurrences, read_ask, request_seed
from presto_tui.safetext import visible

# lm-eval fills its model registry with its own models only when the registry is empty at the first
# look-up, so registering ours first would hide them ("hf", "vllm", "local-completions" unknown in the
# same process): lm_eval.models, imported above, registers them before ours.
MODEL_NAME = "presto-tui"

LOGLIKELIHOOD_REFUSED = (
    "presto-tui answers lm-eval's generate_until requests only; this task asks for log-likelihoods "
    "(output_type {kind}), which score p0 itself and do not depend on the sampling method: run it with "
    "lm-eval's own hf or vllm model on the same weights")
CHAT_TEMPLATE_REFUSED = (
    "presto-tui puts each context through the model's chat template itself (chat_template=true, the default; "
    "false sends it as plain text); run lm-eval without apply_chat_template")

# what lm-eval adds to every model's arguments; nothing here to set
LM_EVAL_EXTRAS = ("batch_size", "max_batch_size", "device")
OWN_TYPES: dict[str, tuple[type, ...]] = {
    "method": (str,), "paper_settings": (bool,), "concurrency": (int,), "classifier": (str,), "trace": (str,),
    "no_trace": (bool,), "chains": (int,), "vote": (bool,),
}
# model_args key -> what it sets: the spec's parameters by name and by request field, and this model's own
ARGS: dict[str, str] = {**{p.name: p.name for p in (*SAMPLER_PARAMS, *ENGINE_PARAMS, PARAMS["backend"])},
                        **{f: p.name for p in SAMPLER_PARAMS for f in (p.request_field, *p.aliases) if f},
                        **{k: k for k in OWN_TYPES}}


def NAMING(name: str) -> str:
    """model_args name their keys as the parameters do."""
    return name


@register_model(MODEL_NAME)
class PrestoLM(LM):
    """An lm-eval model: each generation request is a session of one presto-tui method."""

    def __init__(self, method: str | None = None, **model_args: Any) -> None:
        """Build from lm-eval's model_args (see the module's docstring); starts the engine."""
        super().__init__()
        from presto_tui.api.engine import engine_options, start_engine
        from presto_tui.api.params import load_classifier, params_from, parse_method
        from presto_tui.api.sampling import CONCURRENCY
        from presto_tui.logs.writer import trace_path as checked_trace_path

        flags = _flags(model_args if method is None else {**model_args, "method": method})
        params = params_from(flags, paper=bool(flags.get("paper_settings")), naming=NAMING, strict=True)
        label = flags.get("method")
        if label:
            chosen = parse_method(label, params, "method")
            params, label = chosen.params, chosen.label
        concurrency = flags.get("concurrency")
        if concurrency is not None:
            CONCURRENCY.check("concurrency", concurrency)
        classifier = load_classifier(Path(flags["classifier"]) if flags.get("classifier") else None)
        trace = Path(flags["trace"]) if flags.get("trace") else None
        trace_path = checked_trace_path(trace, bool(flags.get("no_trace")), "lm-eval")
        name, options = engine_options(flags, naming=NAMING)
        engine = start_engine(name, options)
        self._setup(engine, params, label=label or "", max_new_tokens=flags.get("max_new_tokens"),
                    concurrency=concurrency, classifier=classifier, trace=None)
        self._trace_path = trace_path

    @classmethod
    def on_engine(cls, engine: Engine, params: SamplerParams, *, label: str = "", max_new_tokens: int | None = None,
                  concurrency: int | None = None, classifier=None, trace=None) -> PrestoLM:
        """On an engine already started, writing into an open trace (`presto-tui lm-eval` runs every
        method on one engine and one trace this way).  `max_new_tokens`: n for every request (None:
        each request's max_gen_toks)."""
        lm = cls.__new__(cls)
        LM.__init__(lm)
        lm._setup(engine, params.validate(), label=label, max_new_tokens=max_new_tokens, concurrency=concurrency,
                  classifier=classifier, trace=trace)
        return lm

    def _setup(self, engine: Engine, params: SamplerParams, *, label: str, max_new_tokens: int | None,
               concurrency: int | None, classifier, trace) -> None:
        self.engine, self.params, self.label = engine, params, label or params.sampler
        self.max_new_tokens, self.concurrency, self.classifier = max_new_tokens, concurrency, classifier
        self.trace = trace
        self._trace_path = None  # set where this model opens its own trace
        self.summaries: list = []  # every finished session's SessionSummary, in request order per call

    # -- lm-eval's interface ----------------------------------------------------------------
    def generate_until(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[str]:
        """Every request a session of this model's method, all on one engine; the answers in order."""
        if not requests:
            return []
        asks = [read_ask(*_arguments(r), where=_where(r)) for r in requests]
        self._warn_ignored(asks)
        prompts = [self._encode(a, _where(r)) for a, r in zip(asks, requests)]
        sessions = self._session_params(asks, prompts, [_where(r) for r in requests])
        texts = self._run(asks, prompts, sessions)
        return [cut_at_stop(t, a.until)[0] for t, a in zip(texts, asks)]

    def loglikelihood(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        raise InputError(LOGLIKELIHOOD_REFUSED.format(kind="loglikelihood or multiple_choice"))

    def loglikelihood_rolling(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[float]:
        raise InputError(LOGLIKELIHOOD_REFUSED.format(kind="loglikelihood_rolling"))

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        raise InputError(CHAT_TEMPLATE_REFUSED)

    def get_model_info(self) -> dict:
        """Recorded by lm-eval in its results' config."""
        return {"presto_tui": {"method": self.label, "params": self.params.to_dict(), "backend": self.engine.name,
                               "model": self.engine.model}}

    def close(self) -> None:
        """Close the trace this model opened itself (every line is on disk already)."""
        if self.trace is not None and self._trace_path is not None:
            self.trace.close()

    # -- the parts -------------------------------------------------------------------------
    def _encode(self, ask: Ask, where: str) -> list[int]:
        ids = self.engine.encode_prompt(ask.context)
        if not ids:
            raise InputError(f"{where}: the context is empty")
        return ids

    def _session_params(self, asks: list[Ask], prompts: list[list[int]], wheres: list[str]) -> list[SamplerParams]:
        """Each request's parameters (its n, its own seed), all checked before any session starts."""
        from presto_tui.api.sessions import check_context

        out = []
        for ask, ids, seen, where in zip(asks, prompts, occurrences([a.context for a in asks]), wheres):
            p = ask_params(self.params, ask.max_gen_toks, self.max_new_tokens, where)
            p = p.with_(seed=request_seed(self.params.seed, ask.context, seen))
            try:
                check_context(self.engine, len(ids), p)
            except InputError as e:
                raise InputError(f"{where}: {e.line}") from None
            out.append(p)
        return out

    def _run(self, asks: list[Ask], prompts: list[list[int]], sessions: list[SamplerParams]) -> list[str]:
        from presto_tui.api.events import SessionEnd, SessionSummary
        from presto_tui.api.sampling import Job, stream_jobs
        from presto_tui.api.sessions import InternalError, default_concurrency, display_text
        from presto_tui.console import SessionProgress, term
        from presto_tui.logs.writer import recorded

        engine = self.engine
        trace = self._open_trace()
        at_once = self.concurrency or default_concurrency(len(asks), self.params)
        jobs = [Job(a.context, p, 1, ids) for a, ids, p in zip(asks, prompts, sessions)]
        texts: list[str | None] = [None] * len(asks)
        summaries = [SessionSummary() for _ in asks]
        progress = SessionProgress(len(asks), "lm-eval")
        progress.doing(f"{self.label}, {at_once} at once")
        try:
            with progress:
                for i, ev in recorded(stream_jobs(engine, jobs, concurrency=at_once, classifier=self.classifier),
                                      trace):
                    summaries[i - 1].update(ev)  # (sessions numbered from 1)
                    if isinstance(ev, SessionEnd):
                        texts[i - 1] = ev.text
                        progress.advance()
        except KeyboardInterrupt:
            if trace is not None:  # the trace keeps every finished session and ends the others cancelled
                trace.end_open_session("cancelled", lambda ids: display_text(engine, ids))
            raise
        finally:
            if trace is not None and self._trace_path is not None:
                print(f"presto-tui: trace written to {visible(str(trace.path), keep_newlines=False)}",
                      file=term())
        self.summaries.extend(summaries)
        missing = [i for i, t in enumerate(texts) if t is None]
        if missing:  # run_chains raises when a session fails; every other session ends with its text
            raise InternalError(f"{len(missing)} request(s) ended without an answer")
        return [t or "" for t in texts]

    def _open_trace(self):
        """The trace: the one given (`on_engine`), or this model's own, opened at its first use."""
        if self.trace is None and self._trace_path is not None:
            from presto_tui.logs.writer import open_trace

            self.trace = open_trace(self._trace_path, "lm-eval", self.engine, self.params)
            weakref.finalize(self, self.trace.close)
        return self.trace

    def _warn_ignored(self, asks: list[Ask]) -> None:
        names = sorted({k for a in asks for k in a.ignored} - _WARNED)
        if names:
            from presto_tui.console import term

            _WARNED.update(names)
            print(f"presto-tui: warning: lm-eval's generation settings {', '.join(names)} do not apply to power "
                  "sampling (the method's law is set by alpha and tau) and are ignored", file=term())


_WARNED: set[str] = set()  # the settings named in a warning already (once per process, not per method)


def _arguments(request: Any) -> tuple[Any, Any]:
    args = request.args if hasattr(request, "args") else request
    if not isinstance(args, tuple) or len(args) < 2:
        raise InputError(f"{_where(request)}: a generate_until request carries (context, generation settings)")
    return args[0], args[1]


def _where(request: Any) -> str:
    task, doc = getattr(request, "task_name", None), getattr(request, "doc_id", None)
    if task is None:
        return "lm-eval request"
    return f"lm-eval task {visible(str(task), keep_newlines=False)}" + (f", doc {doc}" if doc is not None else "")


def _flags(model_args: dict[str, Any]) -> dict[str, Any]:
    """presto-tui's values from lm-eval's model_args (typed by lm-eval's own parser): every sampler and
    engine parameter of the specification (by its name, or its request field: `rank`, `max_tokens`)
    and this model's own arguments; checked on the one validation path (`params_from`)."""
    flags: dict[str, Any] = {}
    for key, value in model_args.items():
        if key in LM_EVAL_EXTRAS or value is None:
            continue
        name = ARGS.get(key)
        if name is None:
            raise InputError(unknown_name("model_args key", key, ARGS))
        if name in OWN_TYPES:
            types = OWN_TYPES[name]
            if (bool not in types and isinstance(value, bool)) or not isinstance(value, types):
                raise InputError(f"model_args {key} should be {' or '.join(t.__name__ for t in types)}, got "
                                 f"{str(value)!r}")
        flags[name] = value
    return flags
