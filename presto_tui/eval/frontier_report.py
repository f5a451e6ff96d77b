"""The frontier's tables, sentences and figures, all drawn from its results JSON (so a saved run can be
drawn again).

The figure has one panel per quality measure (the distance to pi_alpha on an enumerable model;
log-likelihood, confidence and accuracy on any other), quality against the cost per prompt the
fronts were read at (`axis`: time, tokens decoded or engine steps) on a log axis: each method's
points with their 95% intervals, its own Pareto front as a line, points off that front hollow,
the joint front's points ringed; on the distance panel the floor an exact sampler with as many
draws would show.  In the terminal (plotext) each method's front is a line
of its marker and the points off it are dots.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from presto_tui.eval.figures import MARKERS, TEXT_MARKERS, write_figure
from presto_tui.eval.frontier import COSTS, MEASURES, SHARES, Cost
from presto_tui.eval.report import WIDE
from presto_tui.safetext import visible

TITLE_CHARS = 64  # a panel (6.4 in) holds a title line of about this many characters at 10 pt
LABELS = {"tv": "total variation to pi_alpha", "loglik": "log-likelihood (eq. 21)",
          "confidence": "confidence (eq. 22)", "accuracy": "accuracy %", "pass@k": "pass@k %", "maj@k": "maj@k %"}


def _q(key: str, r: dict) -> str:
    x, lo, hi = r.get(key), r.get(f"{key}_low"), r.get(f"{key}_high")
    if x is None:
        return "-"
    if lo is None or hi is None:
        return f"{100 * x:.0f}%" if key in SHARES else f"{x:.3f}"
    if key in SHARES:
        return f"{100 * x:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]"
    return f"{x:.3f} [{lo:.3f}, {hi:.3f}]"


def cost_of(res: dict) -> Cost:
    """The cost axis the results were read at (time, for results from before there was a choice)."""
    return COSTS[res.get("axis", "time")]


def time_label(res: dict) -> str:
    cost = cost_of(res)
    if cost.name != "time":
        return f"{cost.words} per prompt"
    return "time per prompt (" + ("engine clock, virtual s" if res.get("virtual_clock") else "s") + ")"


def render(console: Console, res: dict) -> None:
    """The points table, the readings at equal quality and the sentences."""
    sp = res["shared_params"]
    title = (f"frontier: {res['backend']} on {visible(str(res['model']), keep_newlines=False)}, "
             f"{res['tasks']['items']} prompt(s) x {res['seeds']} seed(s), n={sp['max_new_tokens']}, "
             f"alpha={sp['alpha']:g}")
    measures = res["measures"]
    joint = {k: set(v) for k, v in res["joint_front"].items()}
    own = {k: {label for labels in v.values() for label in labels} for k, v in res["fronts"].items()}
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
              caption=_caption(res), caption_justify="left")
    wide = console.width >= WIDE  # narrower: no settings column (the results file has them)
    t.add_column("method", overflow="fold")
    if wide:
        t.add_column("settings", overflow="fold")
    t.add_column("budget", justify="right", no_wrap=True)
    t.add_column("time", justify="right", no_wrap=True)
    t.add_column("tokens", justify="right", no_wrap=True)
    t.add_column("steps", justify="right", no_wrap=True)
    for key in measures:
        t.add_column(key + " [95%]", justify="right", no_wrap=True)
    t.add_column("front", no_wrap=True)
    for r in res["points"]:
        marks = "".join("★" if r["label"] in joint[k] else ("●" if r["label"] in own[k] else "·") for k in measures)
        t.add_row(Text(r["group"]), *([Text(r["settings"])] if wide else []),
                  "-" if r["axis"] is None else f"{r['axis']}={r['budget']}",
                  "-" if r["time_per_prompt_s"] is None else f"{r['time_per_prompt_s']:.3g}",
                  "-" if r["tokens_per_prompt"] is None else f"{r['tokens_per_prompt']:.0f}",
                  "-" if r.get("steps_per_prompt") is None else f"{r['steps_per_prompt']:.0f}",
                  *(_q(k, r) for k in measures), marks)
    console.print(t)
    if res.get("not_enumerable"):
        console.print(Text(f"(no distance to pi_alpha: {res['not_enumerable']})"))
    render_speedups(console, res)
    for line in res["summary"]:
        console.print(Text(line))
    for key in measures[1:]:
        console.print(Text(res["dominance"][key]))
    if res.get("interrupted"):
        console.print("interrupted: the tables hold the sessions that finished before Ctrl-C")
    if res.get("failure"):
        console.print(Text(f"failed: {visible(res['failure'], keep_newlines=False)}; the tables hold the sessions "
                           "that finished before"))


def _caption(res: dict) -> str:
    unit = "engine clock (virtual s)" if res.get("virtual_clock") else "s"
    words = [f"time: per prompt, {unit}; tokens: generated per prompt; steps: engine steps per prompt; the fronts "
             f"are read against {cost_of(res).words}"]
    if "tv" in res["measures"]:
        floors = [r["tv_floor"] for r in res["points"] if r.get("tv_floor") is not None]
        floor = f" (an exact sampler with these draws would get about {max(floors):.3f})" if floors else ""
        words.append("tv: total variation of the answers' law from pi_alpha (exact), the finite draws' bias taken off "
                     f"by a bootstrap over the seeds, averaged over the prompts, with a 95% basic bootstrap "
                     f"interval{floor}")
    else:
        words.append("loglik, confidence: the answers' mean eqs. 21-22 under p0 with 95% intervals; accuracy: with "
                     "its 95% Wilson interval")
        if "pass@k" in res["measures"]:
            words.append(f"pass@k, maj@k: k = {res['seeds']}, a prompt's seeds its samples (pass@k: Chen et al. "
                         "2021's unbiased estimator; maj@k: their majority answer right)")
    words.append("front, one mark a measure: ★ on the joint front, ● on its method's own front, · dominated")
    return "; ".join(words)


def render_speedups(console: Console, res: dict) -> None:
    key = res["primary"]
    m = MEASURES[key]
    cost = cost_of(res)
    c = "time" if cost.name == "time" else cost.name
    for s in res["speedups"]:
        t = Table(title=f"{s['presto']} against {s['sequential']} at equal {m.name}", title_justify="left",
                  box=box.SIMPLE_HEAD, collapse_padding=True, caption_justify="left",
                  caption=f"{cost.words} {s['presto']} needs for each {key} {s['sequential']}'s front reaches, along "
                          f"its own front (log {c} linear between two points); at most: its cheapest point is already "
                          "better")
        for col in (f"{s['sequential']} point", key, f"{s['sequential']} {c}", f"{s['presto']} {c}", "speedup"):
            t.add_column(col, justify="left" if col.endswith("point") else "right", no_wrap=True)
        for x in s["matched"]:
            bound = x["how"] == "at most"  # its fastest point is already better: a bound, not a reading
            t.add_row(x["at"], f"{x['quality']:.3g}", f"{x['sequential_s']:.3g}",
                      "-" if x["presto_s"] is None else ("<= " if bound else "") + f"{x['presto_s']:.3g}",
                      "-" if x["speedup"] is None else (">= " if bound else "") + f"{x['speedup']:.2f}x")
        console.print(t)
    if res["landing"]:
        chains = list(res["landing"][0]["against"])
        t = Table(title=f"where the other methods land at equal {m.name}", title_justify="left", box=box.SIMPLE_HEAD,
                  collapse_padding=True, caption_justify="left",
                  caption=f"the {cost.words} each MH sampler needs for the point's quality, and how many times the "
                          f"point's own that is (above 1: the point is cheaper)")
        for col in ("point", key, c, *chains):
            t.add_column(col, justify="left" if col == "point" else "right", no_wrap=True)
        for x in res["landing"]:
            cells = []
            for c in chains:
                a = x["against"][c]
                cells.append("not reached" if a["time_s"] is None else
                             ("<= " if a["how"] == "at most" else "") + f"{a['time_s']:.3g} ({a['ratio']:.2f}x)")
            t.add_row(x["label"], f"{x['quality']:.3g}", f"{x['time_s']:.3g}", *cells)
        console.print(t)


# -- figures -----------------------------------------------------------------------------------

def _series(res: dict, key: str):
    """Per method (group): its points with the measure, and which of them are on its own front."""
    front = res["fronts"].get(key, {})
    for group, labels in front.items():
        x = cost_of(res).key
        pts = [r for r in res["points"] if r["group"] == group and r.get(x) is not None and r.get(key) is not None]
        if pts:
            yield group, pts, [r for label in labels for r in pts if r["label"] == label]


def _scale(key: str) -> float:
    return 100.0 if key in SHARES else 1.0


def save_figure(res: dict, stem: Path, fmt: str) -> str | None:
    """`<stem>-frontier.<fmt>`: one panel per measure (None with --figures none or no points)."""
    if fmt == "none" or not any(True for key in res["measures"] for _ in _series(res, key)):
        return None
    return write_figure(figure(res), stem, "frontier", fmt)


def figure(res: dict):
    """The frontier's figure: one panel per measure, each titled whole (the title wraps to the panel)."""
    from matplotlib.figure import Figure

    keys = res["measures"]
    x = cost_of(res).key
    fig = Figure(figsize=(6.4 * len(keys), 4.8), layout="constrained")
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    joint = {k: set(v) for k, v in res["joint_front"].items()}
    for ax, key in zip(axes, keys):
        s = _scale(key)
        colours = itertools.cycle(f"C{i}" for i in range(10))
        for (group, pts, front), marker, colour in zip(_series(res, key), itertools.cycle(MARKERS), colours):
            ax.plot([r[x] for r in front], [s * r[key] for r in front], "-", color=colour, alpha=0.6)
            for r in pts:
                on = r in front
                lo, hi = r.get(f"{key}_low"), r.get(f"{key}_high")
                err = None if lo is None or hi is None else [[s * max(0.0, r[key] - lo)], [s * max(0.0, hi - r[key])]]
                ax.errorbar([r[x]], [s * r[key]], yerr=err, fmt=marker, color=colour,
                            mfc=colour if on else "none", capsize=3, label=group if r is pts[0] else None)
                if r["label"] in joint.get(key, ()):
                    ax.plot([r[x]], [s * r[key]], "o", ms=14, mfc="none", mec="0.3", lw=0.8)
        if key == "tv":
            floors = [r["tv_floor"] for r in res["points"] if r.get("tv_floor") is not None]
            if floors:
                ax.axhline(max(floors), ls="--", color="0.5", lw=1, label="exact sampler, same draws")
            ax.set_ylim(bottom=0)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_tick)
        ax.xaxis.set_minor_formatter(_tick)
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.set_xlabel(time_label(res))
        ax.set_ylabel(LABELS[key] + (" (lower is better)" if key == "tv" else ""))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        # the engine on a line of its own, and each line wrapped to the panel's width: a model's name is long
        # (synthetic-v3-o2-s0-x1-noeos), and a title wider than its figure is cut at the figure's edge
        words = (f"{LABELS[key]} against {cost_of(res).words}", f"{res['backend']} {res['model']}")
        ax.set_title("\n".join(textwrap.fill(w, TITLE_CHARS) for w in words), fontsize=10)
    return fig


