"""`presto-tui bench`: each sampler against its PreSTO variants in one run (paper sec 5, D.2).

With decision-keyed inputs every PreSTO variant must end in the same state as its
sequential sampler: the table says whether it did.  Prompts are the outer loop
and samplers the inner one, so that drift on a shared machine hits every sampler
alike; only ratios from one run are meaningful.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich import box
from rich.console import Console
from rich.table import Table

from presto_tui.api.engine import RuntimeEngine as Engine
from presto_tui.api.events import Request, SessionEnd, SessionSummary, limits
from presto_tui.api.params import (
    BENCH_SIZES,
    BUDGET_LIMIT,
    BackendName,
    CertaintyClassifier,
    Group,
    InputMode,
    PrefetchRule,
    SamplerParams,
    find_method,
    load_classifier,
    method_names,
    read_budget,
    unknown_choice,
)
from presto_tui.api.sampling import Job, stream_jobs
from presto_tui.api.sessions import StepCost, display_text
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.console import SessionProgress
from presto_tui.errors import InputError
from presto_tui.files import output_path
from presto_tui.logs import critical
from presto_tui.logs.writer import TraceWriter, default_trace_path, open_trace

# sampler, rule ("none": sequential), budget as given (8, auto, fill:8; stream: /what it speculates, 8/none)
Config = tuple[str, str, str | None]


SEQUENTIAL = PrefetchRule.NONE.value
THROUGHPUT, DATA_PARALLEL = "throughput", "data parallel"  # the progress line's names of the last two tables


def is_chain(sampler: str) -> bool:
    """Whether `sampler` (a name --samplers has checked) is an MH chain method."""
    m = find_method(sampler)
    return m is not None and m.chain


def configs(samplers: list[str], rules: list[str], budgets: list[str]) -> list[Config]:
    """Each MH sampler sequentially, then under every rule and budget (auto and fill:N are the streaming
    rule's own: the round rules take plain N only); a baseline once, on its own."""
    out: list[Config] = []
    for smp in samplers:
        out.append((smp, SEQUENTIAL, None))
        if is_chain(smp):
            out += [(smp, r, b) for r in rules for b in budgets if r == PrefetchRule.STREAM or b.isdigit()]
    return out


def label(sampler: str, rule: str, budget: str | None) -> str:
    if not is_chain(sampler):
        return sampler
    return f"{sampler} " + ("seq" if rule == SEQUENTIAL else f"{rule} {budget}")


def engine_probe(backend: Engine, prompt_ids: list[int], length: int, batch: int = 20) -> dict:
    """Time of one batch of `batch` suffixes against one suffix of the same length."""
    one = [Request(tuple(prompt_ids), length, 7, 0.25)]
    many = [Request(tuple(prompt_ids), length, 100 + i, 0.25) for i in range(batch)]
    backend.generate(one)  # warm caches and kernels
    t0 = backend.clock()
    backend.generate(one)
    t1 = backend.clock()
    backend.generate(many)
    t2 = backend.clock()
    return {"suffix_tokens": length, "batch": batch, "one_s": t1 - t0, "batch_s": t2 - t1,
            "ratio": (t2 - t1) / (t1 - t0) if t1 > t0 else None}


def session_limit(s: SessionSummary, speed: tuple[float | None, float | None]) -> float | None:
    """The binding limit (dependency or compute, limit.py) of a session's trajectory, in seconds, with
    the engine's single-request step time and best throughput measured over the whole bench."""
    if not s.path or not s.transitions:
        return None
    return limits(s.path, *speed).best


def engine_speed(probe: dict, sessions: list[SessionSummary]) -> tuple[float | None, float | None]:
    """(single-request step time, best throughput in tokens per second) measured in this bench: the
    probe's single suffix and its batch, and every session's own step costs (the best of them)."""
    single = probe["one_s"] / probe["suffix_tokens"] if probe.get("one_s") else None
    rates = [probe["batch"] * probe["suffix_tokens"] / probe["batch_s"]] if probe.get("batch_s") else []
    rates += [s.engine_cost.best_rate for s in sessions if s.engine_cost is not None]
    return single, max(rates) if rates else None


def limit_table(results: dict[Config, list[SessionSummary]], speed: tuple[float | None, float | None]) -> list[dict]:
    """Per MH sampler: the dependency and compute limits of its sequential trajectories (every exact
    rule walks the same ones), as means over the prompts."""
    out = []
    for (sampler, rule, _), rows in results.items():
        if rule != SEQUENTIAL or not is_chain(sampler):
            continue
        lims = [limits(r.path, *speed) for r in rows if r.path and r.transitions]
        if not lims:
            continue
        out.append({"sampler": sampler, "dependency_steps": statistics.mean(x.steps for x in lims),
                    "dependency_s": _mean([x.seconds for x in lims]),
                    "compute_s": _mean([x.compute_seconds for x in lims]),
                    "limit_s": _mean([x.best for x in lims]),
                    "useful_tokens": statistics.mean(x.useful_tokens for x in lims)})
    return out


def aggregate(rows: list[SessionSummary], seq: list[SessionSummary] | None,
              speed: tuple[float | None, float | None] = (None, None)) -> dict:
    """One row of the table: means over sessions; speedup = the sequential sampler's mean time
    producing transitions over this row's (`transition_time_s`, extensions left out), measured on
    the same prompts and seeds (paper eq. 20, in wall time so that streaming, which has no calls,
    compares too); speedup_ext the same over each session's whole time from its start, block
    extensions included (`wall_s`: what `run` and `stats` report, and what several blocks
    change); limit_share: the trajectory's binding limit over that time (1.0: as fast as any exact
    chain could be)."""
    walking = statistics.mean(r.transition_time_s for r in rows)
    total = statistics.mean(r.wall_s for r in rows)
    calls = sum(r.calls for r in rows)
    seq_walking = statistics.mean(r.transition_time_s for r in seq) if seq else None
    seq_total = statistics.mean(r.wall_s for r in seq) if seq else None
    shares = [lim / r.engine_time_s for r in rows
              if (lim := session_limit(r, speed)) is not None and r.engine_time_s]
    live = [r.mean_live for r in rows if r.mean_live is not None]
    firsts = [r.first_transition_s for r in rows if r.first_transition_s is not None]
    paths = [cp for r in rows if (cp := r.critical_path) is not None]
    return {
        "sessions": len(rows),
        "calls_per_prompt": statistics.mean(r.calls for r in rows),
        "transitions_per_call": statistics.mean(r.transitions_per_call for r in rows),
        "time_per_call_s": sum(r.call_time_s for r in rows) / calls if calls else 0.0,
        "call_time_s": statistics.mean(r.call_time_s for r in rows),
        "wall_s": total,
        "transition_time_s": walking,
        "wall_per_transition_s": statistics.mean(r.wall_per_transition_s for r in rows),
        "transitions_per_s": statistics.mean(r.transitions_per_s for r in rows),
        "speedup": (seq_walking / walking) if seq_walking and walking else None,
        "engine_time_s": total,
        "speedup_ext": (seq_total / total) if seq_total and total else None,
        "limit_share": statistics.mean(shares) if shares else None,
        "speedup_estimate": _mean([r.speedup_estimate for r in rows]),
        "tokens_generated": statistics.mean(r.proposal_tokens for r in rows),
        "wasted_share": statistics.mean(r.wasted_share for r in rows),
        "requests_issued": statistics.mean(r.requests_issued for r in rows),
        "requests_realized": statistics.mean(r.work_transitions for r in rows),
        # an MH chain's or a population's row (its rates and waste mean something), not a one-shot method's
        "mh": any(not r.one_shot or r.population for r in rows),
        "requests_aborted": statistics.mean(r.requests_aborted for r in rows),
        "mean_live_requests": statistics.mean(live) if live else None,
        "time_to_first_transition_s": statistics.mean(firsts) if firsts else None,
        "acceptance_rate": statistics.mean(r.acceptance_rate for r in rows),
        "eps_certain_share": statistics.mean(r.eps_certain_share for r in rows),
        # where the time went (critpath.py), means over the sessions that carry it
        "critical_path": critical.mean_path([cp.to_dict() for cp in paths]) if paths else None,
    }


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.mean(vals) if vals else None


def throughput(backend: Engine, base: SamplerParams, cfgs: list[Config], prompts: list[str], levels: list[int],
               classifier: CertaintyClassifier | None, trace: TraceWriter | None,
               progress: SessionProgress, done: dict | None = None, record=None) -> list[dict]:
    """At each concurrency C of `levels`, every config of `cfgs` (the sequential sampler first) on the same
    prompts and seeds with C chains at once on the engine, one config after another (interleaved: drift on
    a shared machine hits each C's rows alike): prompts per minute and transitions per second in engine
    time, each over the sequential sampler batched across the same C chains (`x_seq`) and over its own
    C = `levels[0]` (`x_c1`), the engine's mean live requests, whether every chain ended where the
    sequential one did, and the critical path per prompt (its `width` and `budget` count the other
    chains' requests: every engine step is the engine's, whoever's requests it held).  With fewer prompts
    than the largest C, the prompts are taken again in turn with the next seeds, so that every level has
    work for all its chains (`throughput_jobs`).  `done`: a resumed run's rows, by (C, label), taken as
    they are; `record(line)`: each new row's run-log line."""
    rows: list[dict] = []
    jobs = throughput_jobs(prompts, levels)
    for c in levels:
        seq: dict[str, Any] | None = None
        for cfg in cfgs:
            params = row_params(base, *cfg)
            if done and (c, label(*cfg)) in done:  # measured before the run was cut: as it was
                kept: dict[str, Any] = dict(done[(c, label(*cfg))])
                seq = seq or kept
                kept["x_seq"] = _over(kept["prompts_per_min"], seq["prompts_per_min"])
                kept["same_final_state_as_sequential"] = None if kept is seq else kept["tokens"] == seq["tokens"]
                rows.append(kept)
                continue
            progress.doing(f"throughput {label(*cfg)}, {c} chain(s)")
            sums = [SessionSummary() for _ in jobs]
            t0, e0 = time.perf_counter(), backend.clock()
            cost = StepCost()  # this row's own engine loop's: its mean live requests
            for i, ev in stream_jobs(backend, [Job(p, params.with_(seed=seed)) for p, seed in jobs], concurrency=c,
                                     classifier=classifier, trace=trace, cost=cost):
                sums[i - 1].update(ev)  # (sessions numbered from 1)
                if isinstance(ev, SessionEnd):
                    progress.advance(THROUGHPUT)
            wall, engine_s = time.perf_counter() - t0, backend.clock() - e0
            paths = [cp for s in sums if (cp := s.critical_path) is not None]
            row: dict[str, Any] = {
                   "concurrency": c, "label": label(*cfg), "sampler": cfg[0], "rule": cfg[1], "budget": cfg[2],
                   "prompts": len(jobs), "wall_s": wall, "engine_s": engine_s,
                   "prompts_per_min": 60 * len(jobs) / engine_s if engine_s else None,
                   "transitions_per_s": sum(s.transitions for s in sums) / engine_s if engine_s else None,
                   "mean_live_requests": cost.mean_live,
                   "tokens": [list(s.tokens) for s in sums],
                   "critical_path": critical.mean_path([cp.to_dict() for cp in paths]) if paths else None}
            if record is not None:
                record({"kind": "throughput", "concurrency": c, "row": label(*cfg), "result": dict(row)})
            if seq is None:
                seq = row
            row["x_seq"] = _over(row["prompts_per_min"], seq["prompts_per_min"])
            row["same_final_state_as_sequential"] = None if row is seq else row["tokens"] == seq["tokens"]
            rows.append(row)
    first = {r["label"]: r["prompts_per_min"] for r in rows if r["concurrency"] == levels[0]} if levels else {}
    for r in rows:
        r["x_c1"] = _over(r["prompts_per_min"], first.get(r["label"]))
        del r["tokens"]
    return rows


def throughput_jobs(prompts: list[str], levels: list[int]) -> list[tuple[str, int]]:
    """(prompt, seed) of each chain of the throughput table: every prompt once (seed 0), and, while there
    are fewer than the largest concurrency, the prompts again in turn with seeds 1, 2, ..."""
    n = max(len(prompts), max(levels, default=1))
    return [(prompts[i % len(prompts)], i // len(prompts)) for i in range(n)]


def _over(x: Any, y: Any) -> float | None:
    """x / y, where both are there."""
    return x / y if x and y else None


def data_parallel(cluster_of, workers: int, params: SamplerParams, prompts: list[str], concurrency: int,
                  classifier: CertaintyClassifier | None, progress: SessionProgress) -> dict:
    """Prompts per minute with 1 and with `workers` Ray workers (one engine each), and Ray's start-up."""
    rows = []
    for w in sorted({1, workers}):
        progress.doing(f"data parallel, {w} Ray worker(s)")
        t0 = time.perf_counter()
        with cluster_of(w) as cluster:
            started = time.perf_counter() - t0
            t1 = time.perf_counter()
            for _, ev in cluster.run(prompts, params, classifier):
                if isinstance(ev, SessionEnd):
                    progress.advance(DATA_PARALLEL)
            wall = time.perf_counter() - t1
        rows.append({"workers": w, "start_s": started, "wall_s": wall, "prompts_per_min": 60 * len(prompts) / wall})
    for r in rows:
        r["ratio"] = r["prompts_per_min"] / rows[0]["prompts_per_min"]
    return {"rule": params.prefetch, "budget": params.budget, "concurrency": concurrency, "rows": rows}


def run_prompt(backend: Engine, params: SamplerParams, prompt: str, ids: list[int], chains: int,
               classifier: CertaintyClassifier | None, trace: TraceWriter | None,
               only: tuple[int, ...] | None = None, on_end=None) -> dict[int, SessionSummary]:
    """A prompt's `chains` chains (`only`: just these), all at once on the engine (one chain: the single
    session), by chain; `on_end(chain, events)` as each ends (its run-log record)."""
    which = list(only) if only is not None else list(range(chains))
    summaries = {c: SessionSummary() for c in which}
    events: dict[int, list] = {c: [] for c in which}
    for i, ev in stream_jobs(backend, [Job(prompt, params, chains, ids, only)], concurrency=len(which),
                             classifier=classifier, trace=trace):
        c = which[i - 1]  # (sessions numbered from 1, over the chains run)
        summaries[c].update(ev)
        if on_end is not None:
            events[c].append(ev)
            if isinstance(ev, SessionEnd):
                on_end(c, events.pop(c))
    return summaries


def mixing(reports: list) -> dict:
    """A row's diagnostics over its prompts (--chains M): the worst R-hat and bulk ESS of the
    log-target (first block), the prompts warned about, and the mean share of the agreed answer."""
    first = [next((d for d in r.diagnostics if d.quantity == "log_target" and d.block == 1), None) for r in reports]
    rhats = [d.rhat for d in first if d is not None and d.rhat is not None]
    esses = [d.ess_bulk for d in first if d is not None and d.ess_bulk is not None]
    return {"rhat_max": max(rhats, default=None), "ess_bulk_min": min(esses, default=None),
            "prompts_warned": sum(bool(r.warnings) for r in reports),
            "agreement": statistics.mean(r.vote.share for r in reports) if reports else None}


def row_params(base: SamplerParams, sampler: str, rule: str, budget: str | None, seed: int = 0) -> SamplerParams:
    """A row's parameters: the sequential reference, spine and stream always run on decision
    inputs (the only inputs they take); bfs and predictive on the inputs asked for."""
    node_inputs = PrefetchRule.of(rule).node_inputs
    size, _, speculate = (budget or "").partition("/")
    sized = read_budget("--budgets", size) if size else {}
    if speculate:
        sized["speculate"] = speculate.replace("+", ",")
    return base.with_(sampler=sampler, prefetch=rule, seed=seed, **sized,
                      inputs=base.inputs if node_inputs else InputMode.DECISION.value)


def run_bench(backend: Engine, base: SamplerParams, prompts: list[str], *, rules: list[str],
              budgets: list[str], samplers: Sequence[str] = ("powermh",), seeds: int = 1,
              classifier: CertaintyClassifier | None = None, trace: TraceWriter | None = None,
              output: Path, json_out: bool = False, concurrency_levels: Sequence[int] = (),
              throughput_rules: Sequence[str] = (PrefetchRule.STREAM.value,), workers: int = 0, cluster_of=None,
              chains: int = 1, selection=None, log=None, records: Sequence[dict] = ()) -> None:
    """The benchmark's tables; `log`: the run log each finished session (and throughput row) goes to;
    `records`: a resumed run's (those do not run again)."""
    from presto_tui.api.diagnostics import ALL, chains_report
    from presto_tui.eval.resume import encode_events, restore

    selection = selection or ALL
    shown = log.shown if log is not None else "run log"
    done = {(r["prompt"], r["seed"], r["row"], r["chain"]): (n, r) for n, r in enumerate(records, start=2)
            if r.get("kind") == "session"}
    done_rows = {(r["concurrency"], r["row"]): r["result"] for r in records if r.get("kind") == "throughput"}
    done_dp = next((r["result"] for r in records if r.get("kind") == "data_parallel"), None)

    def record(r: dict) -> None:
        if log is not None:
            log.write(r)

    def restored(*key) -> SessionSummary:  # a session of the run log, folded again from its events
        n, r = done[key]
        return restore(shown, n, r.get("events") or [])

    err = Console(file=o.term(), highlight=False)
    cfgs = configs(list(samplers), rules, budgets)
    results: dict[Config, list[SessionSummary]] = {c: [] for c in cfgs}
    reports: dict[Config, list] = {c: [] for c in cfgs}  # --chains M: per prompt and seed
    same_as_seq: dict[Config, bool] = {c: True for c in cfgs}
    cache0 = backend.prefix_cache_stats()
    # the throughput table: the sequential sampler batched, then each throughput rule at every budget
    tp_cfgs = configs([base.sampler], list(throughput_rules), budgets)
    tp_chains = len(throughput_jobs(prompts, list(concurrency_levels))) if concurrency_levels else 0
    total = (len(prompts) * (seeds * len(cfgs) * chains + (len({1, workers}) if workers else 0))
             + tp_chains * len(concurrency_levels) * len(tp_cfgs))
    t_start = time.perf_counter()
    tp_rows: list[dict] = []
    dp: dict | None = None
    tp_params = row_params(base, *tp_cfgs[1]) if len(tp_cfgs) > 1 else row_params(base, *tp_cfgs[0])
    try:
        per = {label(*c): len(prompts) * seeds * chains for c in cfgs}
        finished = {lab: sum(1 for k in done if k[2] == lab) for lab in per}
        if concurrency_levels:
            per[THROUGHPUT] = tp_chains * len(concurrency_levels) * len(tp_cfgs)
            finished[THROUGHPUT] = tp_chains * len(done_rows)
        if workers:
            per[DATA_PARALLEL] = len(prompts) * len({1, workers})
            finished[DATA_PARALLEL] = per[DATA_PARALLEL] if done_dp is not None else 0
        with SessionProgress(total, "bench", err, per=per, done=finished) as progress:
            for p_i, prompt in enumerate(prompts):
                ids = backend.encode_prompt(prompt)
                for seed in range(seeds):
                    seq_tokens = {}
                    for cfg in cfgs:
                        sampler, rule, budget = cfg
                        params = row_params(base, sampler, rule, budget, seed)
                        progress.doing(f"{label(*cfg)}, prompt {p_i + 1}/{len(prompts)}"
                                       + (f", seed {seed + 1}/{seeds}" if seeds > 1 else ""))
                        lab = label(*cfg)
                        group_of = {c: restored(p_i, seed, lab, c) for c in range(chains)
                                    if (p_i, seed, lab, c) in done}
                        missing = tuple(c for c in range(chains) if c not in group_of)
                        if missing:
                            group_of.update(run_prompt(
                                backend, params, prompt, ids, chains, classifier, trace,
                                only=missing if len(missing) < chains else None,
                                on_end=lambda c, evs, p_i=p_i, seed=seed, lab=lab: record(
                                    {"kind": "session", "prompt": p_i, "seed": seed, "row": lab, "chain": c,
                                     "events": encode_events(evs)})))
                        group = [group_of[c] for c in range(chains)]
                        results[cfg] += group
                        if chains > 1:
                            reports[cfg].append(chains_report(group, selection))
                        finals = [s.tokens for s in group]  # chain by chain: they share their seeds
                        if rule == SEQUENTIAL:
                            seq_tokens[sampler] = finals
                        elif finals != seq_tokens[sampler]:
                            same_as_seq[cfg] = False
                        for _ in missing:
                            progress.advance(lab)
            if concurrency_levels:
                tp_rows = throughput(backend, base, tp_cfgs, prompts, list(concurrency_levels), classifier, trace,
                                     progress, done_rows, record)
            if workers and cluster_of is not None:
                dp = done_dp or data_parallel(cluster_of, workers, tp_params, prompts, 1, classifier, progress)
                if done_dp is None:
                    record({"kind": "data_parallel", "result": dp})
            probe = engine_probe(backend, backend.encode_prompt(prompts[0]), base.max_new_tokens)
    except KeyboardInterrupt:
        if trace is not None:  # like `run`: the trace ends at the last finished round
            trace.end_open_session("cancelled", lambda ids: display_text(backend, ids))
        raise
    finally:
        if trace is not None:
            trace.close()
    cache1 = backend.prefix_cache_stats()
    hit_rate = None
    if cache0 and cache1 and cache1["queries"] > cache0["queries"]:
        hit_rate = (cache1["hits"] - cache0["hits"]) / (cache1["queries"] - cache0["queries"])
    speed = engine_speed(probe, [s for rows in results.values() for s in rows])
    table_rows = []
    for cfg in cfgs:
        sampler, rule, budget = cfg
        agg = aggregate(results[cfg], results[(sampler, SEQUENTIAL, None)] if rule != SEQUENTIAL else None, speed)
        inputs = row_params(base, sampler, rule, budget).inputs
        exact = rule != SEQUENTIAL and inputs == InputMode.DECISION  # node inputs draw other randomness
        agg.update(label=label(*cfg), sampler=sampler, rule=rule, budget=budget, inputs=inputs,
                   same_final_state_as_sequential=same_as_seq[cfg] if exact else None,
                   **(mixing(reports[cfg]) if chains > 1 else {}))
        table_rows.append(agg)
    limit_rows = limit_table(results, speed)
    kind = BackendName.of(backend.name)
    report = {
        "backend": backend.name, "model": backend.model, "engine": dict(backend.info),
        "limits": limit_rows, "single_step_s": speed[0], "best_tokens_per_s": speed[1],
        "params": base.to_dict(), "prompts": prompts, "seeds": seeds, "chains": chains,
        **({"diagnostics_draws": selection.to_dict()} if chains > 1 else {}), "rows": table_rows,
        "throughput": {"rules": list(throughput_rules), "budgets": budgets, "rows": tp_rows} if tp_rows else None,
        "data_parallel": dp,
        "engine_probe": probe, "prefix_cache_hit_rate": hit_rate,
        "time_unit": kind.time_unit, "virtual_clock": kind.virtual_clock,
        "wall_s": time.perf_counter() - t_start,
    }
    out_path = output
    o.write_results(out_path, orjson.dumps(report, option=orjson.OPT_INDENT_2))
    if json_out:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
    else:
        render(o.table_console(), report)
    err.print(f"presto-tui: results written to {out_path}" +
              (f", trace to {trace.path}" if trace is not None else ""))




def _ratio(x: float | None, mh: bool) -> str:
    return "-" if not mh else "1.00" if x is None else f"{x:.2f}x"


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def _ms(x: float | None) -> float | None:
    return None if x is None else 1000 * x


def _f(x: float | None, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def render(console: Console, report: dict) -> None:
    p = report["params"]
    chains = report.get("chains", 1)
    table = Table(title=f"{report['backend']} on {report['model']}: {len(report['prompts'])} prompts x "
                        f"{report['seeds']} seeds" + (f" x {chains} chains" if chains > 1 else "")
                        + f", n={p['max_new_tokens']}, K={p['steps']}, alpha={p['alpha']}",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    wide = console.width >= 110  # narrower terminals get the rest from the JSON file
    cols = ["sampler rule N", "tr/call", "ms/tr", "tr/s", "speedup", "+ext", "lim%", "s/prompt"]
    cols += (["est.", "tok", "waste", "req/use", "abort", "live", "1st s"] if wide else []) + ["=seq"]
    mixing_cols = ["R-hat", "ESS", "agree"] if chains > 1 else []
    cols += mixing_cols
    for col in cols:
        table.add_column(col, justify="left" if col == "sampler rule N" else "right", no_wrap=True)
    for r in report["rows"]:
        same_seq = r["same_final_state_as_sequential"]
        same = "" if same_seq is None else ("yes" if same_seq else "NO")
        mh = r.get("mh", r["requests_realized"] > 0)  # (a report written before `mh`: its old test)
        cells = [r["label"], _f(r["transitions_per_call"] or None, ".2f"),
                 _f(r["wall_per_transition_s"] * 1e3 if mh else None, ".0f"), _f(r["transitions_per_s"] or None, ".2f"),
                 _ratio(r["speedup"], mh), _ratio(r["speedup_ext"], mh), _f(_pct(r["limit_share"]), ".0f"),
                 _f(r["engine_time_s"], ".2f")]
        if wide:
            cells += [_f(r["speedup_estimate"], ".2f"), f"{r['tokens_generated']:.0f}",
                      f"{100 * r['wasted_share']:.0f}%" if mh else "-",
                      f"{r['requests_issued']:.0f}/{r['requests_realized']:.0f}", f"{r['requests_aborted']:.0f}",
                      _f(r["mean_live_requests"], ".1f"), _f(r["time_to_first_transition_s"], ".2f")]
        cells.append(same)
        if mixing_cols:
            cells += [_f(r.get("rhat_max"), ".3f"), _f(r.get("ess_bulk_min"), ".0f"), _f(r.get("agreement"), ".2f")]
        table.add_row(*cells)
    for lim in report.get("limits") or []:
        table.add_row(f"{lim['sampler']} limit", "", "", "", "", "", "100", _f(lim["limit_s"], ".2f"),
                      *([""] * 7 if wide else []), "", *([""] * len(mixing_cols)))
    console.print(table)
    paths = [r for r in report["rows"] if r.get("critical_path")]
    if paths:
        t1 = Table(title="critical path: seconds per prompt by cause (runtime/session/critpath.py; the limit at "
                         "each session's learned one-request step time)", title_justify="left",
                   box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in ("sampler rule N", *critical.COLUMNS[1:]):
            t1.add_column(col, justify="left" if col == "sampler rule N" else "right", no_wrap=True)
        for r in paths:
            t1.add_row(r["label"], *critical.cells("", r["critical_path"])[1:])
        console.print(t1)
    tp = report.get("throughput")
    if tp:
        jobs = tp["rows"][0]["prompts"] if tp["rows"] else 0
        t2 = Table(title=f"throughput: {jobs} chains ({len(report['prompts'])} prompts" +
                         (", again with the next seeds" if jobs > len(report["prompts"]) else "") +
                         "), C at once on one engine (engine time; x seq: over the sequential sampler batched "
                         "across the same C chains)",
                   title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in ("C", "sampler rule N", "prompts/min", "tr/s", "x seq", "x C=1", "live", "=seq", "engine s"):
            t2.add_column(col, justify="left" if col == "sampler rule N" else "right", no_wrap=True)
        for r in tp["rows"]:
            same = r["same_final_state_as_sequential"]
            t2.add_row(str(r["concurrency"]), r["label"], _f(r["prompts_per_min"], ".1f"),
                       _f(r["transitions_per_s"], ".1f"), _f(r["x_seq"], ".2f"), _f(r["x_c1"], ".2f"),
                       _f(r["mean_live_requests"], ".1f"), "" if same is None else ("yes" if same else "NO"),
                       f"{r['engine_s']:.1f}")
        console.print(t2)
        paths = [r for r in tp["rows"] if r.get("critical_path")]
        if paths:
            t4 = Table(title="throughput's critical paths: seconds per prompt by cause (width and budget count "
                             "the other chains' requests)", title_justify="left", box=box.SIMPLE_HEAD,
                       pad_edge=False, collapse_padding=True)
            for col in ("C", "sampler rule N", *critical.COLUMNS[1:]):
                t4.add_column(col, justify="left" if col == "sampler rule N" else "right", no_wrap=True)
            for r in paths:
                t4.add_row(str(r["concurrency"]), r["label"], *critical.cells("", r["critical_path"])[1:])
            console.print(t4)
    dp = report.get("data_parallel")
    if dp:
        t3 = Table(title=f"data parallel over Ray: {dp['rule']} N={dp['budget']}, {len(report['prompts'])} prompts, "
                         f"{dp['concurrency']} chain(s) per worker (wall time)",
                   title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("workers", "prompts/min", "x 1 worker", "wall s", "start s"):
            t3.add_column(col, justify="right")
        for r in dp["rows"]:
            t3.add_row(str(r["workers"]), f"{r['prompts_per_min']:.1f}", f"{r['ratio']:.2f}", f"{r['wall_s']:.1f}",
                       f"{r['start_s']:.1f}")
        console.print(t3)
    pr = report["engine_probe"]
    if pr.get("ratio"):
        console.print(f"engine: one batch of {pr['batch']} x {pr['suffix_tokens']} tokens took "
                      f"{pr['ratio']:.2f}x one suffix ({pr['batch_s']:.2f} s vs {pr['one_s']:.2f} s)")
    if report["prefix_cache_hit_rate"] is not None:
        console.print(f"prefix-cache hit rate: {report['prefix_cache_hit_rate']:.3f}")
    for lim in report.get("limits") or []:
        console.print(f"limit ({lim['sampler']}'s trajectories, per prompt): dependency {lim['dependency_steps']:.0f} "
                      f"decode steps = {_f(lim['dependency_s'], '.2f')} s at {_f(_ms(report['single_step_s']), '.1f')} "
                      f"ms a step; compute {lim['useful_tokens']:.0f} useful tokens = {_f(lim['compute_s'], '.2f')} s "
                      f"at the best measured {_f(report['best_tokens_per_s'], '.0f')} tokens/s")
    console.print(f"time: {report['time_unit']}. rows: each sampler sequentially and with PreSTO at each rule "
                  "and budget N (stream: N is a cap under the shared policy, auto its cap of 64, cost:N the cost "
                  "policy's, fill:N keeps N live); a one-shot method once. ms/tr: the session's time from its start "
                  "(extensions included) per transition; speedup: the sequential sampler's time producing "
                  "transitions / the row's (paper eq. 20 in wall time, extensions left out), measured side by side; "
                  "+ext: the same over each session's whole time from its start, block extensions included; lim%: "
                  "the trajectory's binding limit (dependency or compute, whichever is longer) as a share of that "
                  "time; s/prompt: that time; est.: the single-session estimate `run` and `stats` show (from the "
                  "start, as +ext); waste: share of proposal tokens the walk did not "
                  "use; live: mean live requests (stream); 1st s: time to the first transition; '=seq': same final "
                  "state as the sequential sampler" + (" (every chain)" if chains > 1 else "")
                  + ("; R-hat, ESS: the worst split R-hat and bulk ESS of the log-target over the prompts (its "
                     f"{chains} chains at once; {_words(report)}; thresholds R-hat <= 1.01, ESS >= 100); agree: "
                     "the mean share of the chains' most common answer" if chains > 1 else ""))


@command()
@o.handled
@takes(Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE, without=("seed",), defaults=BENCH_SIZES)
def bench(
    ctx: typer.Context,
    prompts_file: Annotated[Path | None, typer.Option(
        "--prompts-file", show_default=False,
        help="One prompt per line [default: the shipped math, code and general set].")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", show_default=False,
        help=f"Use only the first N prompts, {o.CLI_LIMITS['limit'].where} [default: all].")] = None,
    budgets: Annotated[str, typer.Option(
        metavar="N,...",
        help=f"Comma-separated prefetch budgets to compare, each N {BUDGET_LIMIT.where}; for stream also "
        "auto and fill:N (see run --budget), and any of them with /WHAT, what it speculates (see run --speculate; "
        "+ joins: 8/none, auto/block, 8/proposal+block).")] = "8,20,auto",
    rules: Annotated[str, typer.Option(
        metavar="NAME,...",
        help=f"Comma-separated PreSTO rules to compare: {', '.join(PrefetchRule.presto_names())}.")
    ] = ",".join(PrefetchRule.presto_names()),
    throughput: Annotated[str, typer.Option(
        "--throughput", metavar="C,...",
        help="Concurrency levels for the throughput table (prompts per minute and transitions per second with C "
        "chains on one engine: the sequential sampler batched across them against each --throughput-rule at "
        "every budget); '' skips it.")] = "1,2,4,8",
    throughput_rule: Annotated[str, typer.Option(
        "--throughput-rule", metavar="NAME,...",
        help=f"Comma-separated PreSTO rules the throughput table runs at every budget: "
        f"{', '.join(PrefetchRule.presto_names())}.")] = PrefetchRule.STREAM.value,
    workers: o.Workers = None, ray_address: o.RayAddress = None,
    samplers: Annotated[str, typer.Option(
        metavar="NAME,...",
        help=f"Comma-separated samplers, each against its own sequential run: {', '.join(method_names())}.")
    ] = "powermh",
    seeds: Annotated[int, typer.Option(
        help=f"Seeds per prompt (0..seeds-1), {o.CLI_LIMITS['seeds'].where}.")] = 1,
    chains: o.Chains = None, burn_in: o.BurnIn = 0, thin: o.Thin = 1, classifier: o.Classifier = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", rich_help_panel=o.OUTPUT, show_default=False,
        help="Write the results JSON here [default: beside the trace, sessions/<time>-bench.json].")] = None,
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
    resume: Annotated[Path | None, typer.Option(
        "--resume", metavar="RESULTS", rich_help_panel=o.OUTPUT, show_default=False,
        help="Continue an interrupted run: RESULTS is its run log (<results>.runlog) or its results JSON. The "
        "sessions and throughput rows it holds are taken as they are, the others run, appended to the same trace; "
        "a run whose settings differ is refused, naming the difference. Timings then come from both runs.")] = None,
    json_out: Annotated[bool, typer.Option("--json", rich_help_panel=o.OUTPUT,
                                           help="Print the results JSON on stdout instead of tables.")] = False,
) -> None:
    """Each sampler sequentially against PreSTO at every rule and budget, in one run.

    Same prompts, seeds and engine for every sampler, interleaved prompt by prompt so
    that machine noise hits all alike. Reports per row transitions per call, wall time
    per transition, transitions per second, the speedup over the sequential sampler in
    wall time (paper eq. 20; streaming has no calls), the single-session estimate,
    tokens and their wasted share, requests issued against used, aborted requests, mean
    live requests and time to the first transition; then a throughput table (prompts
    per minute with C chains on one engine), with --workers a data-parallel table over
    Ray, the engine's time for a batch of 20 suffixes against one suffix, and the
    prefix-cache hit rate. --inputs node runs the paper's own BFS and predictive
    allocations (their chains then differ from the sequential one, with the same law).
    --chains M runs every row's M chains of a prompt at once (their seeds derived from each
    seed) and adds the worst split R-hat and bulk ESS of the log-target over the prompts, and
    how often the chains agree on an answer.

    Examples:

      presto-tui bench                       # embedded model, shipped prompts

      presto-tui bench --limit 2 -K 8 --budgets 8,20 --rules spine

      presto-tui bench --inputs node --rules bfs,predictive --budgets 20

      presto-tui bench --samplers powermh,entropycut,multitry --budgets 8,20

      presto-tui bench --rules stream --budgets 8,auto,fill:8 -n 64 -B 16 -K 4

      presto-tui bench --limit 2 --chains 4 --rules spine --budgets 8  # R-hat
    """
    flags = ctx.params
    budget_list = [b.strip() for b in budgets.split(",") if b.strip()]
    for b in budget_list:
        read_budget("--budgets", b.partition("/")[0])
    if SEQUENTIAL in _names(rules):
        raise InputError("--rules lists PreSTO rules; each sampler's sequential run is always the reference")
    rule_list = _chosen("--rules", rules, PrefetchRule.presto_names())
    sampler_list = _chosen("--samplers", samplers, method_names())
    if not budget_list or not rule_list or not sampler_list:
        raise InputError("bench needs at least one sampler, budget and rule")
    if limit is not None:
        o.CLI_LIMITS["limit"].check("--limit", limit)
    o.CLI_LIMITS["seeds"].check("--seeds", seeds)
    per_prompt = o.chain_count(chains)
    levels = _int_list("--throughput", throughput)
    for c in levels:  # a throughput level is a number of chains at once, as --concurrency
        o.CLI_LIMITS["concurrency"].check("--throughput", c)
    # every row sets its own rule; the base is the sequential reference, valid with either inputs
    base = o.sampler_params(flags, preset={**BENCH_SIZES, "prefetch": SEQUENTIAL}, one_sampler=False)
    kept = o.selection(burn_in, thin, base.steps)
    throughput_rules = _chosen("--throughput-rule", throughput_rule, PrefetchRule.presto_names())
    for cfg in configs(sampler_list, [*rule_list, *throughput_rules], budget_list):
        row_params(base, *cfg).validate()
    if prompts_file is None:
        from importlib.resources import files

        prompts_file = Path(str(files("presto_tui") / "data" / "prompts.txt"))
    prompts = o.read_prompts(None, prompts_file)[:limit]
    clf = load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    from presto_tui.eval.resume import RunLog, engine_settings, items_digest, log_path_of, reopen

    settings = {"prompts": {"count": len(prompts), "digest": items_digest([p] for p in prompts)},
                "samplers": sampler_list, "rules": rule_list, "budgets": budget_list, "seeds": seeds,
                "chains": per_prompt, "params": base.to_dict(), "throughput": levels,
                "throughput_rules": throughput_rules, "workers": workers, "classifier": classifier and str(classifier),
                "backend": name, "engine": engine_settings(engine_opts), "selection": kept.to_dict()}
    records: list[dict] = []
    if resume is not None:
        log, records, path, out_path = reopen(resume, "bench", settings, trace=trace, no_trace=no_trace,
                                              output=output)
    else:
        path = o.trace_path(flags, "bench")
        out_path = output_path(output or (path or default_trace_path("bench")).with_suffix(".json"),
                               "results", overwrite=output is not None)
        log = RunLog.create(log_path_of(out_path), "bench", settings, trace=path, output=out_path)
    cluster_of = None
    if workers is not None or ray_address is not None:
        if workers is not None:
            o.CLI_LIMITS["workers"].check("--workers", workers)
        from presto_tui.api.sessions import Cluster, check_address, require_ray

        require_ray()
        if ray_address:
            check_address(ray_address)

        def cluster_of(w: int):
            return Cluster(w, name, engine_opts, address=ray_address, concurrency=1)

    try:
        engine = o.start_engine(name, engine_opts)
        if resume is not None and path is not None:
            from presto_tui.logs.writer import append_trace

            known = {str(r["events"][0].get("session_id")) for r in records  # (a session's events: its start first)
                     if r.get("kind") == "session" and r.get("events")}
            writer, _ = append_trace(path, "bench", engine, base, known)
        else:
            writer = open_trace(path, "bench", engine, base)
        run_bench(engine, base, prompts, rules=rule_list, budgets=budget_list, samplers=sampler_list, seeds=seeds,
                  classifier=clf, trace=writer, output=out_path, json_out=json_out, concurrency_levels=levels,
                  throughput_rules=throughput_rules, workers=workers or (1 if ray_address else 0),
                  cluster_of=cluster_of, chains=per_prompt, selection=kept, log=log, records=records)
    except KeyboardInterrupt:  # (an engine failure stays the one line it is: --resume continues it too)
        print(f"presto-tui: continue this run with --resume {log.shown}", file=o.term())
        raise
    finally:
        log.close()


def _words(report: dict) -> str:
    """The diagnostics' burn-in and thinning, as the table's caption says them."""
    from presto_tui.api.diagnostics import Selection

    return Selection(**report.get("diagnostics_draws", {})).words


def _names(csv: str) -> list[str]:
    return [x.strip() for x in csv.split(",") if x.strip()]


def _chosen(flag: str, csv: str, choices: tuple[str, ...]) -> list[str]:
    """The comma-separated names of `csv`, each one of `choices`."""
    names = _names(csv)
    for name in names:
        if name not in choices:
            raise InputError(unknown_choice(flag, name, choices))
    return names


def _int_list(flag: str, csv: str) -> list[int]:
    try:
        return [int(x) for x in _names(csv)]
    except ValueError:
        raise InputError(f"{flag} must be comma-separated integers, got {csv!r}") from None
