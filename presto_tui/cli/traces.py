"""Commands over recorded traces: `replay`, `stats`, `fit-classifier` (no model needed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from presto_tui.cli import options as o
from presto_tui.cli.root import command
from presto_tui.errors import InputError
from presto_tui.files import output_path
from presto_tui.safetext import visible
from presto_tui.words import count


@command()
@o.handled
def replay(
    traces: Annotated[list[Path], typer.Argument(
        help="Traces written by presto-tui run, chat or bench; several replay on one timeline, their sessions "
        "numbered from 1 in the order given.", metavar="TRACE...")],
    play: Annotated[bool, typer.Option("--play", help="Start playing at once.")] = False,
    compare: Annotated[str | None, typer.Option(
        "--compare", metavar="S,T", help="Open sessions S and T side by side at once: parameters, acceptance "
        "curves, answers and a diff of them (in the app: c on one session, then c on another).")] = None,
    on_bad_lines: o.OnBadLines = "error",
) -> None:
    """Replay recorded sessions: the same trees, inspector and stats, no model needed.

    A timeline runs over every round; space plays and pauses, < and > change the speed,
    [ and ] step, g goes to a round, home and end jump; q quits. ? shows every key. A
    one-shot session (lowtemp, bestofn, powersmc, sps, ...) is one place on it: its samples, or
    PowerSMC's particles over blocks, where a round's tree would be. In the app, c
    compares two sessions, t splits the selected node's ratio by token and H shows the
    session's whole chain (exportable as JSON or CSV).

    Traces replayed together must come from one tokenizer (their token ids mean the same
    text).

    Examples:

      presto-tui replay sessions/example.jsonl

      presto-tui replay a.jsonl b.jsonl --compare 1,2
    """
    loaded, pair = replay_checked(traces, compare, on_bad_lines)
    from presto_tui.views.app import replay_app

    o.exit_with(o.run_app(replay_app(loaded, autoplay=play, compare=pair)))


def replay_checked(traces: list[Path], compare: str | None, on_bad_lines: str = "error"):
    """The traces replay shows and the sessions it compares, checked (`web` checks with this too)."""
    loaded = o.load_traces(_distinct_files(traces), on_bad_lines)
    from presto_tui.views.state.baseline import run_of

    if not any(s.rounds or run_of(s.start.params) is not None for t in loaded for s in t.sessions):
        raise InputError(f"{traces[0]}: the trace holds no rounds and no one-shot session to replay"
                         if len(loaded) == 1 else "none of the traces holds a round or a one-shot session to replay")
    sessions = sum(len(t.sessions) for t in loaded)
    return loaded, _session_pair(compare, sessions) if compare is not None else None


def _session_pair(raw: str, sessions: int) -> tuple[int, int]:
    """`--compare S,T`: two different session numbers from 1, as indices."""
    parts = raw.split(",")
    try:
        s, t = (int(x) for x in parts) if len(parts) == 2 else (0, 0)
    except ValueError:
        s = t = 0
    if not (1 <= s <= sessions and 1 <= t <= sessions and s != t):
        raise InputError(f"--compare must be two different session numbers S,T from 1 to {sessions} "
                         f"(the traces hold {sessions} session{'s' if sessions != 1 else ''}), "
                         f"got {visible(raw[:40], keep_newlines=False)!r}")
    return s - 1, t - 1


@command()
@o.handled
def stats(
    traces: Annotated[list[Path], typer.Argument(help="Trace files (JSONL) to summarise.", metavar="TRACE...")],
    compare: Annotated[bool, typer.Option(
        "--compare", help="Compare two runs, A and B (two TRACE arguments, each PATH or PATH@METHOD), paired by "
        "prompt, seed and chain: the paired TOST of eq. 23 on the answers' log-likelihood and confidence, the "
        "acceptance rate and the time per prompt. METHOD picks one method's sessions from a trace that holds "
        "several, in eval's method language (powermh, powermh+bfs/node:20, bon:4, ...).")] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print JSON: \"sessions\", one object per session, and \"pooled\", one object per "
        "comparable group with the parameters it shares and its members (with --compare: the comparison).")
    ] = False,
    on_bad_lines: o.OnBadLines = "error",
    burn_in: o.BurnIn = 0, thin: o.Thin = 1, draws: o.Draws = None,
    critical_path: Annotated[bool, typer.Option(
        "--critical-path", help="Where each chain's time went: its critical path from its start to its last "
        "decision, in seconds per cause (decoding at one request's step time, which is the dependency limit; "
        "a wider batch; the block's extension; proposals issued late, because not speculated, no slot under "
        "the cap or ranked below what pays; reissued; a round's wait; the scheduler's own time), per session "
        "and pooled. Needs traces of schema 1.3 or later.")] = False,
) -> None:
    """Per-session statistics of recorded traces, pooled over comparable sessions; no model needed.

    One row per session: its sampler, alpha, rule and group, model calls, transitions per
    call (per second for streaming), time per transition, the estimated speedup over the
    sequential sampler, acceptance rate, epsilon-class shares of the scored decisions, and
    requests issued against requests the walk used. Sessions cut short (no end event) are
    marked. Baseline sessions (lowtemp, bestofn, powersmc) get tables of their own: time,
    tokens, samples or particles, resamplings, last ESS, and the answer's log-likelihood
    per token and confidence.

    Then one pooled row per group of comparable sessions: those that differ only in prompt
    and seed (same backend, model, device, sampler and its parameters, alpha, tau, epsilon,
    n, B, K, rule, inputs and budget N, and as many sessions running at once); a speedup is
    never averaged over different samplers or settings. A trace given twice, or two files
    holding the same sessions (by session id), count each session once, with a warning.

    Then, for the chains of each prompt run with --chains M, their MCMC diagnostics (split
    R-hat, bulk and tail ESS and MCSE of the log-target, log-likelihood and confidence; a
    warning where R-hat > 1.01 or bulk ESS < 100) and the answer most chains agree on.

    With --compare A B: two runs of the same prompts and seeds side by side, each session
    of A matched with B's of the same prompt, seed and chain (sessions that did not end
    done, or have no match, are left out and counted). For each of the answers'
    log-likelihood and confidence under p0 (paper eqs. 21-22), the acceptance rate and the
    time per prompt: both means, the mean difference B - A with its 90% interval, the
    margin (0.2 standard deviations of A), p_eq of the paired TOST (eq. 23) and the
    verdict; then the ratio of mean times. A trace holding several methods (bench, eval)
    needs PATH@METHOD to say which.

    Examples:

      presto-tui stats sessions/example.jsonl
      presto-tui stats sessions/*-bench.jsonl --json
      presto-tui stats --critical-path sessions/*-bench.jsonl
      presto-tui stats --compare sequential.jsonl presto.jsonl
      presto-tui stats --compare run.jsonl@powermh run.jsonl@powermh+bfs/node
    """

    if compare:
        if critical_path:
            raise InputError("--critical-path and --compare do not go together; run them one at a time")
        _compare(traces, json_out, on_bad_lines)
        return

    from presto_tui.logs import chains
    from presto_tui.logs.stats import pooled_groups, render, repeated_sessions, session_rows

    kept = o.selection(burn_in, thin)
    draws_to = o.draws_paths(draws)
    loaded = o.load_traces(_distinct_files(traces), on_bad_lines)
    if burn_in:  # refused as `run` refuses it, against the shortest K of the traces' chains
        from presto_tui.api.events import is_one_shot

        ks = [(int(s.start.params["steps"]), n, str(t.path)) for t in loaded for n, s in enumerate(t.sessions, 1)
              if not is_one_shot(s.start.params)]
        if ks:
            k, n, path = min(ks)
            o.selection(burn_in, thin, k, f"K={k} in {visible(path, keep_newlines=False)}, session {n}")
    for line in repeated_sessions(loaded):
        print(f"presto-tui: warning: {line}", file=o.term())
    rows = session_rows(loaded)
    groups = pooled_groups(rows)
    if critical_path:
        _critical_path(traces, rows, groups, json_out)
        return
    reports = chains.chain_reports(loaded, kept)
    if draws_to:  # every session once, as the tables count them
        from presto_tui.logs.draws import ChainDraws
        from presto_tui.logs.stats import sessions_once

        o.write_draws(draws_to, [ChainDraws.of(sess.events) for sess in sessions_once(loaded)], kept)
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps({"sessions": rows, "pooled": groups, "chains": [
            {**r.to_dict(), "members": members} for r, members in reports]}).decode() + "\n")
    else:
        console = o.table_console()
        render(console, rows, groups)
        chains.render(console, reports, list(dict.fromkeys(r["trace"] for r in rows)))


def _critical_path(traces: list[Path], rows: list[dict], groups: list[dict], json_out: bool) -> None:
    """`stats --critical-path`."""
    from presto_tui.logs import critical

    if not critical.with_path(rows):
        what = f"{traces[0]}: no session" if len(traces) == 1 else "no session of these traces"
        raise InputError(f"{what} holds what the critical path needs: an MH chain or a population started from its "
                         "prompt, recorded by presto-tui with trace schema 1.3 or later")
    pooled = critical.pooled_paths(rows, groups)
    if json_out:
        import orjson

        keep = ("trace", "session", "session_id", "prompt", "rule", "group", "critical_path")
        sys.stdout.write(orjson.dumps({"sessions": [{k: r.get(k) for k in keep} for r in critical.with_path(rows)],
                                       "pooled": pooled}).decode() + "\n")
    else:
        critical.render(o.table_console(), rows, pooled)


def _compare(args: list[Path], json_out: bool, on_bad_lines: str = "error") -> None:
    """`stats --compare A B`."""

    from presto_tui.api.params import SamplerParams, parse_method
    from presto_tui.logs.paired import need_statsmodels
    from presto_tui.logs.stats import compare, render_compare

    if len(args) != 2:
        raise InputError(f"--compare takes two traces, A and B (each PATH or PATH@METHOD), got {len(args)}")
    need_statsmodels()
    sides = []
    for arg in args:
        path, select = arg, None
        text = str(arg)
        if not arg.exists() and "@" in text:  # PATH@METHOD (a file whose name holds '@' is taken as it is)
            where, _, spec = text.rpartition("@")
            path = Path(where)
            select = parse_method(spec, SamplerParams(), flag=f"--compare {text}").matches
        sides.append((path, select, text))
    (a, select_a, shown_a), (b, select_b, shown_b) = sides
    trace_a = o.load_traces([a], on_bad_lines)[0]
    trace_b = trace_a if b == a else o.load_traces([b], on_bad_lines)[0]
    res = compare(trace_a, trace_b, select_a, select_b, shown_a, shown_b)
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps(res).decode() + "\n")
    else:
        render_compare(o.table_console(), res)


def _distinct_files(paths: list[Path]) -> list[Path]:
    """Each file once, however it is named (a repeat, another path to it, a link); a warning per repeat."""
    from presto_tui.safetext import visible

    seen: dict[object, Path] = {}
    out = []
    for p in paths:
        try:
            st = p.stat()
            key: object = (st.st_dev, st.st_ino)
        except OSError:
            key = str(p)  # unreadable: reading it reports why
        if key in seen:
            print(f"presto-tui: warning: {visible(str(p), keep_newlines=False)}: the same file as "
                  f"{visible(str(seen[key]), keep_newlines=False)}; read once", file=o.term())
            continue
        seen[key] = p
        out.append(p)
    return out


@command("fit-classifier")
@o.handled
def fit_classifier(
    traces: Annotated[list[Path], typer.Argument(help="Trace files whose scored decisions are the examples.",
                                                  metavar="TRACE...")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the classifier JSON.")],
    features: Annotated[str, typer.Option(
        metavar="NAME,...", help="Comma-separated features: cut_fraction (the paper's choice), cut_index_fraction, "
        "gap_fraction, depth, accepts.")] = "cut_fraction",
    on_bad_lines: o.OnBadLines = "error",
) -> None:
    """Fit the predictive rule's epsilon-class model (3-class logistic regression).

    Reports prompt-grouped 5-fold cross-validated accuracy and log loss against the
    constant baseline (paper appendix E.7), and warns when the model does no better
    than the baseline. Use the result with --classifier model.json in presto-tui run
    --prefetch predictive --inputs node.

    Examples:

      presto-tui fit-classifier sessions/*.jsonl -o model.json

      presto-tui fit-classifier sessions/*.jsonl -o model.json \\
        --features cut_fraction,depth
    """
    from presto_tui.api.params import FEATURES

    names = tuple(f.strip() for f in features.split(",") if f.strip())
    bad = [f for f in names if f not in FEATURES]
    if bad or not names:
        raise InputError(f"unknown feature {bad[0] if bad else '(none given)'!r}; choose from {', '.join(FEATURES)}")
    output_path(output, "classifier", overwrite=True)
    try:
        from presto_tui.logs.fit import fit
    except ImportError:
        raise InputError("fit-classifier needs scikit-learn: pip install 'presto-tui[fit]'") from None
    clf = fit(o.load_traces(traces, on_bad_lines), names)
    import json

    o.write_results(output, (json.dumps(clf.to_json(), indent=2) + "\n").encode())
    m = clf.meta
    cv = m["cross_validation"]
    print(f"{count(m['examples'], 'scored decision')} from {count(m['sessions'], 'session')}; classes "
          f"{m['class_counts']}")
    if cv:
        print(f"held-out accuracy {cv['accuracy']:.3f} (baseline {cv['baseline_accuracy']:.3f}), "
              f"log loss {cv['log_loss']:.3f} (baseline {cv['baseline_log_loss']:.3f}), "
              f"{cv['folds']}-fold grouped by prompt")
        if cv["log_loss"] >= cv["baseline_log_loss"]:
            print("presto-tui: warning: the fitted model predicts held-out prompts no better than the "
                  "constant baseline (log loss); the built-in prior may serve --prefetch predictive as well. "
                  "Record more sessions or try other --features.", file=o.term())
    else:
        print("cross-validation skipped: it needs traces of at least two sessions")
    print(f"wrote {output}")
