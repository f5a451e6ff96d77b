"""Offline statistics of traces (`presto-tui stats`): per session, and pooled per comparable group.

Sessions are *comparable*, and pooled into one row, when only their prompt and
seed differ: the same backend, model and device; the same sampler with its own
parameters (EntropyCut's beta and cut mix, MultiTryMH's tries, best-of-N's N and
rank, PowerSMC's particles, block and ramp); the same alpha, tau and n; for MH
chains the same epsilon, B and K, rule, inputs and budget N; and as many
sessions running at once (`at_once`: chains sharing an engine, or workers, whose
lines interleave in the trace; a model call's time depends on them).  Pooling
sessions that differ in any of these would average speedups and rates of
different experiments (`comparable`).

The one-shot methods (low temperature, best-of-N, PowerSMC, Scalable Power
Sampling, a plugin's) make no MH transitions: their sessions and groups get
tables of their own, with what they have instead (time, tokens, what the method
drew in its own words, resamplings where it resamples, the answer's
log-likelihood per token and confidence, eqs. 21-22).

A session is counted once however many traces hold it: sessions are known by
their id, so a trace read twice, or a copy of it, adds nothing
(`repeated_sessions` says which were skipped).

Every string that came from a trace is shown through `visible()` inside a
`rich.text.Text`, so markup and escape sequences in a crafted trace print as
literal characters.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from presto_tui.logs.reader import SessionTrace, Trace
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.language import describe
from presto_tui.runtime.core.method import MethodKind
from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN
from presto_tui.runtime.core.spec import budget_text, comparable_names
from presto_tui.runtime.core.types import cut_at_eos
from presto_tui.runtime.session.summary import is_one_shot
from presto_tui.safetext import visible

CLASSES = (ACCEPT, REJECT, UNCERTAIN)


def _sessions(traces: list[Trace]) -> Iterator[tuple[Trace, int, SessionTrace, Trace | None]]:
    """(trace, index in it, session, the trace that held it first: None the first time it is seen)."""
    first: dict[str, Trace] = {}
    for t in traces:
        for i, sess in enumerate(t.sessions):
            sid = sess.start.session_id
            yield t, i, sess, first.get(sid)
            first.setdefault(sid, t)


def sessions_once(traces: list[Trace]) -> list[SessionTrace]:
    """Every session of `traces`, each once (the first trace that holds it), in order."""
    return [sess for _, _, sess, seen_in in _sessions(traces) if seen_in is None]


def repeated_sessions(traces: list[Trace]) -> list[str]:
    """One line per trace holding sessions an earlier one held (same session ids): they count once."""
    repeats: dict[tuple[int, int], list[int]] = {}  # (trace, first trace) -> session indices
    for t, i, _, seen_in in _sessions(traces):
        if seen_in is not None:
            repeats.setdefault((id(t), id(seen_in)), []).append(i)
    by_id = {id(t): t for t in traces}
    lines = []
    for (tid, fid), idx in repeats.items():
        t, f = by_id[tid], by_id[fid]
        name, other = visible(str(t.path), keep_newlines=False), visible(str(f.path), keep_newlines=False)
        if len(idx) == len(t.sessions):
            what = "its sessions are" if len(idx) > 1 else "its session is"
            lines.append(f"{name}: {what} already read from {other} (same session ids); counted once")
        else:
            which = ", ".join(f"#{i + 1}" for i in idx[:8]) + (", ..." if len(idx) > 8 else "")
            lines.append(f"{name}: sessions {which} already read from {other} (same session ids); counted once")
    return lines


def at_once(trace: Trace) -> list[int]:
    """Per session of the trace, the most sessions open at once while it was (itself included):
    the lines of sessions that ran side by side (chains sharing an engine, or workers)
    interleave, and the engine's time per call depends on how many shared it."""
    spans = [(s.first_line, s.last_line) for s in trace.sessions]
    starts, ends = sorted(a for a, _ in spans), sorted(b for _, b in spans)
    # open at line p: started at or before it, not ended before it (a maximum is reached at a start)
    open_at = [bisect.bisect_right(starts, p) - bisect.bisect_left(ends, p) for p in starts]
    return [max(open_at[bisect.bisect_left(starts, a):bisect.bisect_right(starts, b)]) for a, b in spans]


