"""An evaluation's results: one JSON object, and the tables a person reads.

Per method: accuracy with its 95% Wilson interval over the items it finished, time per
prompt, MH transitions, tokens generated, peak KV-pool use, and the answer's mean
log-likelihood and confidence under p0 (eqs. 21-22).  Per item: every method's answer,
what the grader read from it and whether it was right.  Then the paired equivalence
tests (eq. 23): every PreSTO method against its sequential sampler when both are listed,
and any pair asked for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from presto_tui.api.params import describe, sequential_of
from presto_tui.errors import describe as describe_error
from presto_tui.eval.runner import Evaluation, Outcome
from presto_tui.logs.paired import accuracy, paired_tost
from presto_tui.safetext import visible

# the statistics the paired test compares: (name, the summary's field)
WIDE = 120  # columns from which the table shows each method's settings in words
STATISTICS = (("loglik", "answer_loglik"), ("confidence", "answer_confidence"))


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.fmean(vals) if vals else None


def _chains_diagnostics(o: Outcome, selection) -> list | None:
    """--chains M: the diagnostics of an item's chains (runtime/session/diagnostics.py), over the
    transitions `selection` keeps; None for one chain or a baseline."""
    if len(o.chains) < 2 or not o.summary.draws:
        return None
    from presto_tui.api.diagnostics import chains_report

    return list(chains_report([c.summary for c in o.chains], selection).diagnostics)


def chain_samples(ev: Evaluation, o: Outcome, graders: dict, responses: list | None = None) -> list:
    """The finished chains of a pair (or `responses`, (text, right) of o's item) as pass@k's samples: their
    answers grouped by the item's grader, their grades."""
    from presto_tui.eval.passk import samples

    item = ev.items[o.item]
    if item.grader not in graders:
        from presto_tui.eval.graders import grader

        graders[item.grader] = grader(item.grader)  # it groups answers only: never runs a response's code
    if responses is None:
        responses = [(c.summary.text, c.grade.correct) for c in o.chains if c.status == "done" and c.grade is not None]
    return samples(graders[item.grader], item.prompt, responses)


def sample_estimates(ev: Evaluation, done: list[Outcome], graders: dict) -> dict:
    """--chains M: pass@k and maj@k (k = 1, 2, 4, ..., M) over the items, from each item's chains."""
    from presto_tui.eval.passk import budgets, estimates

    per_item = [chain_samples(ev, o, graders) for o in done]
    m = max((len(s) for s in per_item), default=0)
    if m < 2:
        return {}
    est = estimates(per_item, budgets(m))
    return {"pass_at_k": est["pass"], "maj_at_k": est["maj"], "items_at_k": est["items"],
            "items_left_out_of_k": len(per_item) - int(est["items"][str(m)] or 0)}


def method_rows(ev: Evaluation, selection=None) -> list[dict]:
    from presto_tui.api.diagnostics import ALL

    selection = selection or ALL
    rows = []
    graders: dict = {}
    for j, m in enumerate(ev.methods):
        outs = ev.finished(j)
        done = [o for o in outs if o.status == "done"]
        right = sum(1 for o in done if o.verdict is not None and o.verdict.correct)
        acc = accuracy(right, len(done))
        peaks = [o.kv_peak for o in done if o.kv_peak is not None]
        rows.append({
            "label": m.label, "settings": describe(m.params), "params": m.params.to_dict(),
            "sessions": len(outs), "done": len(done), "failed": len(outs) - len(done),
            "correct": right, "graded": len(done), "accuracy": acc.rate, "accuracy_low": acc.low,
            "accuracy_high": acc.high,
            "time_per_prompt_s": _mean([o.time_s for o in done]),
            "transitions": _mean([float(o.summary.transitions) for o in done]) if m.sampler.chain else None,
            "acceptance_rate": _mean([o.summary.acceptance_rate for o in done if o.summary.transitions]),
            "tokens_generated": _mean([float(o.summary.tokens_generated) for o in done]),
            "kv_peak": max(peaks) if peaks else None,  # the largest over its prompts
            "kv_peak_mean": _mean(peaks),
            "loglik": _mean([o.summary.answer_loglik for o in done]),
            "confidence": _mean([o.summary.answer_confidence for o in done]),
            # --chains M: every chain's answer graded, and how far the chains agree (--vote grades the majority)
            **({"chain_accuracy": _mean([float(c.grade.correct) for o in done for c in o.chains
                                         if c.grade is not None]),
                "agreement": _mean([o.vote["share"] for o in done if o.vote is not None])}
               if any(len(o.chains) > 1 for o in done) else {}),
            **(sample_estimates(ev, done, graders) if any(len(o.chains) > 1 for o in done) else {}),
            **_worst([_chains_diagnostics(o, selection) for o in done]),
        })
    return rows


def _worst(per_item: list[list | None]) -> dict:
    """The worst split R-hat and bulk ESS of the log-target over the items' chains (first block)."""
    first = [next((d for d in ds if d.quantity == "log_target"), None) for ds in per_item if ds]
    if not first:
        return {}
    rhats = [d.rhat for d in first if d is not None and d.rhat is not None]
    esses = [d.ess_bulk for d in first if d is not None and d.ess_bulk is not None]
    return {"rhat_max": max(rhats, default=None), "ess_bulk_min": min(esses, default=None)}


def _answer(o: Outcome, selection=None) -> dict:
    s = o.summary
    d = {"status": o.status, "session_id": o.session_id, "text": s.text, "time_s": o.time_s,
         "transitions": s.transitions, "tokens_generated": s.tokens_generated, "kv_peak": o.kv_peak,
         "loglik": s.answer_loglik, "confidence": s.answer_confidence}
    if o.verdict is not None:
        d.update(extracted=o.verdict.extracted, correct=o.verdict.correct)
        if o.verdict.detail:
            d["detail"] = o.verdict.detail
    if len(o.chains) > 1:
        d["chains"] = [{"text": c.summary.text, "status": c.status,
                        "extracted": None if c.grade is None else c.grade.extracted,
                        "correct": None if c.grade is None else c.grade.correct} for c in o.chains]
        d["chains_correct"] = sum(1 for c in o.chains if c.grade is not None and c.grade.correct)
    if o.vote is not None:
        d["vote"] = o.vote
    if selection is not None and (diags := _chains_diagnostics(o, selection)) is not None:
        d["diagnostics"] = [x.to_dict() for x in diags]
    if s.error:
        d["error"] = s.error
    return d


def item_rows(ev: Evaluation, selection=None) -> list[dict]:
    rows = []
    for i, it in enumerate(ev.items):
        answers = {m.label: _answer(ev.outcomes[(i, j)], selection) for j, m in enumerate(ev.methods)
                   if (i, j) in ev.outcomes and ev.outcomes[(i, j)].status != "running"}
        rows.append({"id": it.id, "prompt": it.prompt, "answer": it.answer, "grader": it.grader, "results": answers})
    return rows


def default_pairs(ev: Evaluation) -> list[tuple[int, int]]:
    """Each PreSTO method against its sequential sampler, where both are listed."""
    out = []
    for j, m in enumerate(ev.methods):
        seq = sequential_of(m, ev.methods)
        if seq is not None:
            out.append((ev.methods.index(seq), j))
    return out


def equivalence(ev: Evaluation, pairs: Sequence[tuple[int, int]]) -> list[dict]:
    """The paired TOST of each statistic for each pair of methods, matched by item (same prompt and seed)."""
    out = []
    for a, b in pairs:
        both = [(ev.outcomes[(i, a)], ev.outcomes[(i, b)]) for i in range(len(ev.items))
                if (i, a) in ev.outcomes and (i, b) in ev.outcomes
                and ev.outcomes[(i, a)].status == ev.outcomes[(i, b)].status == "done"]
        identical = bool(both) and all(x.summary.tokens == y.summary.tokens for x, y in both)
        tests = []
        for key, field in STATISTICS:
            first = [_num(getattr(x.summary, field)) for x, _ in both]
            second = [_num(getattr(y.summary, field)) for _, y in both]
            tests.append(paired_tost(key, first, second, identical=identical).to_dict())
        out.append({"first": ev.methods[a].label, "second": ev.methods[b].label, "identical": identical,
                    "tests": tests})
    return out


def _num(x: float | None) -> float:
    return math.nan if x is None else x


def results(ev: Evaluation, pairs: Sequence[tuple[int, int]], meta: dict) -> dict:
    failure = None if ev.failure is None else describe_error(ev.failure)[1]
    from presto_tui.api.diagnostics import Selection

    selection = Selection(**meta["diagnostics_draws"]) if meta.get("diagnostics_draws") else None
    return {**meta, "interrupted": ev.interrupted, "failure": failure, "methods": method_rows(ev, selection),
            "equivalence": equivalence(ev, pairs), "items": item_rows(ev, selection)}


# -- tables ----------------------------------------------------------------------------------

def _f(x: float | None, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def render(console: Console, res: dict, *, items: bool = True) -> None:
    unit = res.get("time_unit", "s")
    title = (f"{res['backend']} on {visible(str(res['model']), keep_newlines=False)}: {res['tasks']['items']} items "
             f"of {visible(res['tasks']['source'], keep_newlines=False)}, n={res['shared_params']['max_new_tokens']}, "
             f"K={res['shared_params']['steps']}, alpha={res['shared_params']['alpha']:g}")
    wide = console.width >= WIDE  # narrower: no settings column (the method's spec says them; the JSON has all)
    columns = ["method", *(["settings"] if wide else []), "right", "accuracy [95%]", "time", "tr", "tokens", "kv",
               "loglik", "conf"]
    rows: list[list[Text | str]] = []
    for r in res["methods"]:
        acc = "-" if r["accuracy"] is None else (f"{100 * r['accuracy']:.0f}% [{100 * r['accuracy_low']:.0f}, "
                                                 f"{100 * r['accuracy_high']:.0f}]")
        rows.append([Text(r["label"]), *([Text(r["settings"])] if wide else []),
                     f"{r['correct']}/{r['graded']}" + (f" ({r['failed']} failed)" if r["failed"] else ""), acc,
                     _f(r["time_per_prompt_s"], ".2f"), _f(r["transitions"], ".1f"), _f(r["tokens_generated"], ".0f"),
                     _pct(r["kv_peak"]), _f(r["loglik"], ".3f"), _f(r["confidence"], ".3f")])
    caption = (f"accuracy: share right with its 95% Wilson interval (of the items each method finished); time: per "
               f"prompt, {unit}; kv: peak KV-pool use; loglik, conf: the answers' mean eqs. 21-22 under p0")
    # a method's name is never folded ("powermh+stre" / "am"): where the table does not fit, the columns the
    # results file holds anyway go first
    shown = list(columns)
    t = _methods_table(title, caption, shown, columns, rows)
    for col in DROPPED_FIRST:
        if _width(console, t) <= console.width:
            break
        shown.remove(col)
        t = _methods_table(title, caption + (f" ({', '.join(c for c in columns if c not in shown)}: in the results "
                                             "file)"), shown, columns, rows)
    console.print(t)
    if res.get("diagnostics_draws"):  # --chains M: how well each method's chains mixed
        from presto_tui.api.diagnostics import Selection

        worst = "; ".join(f"{r['label']} R-hat {_f(r.get('rhat_max'), '.3f')}, "
                          f"bulk ESS {_f(r.get('ess_bulk_min'), '.0f')}" for r in res["methods"] if "rhat_max" in r)
        if worst:
            console.print(Text(f"chains (worst over the items, log-target; "
                               f"{Selection(**res['diagnostics_draws']).words}): {worst}"))
    if any("pass_at_k" in r for r in res["methods"]):
        render_samples(console, res)
    if items:
        render_items(console, res)
    if res["equivalence"]:
        render_equivalence(console, res["equivalence"])
    if res.get("interrupted"):
        console.print("interrupted: the tables hold the sessions that finished before Ctrl-C")
    if res.get("failure"):
        console.print(Text(f"failed: {visible(res['failure'], keep_newlines=False)}; the tables hold the sessions "
                           "that finished before"))


DROPPED_FIRST = ("kv", "tokens", "tr", "conf")  # the columns a narrow terminal goes without, in order


def _methods_table(title: str, caption: str, shown: list[str], columns: list[str], rows: list[list]) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True, caption=caption,
              caption_justify="left")
    for col in shown:
        i = columns.index(col)
        if col == "settings":  # the words fold; the numbers and the methods' names never do
            t.add_column(col, overflow="fold")
        else:
            t.add_column(col, justify="left" if col == "method" else "right", no_wrap=True,
                         min_width=max(len(col), *(len(str(row[i])) for row in rows)) if rows else None)
    for row in rows:
        t.add_row(*(row[columns.index(col)] for col in shown))
    return t


def _width(console: Console, renderable) -> int:
    return Measurement.get(console, console.options.update_width(10_000), renderable).maximum


def render_samples(console: Console, res: dict) -> None:
    """--chains M: pass@k and maj@k per method, k = 1, 2, 4, ..., M."""
    rows = [r for r in res["methods"] if "pass_at_k" in r]
    ks = list(dict.fromkeys(k for r in rows for k in r["pass_at_k"]))
    m = res.get("chains", max(map(int, ks)))
    left = {r["label"]: r.get("items_left_out_of_k", 0) for r in rows if r.get("items_left_out_of_k")}
    out = ("; left out, with a chain unfinished: " + ", ".join(f"{n} of {label}" for label, n in left.items())) \
        if left else ""
    t = Table(title=f"pass@k and maj@k over {m} chains per item", title_justify="left", box=box.SIMPLE_HEAD,
              collapse_padding=True, caption_justify="left",
              caption="pass@k: at least one of k chains right (the unbiased estimator of Chen et al. 2021 from all "
                      "the chains); maj@k: the majority of k chains' answers right (grouped as the grader groups "
                      f"them, a tie of t answers counted 1/t), averaged over every k of them; every column over "
                      f"the items whose {m} chains all finished{out}")
    t.add_column("method", no_wrap=True)
    for k in ks:
        t.add_column(f"pass@{k}", justify="right", no_wrap=True)
    for k in ks:
        t.add_column(f"maj@{k}", justify="right", no_wrap=True)
    for r in rows:
        t.add_row(Text(r["label"]), *(_pct(r["pass_at_k"].get(k)) for k in ks),
                  *(_pct(r["maj_at_k"].get(k)) for k in ks))
    console.print(t)


def render_items(console: Console, res: dict) -> None:
    labels = [r["label"] for r in res["methods"]]
    t = Table(title="answers per item", title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
              caption="what the grader read: ✓ right, ✗ wrong, · no answer found", caption_justify="left")
    t.add_column("item", no_wrap=True)
    t.add_column("answer", overflow="fold", max_width=16)
    for label in labels:
        t.add_column(label, overflow="fold", max_width=18)
    for it in res["items"]:
        cells = []
        for label in labels:
            a = it["results"].get(label)
            if a is None or a["status"] != "done":
                cells.append(Text("-" if a is None else a["status"]))
                continue
            got = a.get("extracted")
            mark = "✓" if a.get("correct") else ("·" if got is None else "✗")
            shown = "" if got is None else visible(got, keep_newlines=False)
            cells.append(Text(f"{mark} {shown[:40]}".rstrip()))
        t.add_row(Text(visible(it["id"], keep_newlines=False)), Text(visible(it["answer"], keep_newlines=False)[:40]),
                  *cells)
    console.print(t)


WHOLE = {"90% interval": len("interval"), "verdict": len("equivalent")}  # wrapped at a space, never inside a word
TOST_COLUMNS = ("first / second", "statistic", "pairs", "mean diff", "90% interval", "margin", "p_eq", "verdict")
TOST_DROPPED_FIRST = ("margin", "90% interval")  # what a narrow terminal goes without (the results file has it)


def render_equivalence(console: Console, rows: list[dict]) -> None:
    pairs = [(r["first"], r["second"]) for r in rows for _ in r["tests"]]
    cells = []
    for r in rows:
        for s in r["tests"]:
            interval = "-" if s["ci_low"] is None else f"[{s['ci_low']:+.3g}, {s['ci_high']:+.3g}]"
            cells.append(["", s["statistic"], str(s["pairs"]), _f(s["mean_diff"], "+.3g"), interval,
                          _f(s["margin"], ".3g"), _f(s["p_eq"], ".3g"), s["verdict"]])
    # a narrow terminal: the pair on two lines (a method's name is never cut), then fewer columns
    shown, split = list(TOST_COLUMNS), False
    t = _tost_table(shown, cells, pairs, split)
    for step in ("split", *TOST_DROPPED_FIRST):
        if _width(console, t) <= console.width:
            break
        if step == "split":
            split = True
        else:
            shown.remove(step)
        t = _tost_table(shown, cells, pairs, split)
    console.print(t)


def _tost_table(shown: list[str], cells: list[list], pairs: list[tuple[str, str]], split: bool) -> Table:
    left = [c for c in TOST_COLUMNS if c not in shown]
    t = Table(title="paired TOST (eq. 23)", title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
              caption="second minus first, matched by item and seed; margin 0.2 SD of the first; equivalent when "
                      "p_eq < 0.05 (the 90% interval inside the margin); identical: the same tokens in every pair "
                      "(a sampler and PreSTO with decision inputs), no test needed"
                      + (f" ({', '.join(left)}: in the results file)" if left else ""), caption_justify="left")
    names = [f"{a} /\n{b}" if split else f"{a} / {b}" for a, b in pairs]
    for col in shown:
        # the interval and the verdict wrap at a space, so that the numbers stay whole on a narrow terminal
        t.add_column(col, justify="right" if col in ("pairs", "mean diff", "margin", "p_eq") else "left",
                     no_wrap=col not in ("90% interval", "verdict"),
                     min_width=max([12, *(len(ln) for n in names for ln in n.splitlines())])
                     if col == "first / second" else WHOLE.get(col), overflow="fold")
    shown_pair = None
    for row, name, pair in zip(cells, names, pairs):
        first = pair != shown_pair  # the pair once, on its first statistic
        shown_pair = pair
        t.add_row(*(Text(name if first else "") if col == "first / second" else row[TOST_COLUMNS.index(col)]
                    for col in shown))
    return t
