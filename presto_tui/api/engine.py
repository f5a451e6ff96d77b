"""An engine on a model: started once, used for many prompts.

    import presto_tui

    engine = presto_tui.Engine()                                  # vLLM on the embedded SmolLM2-135M
    engine = presto_tui.Engine("Qwen/Qwen3-8B", dtype="bfloat16")  # a hub id, from the local cache
    engine = presto_tui.Engine(backend="synthetic")               # the tiny model of the tests

A model is the embedded default, a local Hugging Face folder, a `.gguf` file or a Hugging
Face hub id (`org/name`: looked up in the local Hugging Face cache, downloaded into it
where a network allows; offline, one line names the id and the cache).  The options are
the engine parameters of the specification (`dtype`, `threads`, `max_model_len`, ...);
each backend takes its own (`BackendName.flags`) and refuses the others.

An engine is not thread-safe: one run at a time uses it (`sample`, `stream` and `session`
take its lock).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from presto_tui.runtime.core.engine import Engine as RuntimeEngine
from presto_tui.runtime.core.names import BackendName
from presto_tui.runtime.core.spec import PARAMS, Naming, flag
from presto_tui.runtime.engines.models import EMBEDDED, cache_dir, hub_cache, hub_dataset, is_hub_id
from presto_tui.runtime.engines.registry import BACKENDS, EngineOptions, default_backend, start_engine
from presto_tui.runtime.engines.synthetic import ResponseLaw

__all__ = ["BACKENDS", "EMBEDDED", "Engine", "EngineOptions", "ResponseLaw", "RuntimeEngine", "cache_dir",
           "default_backend", "engine_options", "exact_power_law", "hub_cache", "hub_dataset", "is_hub_id",
           "not_enumerable", "start_engine"]


def not_enumerable(engine: Any, n: int) -> str | None:
    """Why pi_alpha over `engine`'s responses of n tokens cannot be computed exactly (None: it can:
    the synthetic engine on a model without EOS and with few enough responses)."""
    check = getattr(_runtime(engine), "not_enumerable", None)
    return f"the {engine.name} engine's model cannot be enumerated" if check is None else check(n)


def exact_power_law(engine: Any, prompt_ids: Sequence[int], n: int, alpha: float) -> ResponseLaw:
    """pi_alpha ∝ p0^alpha over every response of n tokens after `prompt_ids`, exactly (`ResponseLaw`);
    ValueError where `not_enumerable` says why not."""
    why = not_enumerable(engine, n)
    if why is not None:
        raise ValueError(why)
    return _runtime(engine).power_law(prompt_ids, n, alpha)


def _runtime(engine: Any) -> Any:
    return engine.runtime if isinstance(engine, Engine) else engine


def engine_options(values: Mapping[str, Any], naming: Naming = flag) -> tuple[str, EngineOptions]:
    """The backend `values` name (the default one where none) and its options, read and checked on
    the one validation path; nothing starts."""
    backend = values.get("backend")
    name = PARAMS["backend"].read(backend, naming)["backend"] if backend is not None else default_backend()
    return name, EngineOptions.from_values(values, naming, name).check(name, naming)


class Engine:
    """A model on an engine (see the module's docstring).  `runtime` is the engine the samplers drive."""

    def __init__(self, model: str | None = None, *, backend: str | None = None, **options: Any) -> None:
        name, opts = engine_options({"backend": backend, "model": model, **options})
        self.runtime: RuntimeEngine = start_engine(name, opts)
        self.options = opts
        self.lock = threading.Lock()

    @classmethod
    def wrap(cls, runtime: RuntimeEngine) -> Engine:
        """An Engine around an engine already started (the front-ends start theirs with a spinner)."""
        engine = cls.__new__(cls)
        engine.runtime, engine.options, engine.lock = runtime, EngineOptions(), threading.Lock()
        return engine

    # -- what it is ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.runtime.name

    @property
    def model(self) -> str:
        return self.runtime.model

    @property
    def info(self) -> dict:
        return dict(self.runtime.info)

    @property
    def capabilities(self) -> BackendName:
        """What the backend can do: `virtual_clock`, `builtin_model`, `thread_control`, `flags`."""
        return BackendName.of(self.runtime.name)

    def encode(self, prompt: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Prompt ids as every command sends them (through the model's chat template where it has one)."""
        return list(self.runtime.encode_prompt(prompt, history))

    def decode(self, tokens: Sequence[int]) -> str:
        from presto_tui.runtime.session.driver import display_text

        return display_text(self.runtime, tokens)

    # -- sampling (presto_tui.api.sampling) -------------------------------------------------
    def sample(self, prompts: str | Sequence[str], params: Any = None, **kw: Any) -> list:
        """`presto_tui.sample` on this engine: a list of `Result`, one per prompt."""
        from presto_tui.api.sampling import sample

        return sample(self, prompts, params, **kw)

    def stream(self, prompts: str | Sequence[str], params: Any = None, **kw: Any):
        """`presto_tui.stream` on this engine: every (session number from 1, event) as it happens."""
        from presto_tui.api.sampling import stream

        return stream(self, prompts, params, **kw)

    def session(self, prompt: str, params: Any = None, **kw: Any):
        """A `Session` of one prompt: `async for` its events, `cancel()` it, await its `result()`."""
        from presto_tui.api.sampling import Session

        return Session(self, prompt, params, **kw)

    def close(self) -> None:
        """Let the engine go (its memory returns once nothing else holds it)."""
        import gc

        self.runtime = None  # type: ignore[assignment]
        gc.collect()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.runtime is None:
            return "Engine(closed)"
        return f"Engine({self.model!r}, backend={self.name!r})"


def model_label(model: str | None) -> str:
    return model or EMBEDDED


def default_cache() -> Path:
    return cache_dir()
