"""`presto-tui eval --frontier`: every method over a range of its budget on one engine, its quality against
its time, the Pareto fronts and the readings at equal quality (presto_tui/eval/frontier.py)."""

from __future__ import annotations

from pathlib import Path

from presto_tui.cli import options as o
from presto_tui.errors import InputError, OutputError
from presto_tui.files import make_folders
from presto_tui.logs.writer import open_trace

SEEDS = o.Limit(1, 100_000, integer=True)
ENUMERABLE_SEEDS = 200  # seeds per prompt on an enumerable model, where each point's law is estimated
PROGRESS_EVERY_S = 10.0  # a log file gets a line every 10 s, not one per session (thousands of them)


def conflicts(flags: dict, *, methods_given: bool, tost: list[str] | None, chains: int, vote: bool,
              concurrency: int) -> None:
    """What --frontier does not combine with, in one line each."""
    if methods_given:
        raise InputError("--frontier lists its own methods: give it instead of --methods")
    if tost:
        raise InputError("--frontier reads its methods against each other on their fronts; it takes no --tost")
    if chains > 1 or vote:
        raise InputError("--frontier runs one chain a session; it does not combine with --chains or --vote")
    if flags.get("workers") is not None or flags.get("ray_address") is not None:
        raise InputError("--frontier times every method on one engine; it does not combine with --workers")
    if concurrency != 1:
        raise InputError("--frontier times one session at a time (--concurrency 1), as the paper measures")


def run_frontier(*, spec: str, seeds: int | None, axis: str = "time", base, items, task_meta: dict, clf, name: str,
                 engine_opts, path: Path | None, out_path: Path, figures: str, json_out: bool, limits, progress_cls,
                 finish, budget_given: bool = True) -> None:
    """Run the frontier's points (parsed before any engine starts) and report; the trace is closed whatever
    happens, and what finished is reported before an engine failure's line."""
    from presto_tui.api.engine import exact_power_law, not_enumerable
    from presto_tui.api.params import BackendName, unknown_choice
    from presto_tui.eval.frontier import COSTS, parse_spec, replicas
    from presto_tui.eval.runner import run_local

    if axis not in COSTS:
        raise InputError(unknown_choice("--frontier-axis", axis, tuple(COSTS)))
    points = parse_spec(spec, base, budget_given=budget_given)
    if seeds is not None:
        SEEDS.check("--frontier-seeds", seeds)
    engine = o.start_engine(name, engine_opts)
    n, alpha = base.max_new_tokens, base.alpha
    why = not_enumerable(engine, n)
    if why is not None and engine_opts.synthetic_vocab is not None:  # asked for the enumerable model
        raise InputError(f"--frontier: {why}")
    laws = None
    if why is None:
        seeds = seeds or ENUMERABLE_SEEDS
        cache: dict[tuple[int, ...], object] = {}
        laws = []
        for it in items:
            ids = tuple(engine.encode_prompt(it.prompt))
            if ids not in cache:
                cache[ids] = exact_power_law(engine, ids, n, alpha)
            laws.append(cache[ids])
    seeds = seeds or 1
    runs = replicas(items, seeds)
    methods = [p.method for p in points]
    writer = open_trace(path, "eval", engine, base)
    with progress_cls(len(runs) * len(methods), every_s=PROGRESS_EVERY_S, graded=laws is None,
                      methods=[p.group for p in points]) as progress:
        ev = finish(writer, lambda: run_local(engine, runs, methods, classifier=clf, trace=writer, limits=limits,
                                              on_end=progress.ended))
    kind = BackendName.of(engine.name)
    meta = {"kind": "frontier", "frontier": spec, "backend": engine.name, "model": engine.model,
            "engine": dict(engine.info), "tasks": task_meta, "seeds": seeds, "shared_params": base.to_dict(),
            "enumerable": laws is not None, "not_enumerable": why, "time_unit": kind.time_unit,
            "virtual_clock": kind.virtual_clock, "axis": axis}
    report(ev, points, seeds, laws, meta, out_path, figures, json_out, writer)
    if ev.failure is not None:
        raise ev.failure
    if ev.interrupted:
        raise KeyboardInterrupt


def report(ev, points, seeds: int, laws, meta: dict, out_path: Path, figures: str, json_out: bool, writer) -> None:
    from presto_tui.errors import describe
    from presto_tui.eval.frontier import COSTS, analyse, point_rows
    from presto_tui.eval.frontier_report import render, save_figure, terminal_figures

    rows = point_rows(ev, points, seeds, laws, int(meta["shared_params"]["seed"]))
    measures = ["tv"] if laws is not None else ["loglik", "confidence", "accuracy",
                                                *(["pass@k", "maj@k"] if seeds > 1 else [])]
    res = {**meta, "interrupted": ev.interrupted, "failure": None if ev.failure is None else describe(ev.failure)[1],
           "points": rows, **analyse(rows, points, measures, COSTS[meta.get("axis", "time")])}
    make_folders(out_path.parent, "results", error=OutputError)  # before the figure, which goes beside it
    saved = save_figure(res, out_path.with_suffix(""), figures)
    res["figure"] = None if saved is None else Path(saved).name  # beside the results: the folder can move
    o.publish(res, out_path, json_out, render, terminal_figures, [saved] if saved else [], writer)