def _tick(x: float, _pos: object = None) -> str:
    """A log axis's tick label at 1, 2 and 5 times a power of ten (the others crowd), plainly written."""
    if x <= 0:
        return ""
    mantissa = x / 10 ** math.floor(math.log10(x))
    return f"{x:g}" if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else ""


def terminal_figures(res: dict, width: int = 100, height: int = 20) -> list[str]:
    """One plot a measure as text (plotext, no colours): each method's front a line of its marker."""
    import plotext as plt

    out = []
    x = cost_of(res).key
    for key in res["measures"]:
        series = list(_series(res, key))
        if not series:
            continue
        s = _scale(key)
        plt.clear_figure()
        plt.theme("clear")
        plt.plotsize(max(40, width), height)
        plt.xscale("log")
        for (group, pts, front), mark in zip(series, itertools.cycle(TEXT_MARKERS)):
            plt.plot([r[x] for r in front], [s * r[key] for r in front], marker=mark, label=group)
            off = [r for r in pts if r not in front]
            if off:
                plt.scatter([r[x] for r in off], [s * r[key] for r in off], marker="x")
        ys = [s * r[key] for _, pts, _ in series for r in pts]
        lo, hi = min(ys), max(ys)
        # the legend takes the top rows at the left: the points stay below it
        top = min(0.8, (len(series) + 1) / max(1, height - 5))
        plt.ylim(lo - 0.05 * (hi - lo or 1), hi + top / (1 - top) * (hi - lo or 1))
        plt.title(f"{LABELS[key]}: each method's front (x: off it)")
        plt.xlabel(time_label(res))
        plt.ylabel(key)
        out.append(plt.uncolorize(plt.build()))
    plt.clear_figure()
    return out


# -- another reading of the same results ----------------------------------------------------------

def read_again(res: dict, axis: str) -> dict:
    """The results read against another cost axis: every point carries its time, tokens and engine steps,
    so the fronts, the sentences and the readings at equal quality are made again from them, nothing run."""
    from presto_tui.api.params import SamplerParams
    from presto_tui.eval.frontier import COSTS, analyse, parse_spec

    points = parse_spec(res["frontier"], SamplerParams(**res["shared_params"]))
    return {**res, **analyse(res["points"], points, res["measures"], COSTS[axis])}


def main(argv: list[str] | None = None) -> None:
    """`python -m presto_tui.eval.frontier_report RESULTS.json [time|tokens|steps]`: the tables of a saved
    frontier, read against the axis given (default: the one it was run with)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    res = json.loads(Path(args[0]).read_text())
    if len(args) > 1:
        res = read_again(res, args[1])
    render(Console(width=200), res)


if __name__ == "__main__":
    main()
