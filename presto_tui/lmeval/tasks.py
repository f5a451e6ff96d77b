"""Finding and checking lm-eval tasks before any engine starts.

A task is named as lm-eval names it (a task, group or tag) or by its YAML file;
`--include-path` adds a folder of task YAMLs (a local JSON or JSONL dataset needs
nothing downloaded).  Indexing lm-eval's own thousands of task files takes seconds,
so when every name is found in the include path alone the index is built from it
only: the same tasks, since lm-eval lets an include path override its own.

Every task must ask for generations: a log-likelihood task is refused here, naming
it, rather than after the engine has started.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from lm_eval.tasks import TaskManager

from presto_tui.api.params import SamplerParams
from presto_tui.errors import InputError, describe
from presto_tui.lmeval.requests import ask_params, read_ask
from presto_tui.safetext import visible

GENERATE = "generate_until"


def task_names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InputError("--tasks needs at least one lm-eval task name (or a task's YAML file)")
    return names


def task_manager(names: Sequence[str], include_path: Path | None) -> TaskManager:
    """lm-eval's task index for `names` (only the include path's when that holds them all)."""
    if include_path is not None:
        if not include_path.is_dir():
            raise InputError(f"--include-path {visible(str(include_path), keep_newlines=False)}: not a folder of "
                             "task YAML files")
        local = _index(str(include_path), include_defaults=False)
        if all(_known(local, n) for n in names):
            return local
    manager = _index(str(include_path) if include_path is not None else None, include_defaults=True)
    for n in names:
        if not _known(manager, n):
            close = get_close_matches(n, manager.all_tasks, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else (
                " (a local task's YAML goes in a folder given with --include-path)")
            raise InputError(f"--tasks: unknown lm-eval task {visible(n, keep_newlines=False)!r}{hint}")
    return manager


def _index(include_path: str | None, include_defaults: bool) -> TaskManager:
    try:
        return TaskManager(include_path=include_path, include_defaults=include_defaults)
    except Exception as e:  # a YAML lm-eval cannot read
        raise InputError(f"--include-path: lm-eval could not index the tasks there ({describe(e)[1]})") from None


def _known(manager: TaskManager, name: str) -> bool:
    return name in manager.all_tasks or (name.endswith((".yaml", ".yml")) and Path(name).is_file())


def check_tasks(manager: TaskManager, names: Sequence[str], methods: Sequence[SamplerParams],
                max_new_tokens: int | None) -> dict[str, Any]:
    """Load the tasks (their datasets too) and refuse, naming the task, any that asks for log-likelihoods
    or whose generation settings no method can run with (a block size that does not divide its
    max_gen_toks, ...).  Returns lm-eval's task objects by name."""
    loaded: dict[str, Any] = {}
    for name in names:
        try:
            loaded.update(manager.load([name])["tasks"])
        except Exception as e:  # a dataset that is not there, a template that does not render, ...
            raise InputError(f"--tasks: lm-eval could not load {visible(name, keep_newlines=False)!r} "
                             f"({describe(e)[1]})") from None
    for task_name, task in loaded.items():
        where = f"lm-eval task {visible(task_name, keep_newlines=False)}"
        kind = task.get_config("output_type")
        if kind != GENERATE:
            from presto_tui.lmeval.model import LOGLIKELIHOOD_REFUSED

            raise InputError(f"{where}: " + LOGLIKELIHOOD_REFUSED.format(kind=kind))
        ask = read_ask("", task.get_config("generation_kwargs") or {}, where)
        for params in methods:
            ask_params(params, ask.max_gen_toks, max_new_tokens, where)
    return loaded