def comparable(params: dict, backend: str, model: str, device: object = None, at_once: int = 1) -> dict:
    """What a session must share with others to be pooled with them (see the module docstring)."""
    key = {"backend": backend, "model": model, "device": device, "at_once": at_once}
    key.update((k, params.get(k)) for k in comparable_names(params))  # every parameter its sampler reads
    return key


def session_rows(traces: list[Trace]) -> list[dict]:
    """One row per session, each counted once (the first trace that holds it), with its `group`:
    its comparable group's number (from 1, in order of first appearance; `pooled_groups`)."""
    rows: list[dict] = []
    groups: dict[tuple, int] = {}
    side_by_side = {id(t): at_once(t) for t in traces}
    for t, i, sess, seen_in in _sessions(traces):
        if seen_in is not None:
            continue
        s = sess.summary()
        d = s.to_dict()
        start = sess.start
        key = comparable(s.params, start.backend, start.model, start.backend_info.get("device"),
                         side_by_side[id(t)][i])
        d.update(trace=str(t.path), session=i + 1, session_id=start.session_id, backend=start.backend,
                 model=start.model, at_once=key["at_once"], sampler=s.params.get("sampler"),
                 alpha=s.params.get("alpha"), rule=_rule(s.params), comparable=key, one_shot=s.one_shot,
                 # the answer a person reads: up to its first EOS (the state itself runs to n)
                 drawn=s.info.drawn(), answer_tokens=len(cut_at_eos(s.tokens, start.backend_info.get("eos_id"))),
                 population=s.population,
                 # a population's and an SMC session's own numbers in words, as `run` prints them
                 **({"method_rows": [list(r) for r in s.info.rows()]} if s.population or "log_z" in d else {}),
                 group=groups.setdefault(tuple(key.items()), len(groups) + 1),
                 # skipped lines (--on-bad-lines) mark it damaged; the trace may end inside it: cut short
                 status=s.status if s.damaged_lines or sess.ended else "cut short")
        rows.append(d)
    return rows


def pooled_groups(rows: list[dict]) -> list[dict]:
    """One pooled row per comparable group (`session_rows`' `group`), saying what it pools."""
    members: dict[int, list[dict]] = {}
    for r in rows:
        members.setdefault(r["group"], []).append(r)
    out = []
    for g, rs in sorted(members.items()):
        d = {"group": g, "comparable": rs[0]["comparable"], "sampler": rs[0]["sampler"], "alpha": rs[0]["alpha"],
             "rule": rs[0]["rule"], "one_shot": rs[0]["one_shot"],
             "members": [{"trace": r["trace"], "session": r["session"], "session_id": r["session_id"]} for r in rs]}
        d.update(pooled_one_shot(rs) if rs[0]["one_shot"] else pooled(rs))
        out.append(d)
    return out


