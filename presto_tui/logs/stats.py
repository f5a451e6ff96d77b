"""Offline statistics of traces (`presto-tui stats`): per session and pooled.

Every string that came from a trace is shown through `visible()` inside a
`rich.text.Text`, so markup and escape sequences in a crafted trace print as
literal characters.
"""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from presto_tui.logs.reader import Trace
from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN
from presto_tui.safetext import visible

CLASSES = (ACCEPT, REJECT, UNCERTAIN)


def session_rows(traces: list[Trace]) -> list[dict]:
    rows = []
    for t in traces:
        for i, sess in enumerate(t.sessions):
            s = sess.summary()
            d = s.to_dict()
            d.update(trace=str(t.path), session=i, session_id=sess.start.session_id,
                     backend=sess.start.backend, model=sess.start.model,
                     status=s.status if sess.ended else "cut short")  # the trace ends inside this session
            rows.append(d)
    return rows


def pooled(rows: list[dict]) -> dict:
    calls = sum(r["calls"] for r in rows)
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
        "calls": calls,
        "transitions": transitions,
        # over the sessions that make calls (streaming sessions have none)
        "transitions_per_call": sum(r["transitions"] for r in rows if r["calls"]) / calls if calls else 0.0,
        "time_per_call_s": call_time / calls if calls else 0.0,
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
    }


def _rule(p: dict) -> str:
    if p.get("prefetch") == "none":
        return "sequential"
    return f"{p.get('prefetch')}{'/node' if p.get('inputs') == 'node' else ''} N={p.get('budget')}"


def _cells(r: dict) -> list[str]:
    sc = r["scored_eps_counts"]
    n = sum(sc.values()) or 1
    est = r["speedup_estimate"]
    return [visible(r["status"]), str(r["transitions"]),
            f"{r['transitions_per_call']:.2f}" if r["calls"] else f"{r['transitions_per_s']:.2f}/s",
            f"{r['wall_per_transition_s'] * 1e3:.0f}", "-" if est is None else f"{est:.2f}x",
            f"{r['acceptance_rate']:.3f}",
            f"{100 * sc[ACCEPT] / n:.0f}/{100 * sc[REJECT] / n:.0f}/{100 * sc[UNCERTAIN] / n:.0f}",
            f"{r['requests_issued']}/{r['requests_realized']}"]


NUMERIC = ("status", "tr", "tr/call", "ms/tr", "speedup", "acc", "eps% a/r/u", "issued/used")


def render(console: Console, rows: list[dict], pool: dict) -> None:
    names = list(dict.fromkeys(r["trace"] for r in rows))
    caption = " ".join(f"[{i}] {visible(Path(n).name, keep_newlines=False)}" for i, n in enumerate(names))
    wide = console.width >= 100
    table = Table(title="sessions", title_justify="left", box=box.SIMPLE_HEAD, caption=caption,
                  caption_justify="left")
    if wide:
        table.add_column("id", justify="right")
        table.add_column("prompt", overflow="fold", ratio=1)
        table.add_column("rule")
        for col in NUMERIC:
            table.add_column(col, justify="right", no_wrap=True)
    else:  # narrow terminals: one row per quantity, one column per session
        table.add_column("")
        for r in rows:
            table.add_column(f"[{names.index(r['trace'])}]#{r['session']}", justify="right", overflow="fold")
    for r in rows:
        prompt = visible(r["prompt"], keep_newlines=False)
        prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
        if wide:
            table.add_row(f"[{names.index(r['trace'])}]#{r['session']}", Text(prompt),
                          Text(visible(_rule(r["params"]))), *_cells(r))
    if not wide:
        cols = [[Text(visible(r["prompt"], keep_newlines=False)[:16]), Text(visible(_rule(r["params"])))]
                + _cells(r) for r in rows]
        for i, label in enumerate(("prompt", "rule") + NUMERIC):
            table.add_row(label, *[c[i] for c in cols])
    console.print(table)
    t2 = Table(title="pooled", title_justify="left", show_header=False)
    sh = pool["scored_eps_shares"]
    for k, v in (
        ("sessions / prompts", f"{pool['sessions']} / {pool['prompts']}"),
        ("model calls", str(pool["calls"])),
        ("transitions", str(pool["transitions"])),
        ("transitions per call", f"{pool['transitions_per_call']:.2f}" if pool["calls"] else "- (no calls)"),
        ("time per call", f"{pool['time_per_call_s'] * 1e3:.1f} ms" if pool["calls"] else "-"),
        ("transitions per second", f"{pool['transitions_per_s']:.2f}"),
        ("speedup over sequential (est.)", "-" if pool["speedup_estimate"] is None else
         f"{pool['speedup_estimate']:.2f}x (from single-request call times)"),
        ("sessions by status", ", ".join(f"{visible(k)} {v}" for k, v in pool["statuses"].items())),
        ("acceptance rate", f"{pool['acceptance_rate']:.3f}"),
        ("eps-certain share (realized decisions)", f"{pool['eps_certain_share']:.3f}"),
        ("eps classes of scored decisions", f"accept {sh[ACCEPT]:.3f}, reject {sh[REJECT]:.3f}, "
                                            f"uncertain {sh[UNCERTAIN]:.3f}"),
        ("requests issued / on realized path", f"{pool['requests_issued']} / {pool['requests_realized']}"),
    ):
        t2.add_row(k, v)
    console.print(t2)

