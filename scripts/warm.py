"""Ready what the tests' first engines would otherwise make on a fresh clone: the embedded model in
float32 safetensors (presto-tui's cache) and the bytecode of the packages the tests import, in their
own processes too (vLLM's engine core and workers, Ray's, a notebook's kernel).

`scripts/check.sh` runs it in the background while lint and the type check keep one core busy, with
PYTHONPYCACHEPREFIX set as the tests will have it, so the bytecode it writes is the bytecode they read.
Best effort: what cannot be had here (a package not installed) is left to the tests, which say why.
"""

from __future__ import annotations

import importlib
import signal
import sys

# The heaviest first: the model's conversion imports torch and transformers, then vLLM's processes.
MODULES = (
    "vllm.v1.engine.core", "vllm.v1.engine.llm_engine", "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.cpu_worker",
    "ray", "ray.dashboard.head", "ray.dashboard.agent",
    "lm_eval.evaluator", "ipykernel.kernelapp", "nbclient",
    "presto_tui.cli", "presto_tui.views.app", "presto_tui.serve.app", "textual_serve.server",
    "playwright.sync_api", "arviz_base", "arviz_stats", "arviz_plots", "statsmodels.api", "sklearn.linear_model",
    "matplotlib.pyplot",
)


def main() -> int:
    # check.sh stops it with SIGTERM where the checks end first: as an exit, so a conversion under way
    # removes its half-written folder
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from presto_tui.runtime.engines.models import resolve

    try:
        resolve(None, quiet=True)
    except Exception as e:  # the tests that need the model say it better
        print(f"warm: the embedded model: {type(e).__name__}: {e}", file=sys.stderr)
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:
            print(f"warm: {name}: {type(e).__name__}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