def pooled(rows: list[dict]) -> dict:
    """Totals over `rows`; meaningful for comparable sessions (`pooled_groups`)."""
    calls = sum(r["calls"] or 0 for r in rows)  # (a streaming session makes none: null)
    streaming = all(r["calls"] is None for r in rows)
    transitions = sum(r["transitions"] for r in rows)
    call_time = sum(r["call_time_s"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    estimated = [r for r in rows if r["speedup_estimate"] is not None]
    # pooled like eq. 20: estimated sequential time over all sessions / their time
    est = (sum(r["speedup_estimate"] * r["wall_s"] for r in estimated) / sum(r["wall_s"] for r in estimated)
           if estimated and sum(r["wall_s"] for r in estimated) else None)
    accepted = sum(r["acceptance_rate"] * r["transitions"] for r in rows)
    scored = {c: sum(r["scored_eps_counts"][c] for r in rows) for c in CLASSES}
    realized = {c: sum(r["eps_counts"][c] for r in rows) for c in CLASSES}
    n_scored, n_realized = sum(scored.values()), sum(realized.values())
    return {
        "sessions": len(rows),
        "prompts": len({r["prompt"] for r in rows}),
        "calls": None if streaming else calls,
        "transitions": transitions,
        # over the sessions that make calls (streaming sessions have none)
        "transitions_per_call": None if streaming else
        sum(r["transitions"] for r in rows if r["calls"]) / calls if calls else 0.0,
        "time_per_call_s": None if streaming else call_time / calls if calls else 0.0,
        "call_time_s": call_time,
        "wall_s": wall,
        "transitions_per_s": transitions / wall if wall else 0.0,
        "speedup_estimate": est,
        "statuses": {st: sum(r["status"] == st for r in rows) for st in sorted({r["status"] for r in rows})},
        "acceptance_rate": accepted / transitions if transitions else 0.0,
        "eps_certain_share": (realized[ACCEPT] + realized[REJECT]) / n_realized if n_realized else 0.0,
        "scored_eps_shares": {c: scored[c] / n_scored if n_scored else 0.0 for c in CLASSES},
        "requests_issued": sum(r["requests_issued"] for r in rows),
        "requests_realized": sum(r["requests_realized"] for r in rows),
        "limit_share": _limit_share([r for r in rows if r.get("limit_s")]),
    }


def _limit_share(rows: list[dict]) -> float | None:
    """The binding limits over the time the sessions took (extensions included), pooled like eq. 20."""
    spent = sum(r["wall_s"] + r["extend_time_s"] for r in rows)
    return sum(r["limit_s"] for r in rows) / spent if rows and spent else None


def mean(values: list) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def pooled_one_shot(rows: list[dict]) -> dict:
    """Totals and means over comparable one-shot sessions (no transitions to pool): time and
    tokens per session, resamplings (where the method resamples), and the answers' mean
    log-likelihood and confidence."""
    n = len(rows)
    return {
        "sessions": n,
        "prompts": len({r["prompt"] for r in rows}),
        "statuses": {st: sum(r["status"] == st for r in rows) for st in sorted({r["status"] for r in rows})},
        "calls": sum(r["calls"] or 0 for r in rows),
        "wall_s": sum(r["wall_s"] for r in rows),
        "wall_s_mean": sum(r["wall_s"] for r in rows) / n,
        "tokens_generated": sum(r["tokens_generated"] for r in rows),
        "tokens_generated_mean": sum(r["tokens_generated"] for r in rows) / n,
        "answer_tokens_mean": sum(r["answer_tokens"] for r in rows) / n,
        "samples": sum(r.get("samples", 0) for r in rows),
        "resamplings": sum(r.get("resamplings", 0) for r in rows),
        # a method that resamples says so in its numbers (PowerSMC's `resamplings`); None: it does not
        "resamplings_mean": (sum(r.get("resamplings", 0) for r in rows) / n
                             if any("resamplings" in r for r in rows) else None),
        "answer_loglik_mean": mean([r["answer_loglik"] for r in rows]),
        "answer_confidence_mean": mean([r["answer_confidence"] for r in rows]),
    }


def _rule(p: dict) -> str:
    if registry.kind_of(p.get("sampler")) is MethodKind.ONE_SHOT:
        return "one-shot"  # no MH chain: no prefetch rule
    if p.get("prefetch") == "none":
        return "sequential"
    return f"{p.get('prefetch')}{'/node' if p.get('inputs') == 'node' else ''} N={budget_text(p)}"


def _sampler(p: dict) -> str:
    """The method with its own parameters, in its own words (those make sessions comparable); an MH
    chain's rule has its own column."""
    return describe(p).split(", ")[0] if not is_one_shot(p) else describe(p)


def _numbers(d: dict, status: str, shares: dict) -> list[str]:
    """The numeric cells (NUMERIC) of a session row or a pooled group."""
    est = d["speedup_estimate"]
    per_tr = d["wall_s"] / d["transitions"] if d["transitions"] else 0.0
    return [status, str(d["transitions"]),
            f"{d['transitions_per_call']:.2f}" if d["calls"] else f"{d['transitions_per_s']:.2f}/s",
            f"{per_tr * 1e3:.0f}", "-" if est is None else f"{est:.2f}x",
            f"{d['acceptance_rate']:.3f}",
            f"{100 * shares[ACCEPT]:.0f}/{100 * shares[REJECT]:.0f}/{100 * shares[UNCERTAIN]:.0f}",
            f"{d['requests_issued']}/{d['requests_realized']}",
            "-" if d.get("limit_share") is None else f"{100 * d['limit_share']:.0f}"]


def _session_cells(r: dict) -> list:
    sc = r["scored_eps_counts"]
    n = sum(sc.values()) or 1
    return [Text(visible(_sampler(r["params"]))), f"{r['alpha']:g}", Text(visible(r["rule"])),
            f"g{r['group']}", *_numbers(r, visible(r["status"]), {c: sc[c] / n for c in CLASSES})]


def _group_cells(g: dict) -> list:
    c = g["comparable"]
    status = ", ".join(f"{visible(k)} {v}" for k, v in g["statuses"].items())
    return [Text(visible(_sampler(c))), f"{g['alpha']:g}", Text(visible(g["rule"])),
            f"{c['max_new_tokens']}/{c['block_size']}/{c['steps']}",
            f"{g['sessions']} ({g['prompts']} prompt{'s' if g['prompts'] != 1 else ''})",
            *_numbers(g, status, g["scored_eps_shares"])]


NUMERIC = ("status", "tr", "tr/call", "ms/tr", "speedup", "acc", "eps% a/r/u", "issued/used", "lim%")
SESSION_COLUMNS = ("sampler", "α", "rule", "group", *NUMERIC)
GROUP_COLUMNS = ("sampler", "α", "rule", "n/B/K", "sessions", *NUMERIC)


def _opt(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


# the one-shot methods' tables: a session's time (s), tokens generated, the answer's tokens, what the method
# drew (`MethodInfo.drawn`: samples, particles x blocks, rollouts/steps), resamplings, the last ESS, the
# answer's log p0 per token and confidence
ONE_SHOT_NUMERIC = ("status", "time s", "tokens", "answer", "drawn", "tr", "acc", "resampl.", "ESS", "ll/tok",
                    "conf")
ONE_SHOT_SESSION_COLUMNS = ("sampler", "α", "group", *ONE_SHOT_NUMERIC)
# per session: mean time, tokens and answer length, mean resamplings, mean log-likelihood and confidence
ONE_SHOT_GROUP_COLUMNS = ("sampler", "α", "n", "sessions", "status", "time s", "tokens", "answer", "resampl.",
                          "ll/tok", "conf")
RIGHT = {*NUMERIC[1:], *ONE_SHOT_NUMERIC[1:], "n", "sessions", "dep%"}  # (dep%: stats --critical-path)


def _one_shot_session_cells(r: dict) -> list:
    return [Text(visible(_sampler(r["params"]))), f"{r['alpha']:g}", f"g{r['group']}", visible(r["status"]),
            f"{r['wall_s']:.2f}", str(r["tokens_generated"]), str(r["answer_tokens"]), visible(r["drawn"]),
            # a population's transitions (tempering: the alpha replica's; resample-move: every particle's)
            str(r["transitions"]) if r.get("population") else "-",
            f"{r['acceptance_rate']:.2f}" if r.get("population") else "-",
            str(r["resamplings"]) if "resamplings" in r else "-", _opt(r.get("last_ess"), ".2f"),
            _opt(r["answer_loglik"], ".3f"), _opt(r["answer_confidence"], ".3f")]


def _one_shot_group_cells(g: dict) -> list:
    c = g["comparable"]
    status = ", ".join(f"{visible(k)} {v}" for k, v in g["statuses"].items())
    return [Text(visible(_sampler(c))), f"{g['alpha']:g}", str(c.get("max_new_tokens")),
            f"{g['sessions']} ({g['prompts']} prompt{'s' if g['prompts'] != 1 else ''})", status,
            f"{g['wall_s_mean']:.2f}", f"{g['tokens_generated_mean']:.0f}", f"{g['answer_tokens_mean']:.0f}",
            _opt(g["resamplings_mean"], ".1f"),
            _opt(g["answer_loglik_mean"], ".3f"), _opt(g["answer_confidence_mean"], ".3f")]


def _engine(c: dict) -> str:
    return " ".join(str(c[k]) for k in ("backend", "model", "device") if c.get(k) is not None)


# what tells groups apart beyond their columns: said once under the table where every group shares it
UNSHOWN = {"engine": _engine, "sessions at once": lambda c: str(c["at_once"]), "tau": lambda c: f"{c['tau']:g}",
           "epsilon": lambda c: f"{c['epsilon']:g}"}
ONE_SHOT_UNSHOWN = {k: f for k, f in UNSHOWN.items() if k != "epsilon"}  # epsilon sets MH classes only


def _table(console: Console, title: str, caption: str, what: str, columns: tuple[str, ...],
           labels: list[tuple[str, Text]], cells: list[list]) -> Table:
    """Rows of cells under `columns`, each named by its (id, `what`); where that does not fit the
    terminal, turned: one row per quantity, one column per session or group."""
    # each column as wide as its widest cell, `what` folded into at least 16; two cells between
    # columns (padding and rule), two at each edge
    need = sum(max(cell_len(str(c)) for c in (col, *(row[i] for row in cells))) for i, col in enumerate(columns))
    need += max((cell_len(i) for i, _ in labels), default=2) + 16 + 2 * (len(columns) + 1) + 4
    if need <= console.width:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=caption,
                      caption_justify="left", collapse_padding=True)
        table.add_column("id", justify="right", no_wrap=True)
        table.add_column(what, overflow="fold", ratio=1, min_width=16)
        for col in columns:
            table.add_column(col, justify="right" if col in RIGHT else "left", no_wrap=True)
        for (ident, text), row in zip(labels, cells):
            table.add_row(ident, text, *row)
        return table
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=caption, caption_justify="left")
    table.add_column("")
    for ident, _ in labels:
        table.add_column(ident, justify="right", overflow="fold")
    table.add_row(what, *[Text(text.plain[:24]) for _, text in labels])
    for i, col in enumerate(columns):
        table.add_row(col, *[row[i] for row in cells])
    return table


def render(console: Console, rows: list[dict], groups: list[dict]) -> None:
    """The MH chains' sessions and groups, then the one-shot methods' (each table only where it has rows)."""
    names = list(dict.fromkeys(r["trace"] for r in rows))
    caption = " ".join(f"[{i}] {visible(Path(n).name, keep_newlines=False)}" for i, n in enumerate(names, 1))
    chains = [r for r in rows if not r["one_shot"]]
    one_shot = [r for r in rows if r["one_shot"]]
    if chains or not rows:
        limited = any(r.get("limit_share") is not None for r in chains)
        said = caption + ("; lim%: the binding limit (the dependency or the compute limit, whichever is longer) as a "
                          "share of the session's time" if limited else "")
        console.print(_table(console, "sessions", said, "prompt", SESSION_COLUMNS, _labels(chains, names),
                             [_session_cells(r) for r in chains]))
        _render_pooled(console, "pooled (comparable sessions)", [g for g in groups if not g["one_shot"]], names,
                       UNSHOWN, GROUP_COLUMNS, _group_cells)
    if one_shot:
        console.print(_table(console, "one-shot sessions and populations (tr, acc: a population's transitions)",
                             caption, "prompt", ONE_SHOT_SESSION_COLUMNS, _labels(one_shot, names),
                             [_one_shot_session_cells(r) for r in one_shot]))
        _render_pooled(console, "pooled one-shot sessions (comparable sessions; per session: means)",
                       [g for g in groups if g["one_shot"]], names, ONE_SHOT_UNSHOWN, ONE_SHOT_GROUP_COLUMNS,
                       _one_shot_group_cells)
    _render_method_rows(console, [r for r in rows if r.get("method_rows")], names)


def _render_method_rows(console: Console, rows: list[dict], names: list[str]) -> None:
    """Each population's and SMC session's own numbers (the ladder's pairs top-down with their mean swap
    probability and Lambda, per-member transitions; log Z, ESS and genealogy per block), as `run` prints them."""
    for (ident, _), r in zip(_labels(rows, names), rows):
        table = Table(title=f"{ident} {visible(describe(r['params']), keep_newlines=False)}", title_justify="left",
                      box=box.SIMPLE_HEAD, show_header=False)
        table.add_column("", no_wrap=True)
        table.add_column("", overflow="fold")
        for label, value in r["method_rows"]:
            table.add_row(visible(label, keep_newlines=False), visible(value, keep_newlines=False))
        console.print(table)


def _labels(rows: list[dict], names: list[str]) -> list[tuple[str, Text]]:
    labels = []
    for r in rows:
        prompt = visible(r["prompt"], keep_newlines=False)
        labels.append((f"[{names.index(r['trace']) + 1}]#{r['session']}",
                       Text(prompt if len(prompt) <= 60 else prompt[:59] + "…")))
    return labels


def _render_pooled(console: Console, title: str, groups: list[dict], names: list[str], unshown: dict,
                   columns: tuple[str, ...], cells) -> None:
    # what every group shares is said once, under the table; what differs, in each group's row
    said = {k: {f(g["comparable"]) for g in groups} for k, f in unshown.items()}
    pools = []
    for g in groups:
        ids = [f"[{names.index(m['trace']) + 1}]#{m['session']}" for m in g["members"]]
        apart = [f"{k} {f(g['comparable'])}" for k, f in unshown.items() if len(said[k]) > 1]
        pools.append((f"g{g['group']}", Text(visible(" ".join(ids[:6]) + (" …" if len(ids) > 6 else "")
                                                         + "".join(f" · {a}" for a in apart), keep_newlines=False))))
    shared = ", ".join(f"{k} {v}" for k, vs in said.items() if len(vs) == 1 for v in vs if v)
    note = "each row pools the sessions that differ only in prompt and seed" + (f"; all: {shared}" if shared else "")
    console.print(_table(console, title, visible(note, keep_newlines=False), "pools", columns, pools,
                         [cells(g) for g in groups]))


# -- two recorded runs, paired (`stats --compare A B`) ------------------------------------------

COMPARED = (("loglik", "loglik"), ("confidence", "confidence"), ("acceptance", "acceptance"),
            ("time_s", "time/prompt"))


def _method_key(params: dict, start) -> tuple:
    """What makes sessions one method's (their comparable group, whatever ran beside them)."""
    key = comparable(params, start.backend, start.model, start.backend_info.get("device"))
    key.pop("at_once")
    return tuple(key.items())


def _side(trace: Trace, select, shown: str) -> tuple[dict[tuple, tuple], dict]:
    """The done sessions of one side by (prompt, seed, chain), and what was left out."""
    from presto_tui.errors import InputError

    chosen = [s for s in trace.sessions if select is None or select(s.start.params)]
    methods = {_method_key(s.start.params, s.start): s.start.params for s in chosen}
    if not chosen:
        raise InputError(f"{shown}: no session matches" if select is not None else f"{shown}: no sessions")
    if len(methods) > 1:
        names = "; ".join(sorted({describe(p) for p in methods.values()}))
        raise InputError(f"{shown}: sessions of {len(methods)} methods ({names}); choose one with PATH@METHOD, "
                         "e.g. run.jsonl@powermh+spine")
    out: dict[tuple, tuple] = {}
    left = {"not done": 0}
    for s in chosen:
        summary = s.summary()
        if not s.ended or summary.status != "done":
            left["not done"] += 1
            continue
        key = (s.start.prompt, s.start.params.get("seed"), s.start.chain)
        if key in out:
            raise InputError(f"{shown}: two sessions of prompt {visible(s.start.prompt[:40], keep_newlines=False)!r} "
                             f"with seed {key[1]} (chain {key[2] + 1}); each side holds one per prompt and seed")
        out[key] = (s, summary)
    return out, {"method": next(iter(methods.values())), "sessions": len(chosen), **left}


def compare(a: Trace, b: Trace, select_a=None, select_b=None, shown_a: str = "A", shown_b: str = "B") -> dict:
    """The paired statistics of two runs (eq. 23), sessions matched by prompt, seed and chain: the answers'
    log-likelihood and confidence under p0, the acceptance rate, and the time per prompt (with the
    ratio of mean times, eq. 20)."""
    from presto_tui.logs.paired import paired_tost

    side_a, left_a = _side(a, select_a, shown_a)
    side_b, left_b = _side(b, select_b, shown_b)
    keys = [k for k in side_a if k in side_b]
    pairs = [(side_a[k][1], side_b[k][1]) for k in keys]
    identical = bool(pairs) and all(x.tokens == y.tokens for x, y in pairs)

    def value(s, stat: str) -> float:
        v = {"loglik": s.answer_loglik, "confidence": s.answer_confidence, "time_s": s.wall_s,
             "acceptance": s.acceptance_rate if s.transitions else None}[stat]
        return float("nan") if v is None else float(v)

    tests = [paired_tost(stat, [value(x, stat) for x, _ in pairs], [value(y, stat) for _, y in pairs],
                         identical=identical and stat in ("loglik", "confidence")).to_dict()
             for stat, _ in COMPARED]
    times = next(t for t in tests if t["statistic"] == "time_s")
    speedup = times["mean_first"] / times["mean_second"] if times["mean_second"] else None
    models = {side_a[k][0].start.model for k in keys} | {side_b[k][0].start.model for k in keys}

    def side(trace: Trace, shown: str, left: dict, matched: dict) -> dict:
        return {"trace": str(trace.path), "as_given": shown, "method": describe(left["method"]),
                "params": left["method"], "sessions": left["sessions"], "not_done": left["not done"],
                "unmatched": len(matched) - len(keys)}

    pa, pb = left_a["method"], left_b["method"]
    differ = {k: (pa.get(k), pb.get(k)) for k in sorted(set(pa) | set(pb)) if k != "seed" and pa.get(k) != pb.get(k)}
    return {"a": side(a, shown_a, left_a, side_a), "b": side(b, shown_b, left_b, side_b), "pairs": len(keys),
            "identical": identical, "tests": tests, "speedup": speedup, "params_differ": differ,
            "same_model": len(models) <= 1}


def render_compare(console: Console, res: dict) -> None:
    names = dict(COMPARED)
    a, b = res["a"], res["b"]
    line = lambda side: visible(f"{side['method']} ({side['as_given']})", keep_newlines=False)
    differ = ", ".join(f"{k} {x} / {y}" for k, (x, y) in res["params_differ"].items())
    lines = [f"A: {line(a)}", f"B: {line(b)}", *([visible(f"A / B differ in: {differ}", keep_newlines=False)]
                                                  if differ else []),
             f"{res['pairs']} pairs matched by prompt, seed and chain"]
    title = "\n".join(lines)
    table = Table(title=Text(title),
                  title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
                  caption="loglik, confidence: the answers' eqs. 21-22 under p0. Paired TOST (eq. 23): B minus A; "
                          "margin 0.2 SD of A across prompts; equivalent when p_eq < 0.05 (the 90% interval inside "
                          "the margin)", caption_justify="left")
    for col in ("statistic", "mean A", "mean B", "B - A", "90% interval", "margin", "p_eq", "verdict"):
        # the text columns wrap, so that the numbers stay whole in 80 columns
        table.add_column(col, justify="left" if col in ("statistic", "verdict") else "right",
                         no_wrap=col not in ("90% interval", "verdict"))
    f = lambda x, fmt: "-" if x is None else format(x, fmt)
    for t in res["tests"]:
        interval = "-" if t["ci_low"] is None else f"[{t['ci_low']:+.3g}, {t['ci_high']:+.3g}]"
        verdict = "identical tokens: no test needed" if t["verdict"] == "identical" else t["verdict"]
        table.add_row(names[t["statistic"]], f(t["mean_first"], ".4g"), f(t["mean_second"], ".4g"),
                      f(t["mean_diff"], "+.3g"), interval, f(t["margin"], ".3g"), f(t["p_eq"], ".3g"), verdict)
    console.print(table)
    if res["speedup"] is not None:
        console.print(f"time per prompt: A's mean over B's = {res['speedup']:.2f}x (ratio of means, eq. 20)")
    for side, name in ((a, "A"), (b, "B")):
        left = [f"{side['unmatched']} without a match in the other"] if side["unmatched"] else []
        left += [f"{side['not_done']} not done (cancelled, failed, cut short or damaged)"] if side["not_done"] else []
        if left:
            console.print(f"{name}: left out " + ", ".join(left))
    if not res["same_model"]:
        console.print("warning: the runs used different models; likelihood and confidence are under different p0")
