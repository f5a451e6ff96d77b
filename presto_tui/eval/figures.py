"""The two plots of appendix E.8 (Figure 20's axes), in the terminal and as image files.

- accuracy against time per prompt, each method a point with its 95% Wilson interval;
- peak KV-pool use against time per prompt (engines that report their KV pool: vLLM).

Lower left is cheaper; higher is better on the first.  Image files come from matplotlib
(no pyplot: no global state, no display needed), the terminal's from plotext.  Both
read the results JSON, so a figure can be drawn again from a saved run.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from presto_tui.errors import InputError, OutputError

FORMATS = ("png", "svg", "none")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per method, so points that overlap stay told apart
TEXT_MARKERS = "●■▲◆▼✚✖★"
NO_KV = "the engine reports no KV pool (vLLM does; synthetic and transformers do not, nor engines in Ray workers)"


def _points(res: dict, key: str) -> list[dict]:
    return [r for r in res["methods"] if r["time_per_prompt_s"] is not None and r.get(key) is not None]


def time_label(res: dict) -> str:
    unit = "virtual s" if res.get("virtual_clock") else "s"
    return f"time per prompt ({unit})"


def need_matplotlib(fmt: str) -> None:
    """One line, before any work, when image files are asked for and matplotlib is missing."""
    if fmt == "none":
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("figure files need matplotlib: pip install 'presto-tui[eval]' (or --figures none)") from None


def save_figures(res: dict, stem: Path, fmt: str) -> dict:
    """Write `<stem>-accuracy.<fmt>` and `<stem>-kv.<fmt>` (when the engine reports KV use); their paths,
    and why one is missing."""
    out: dict = {"accuracy": None, "kv": None}
    if fmt == "none":
        return out
    acc = _points(res, "accuracy")
    if acc:
        fig, ax, marks = _axes()
        for r in acc:
            y = 100 * r["accuracy"]
            err = [[y - 100 * r["accuracy_low"]], [100 * r["accuracy_high"] - y]]
            ax.errorbar([r["time_per_prompt_s"]], [y], yerr=err, fmt=next(marks), capsize=4, label=r["label"])
        ax.set_ylim(-2, 102)
        _finish(ax, res, "accuracy (%), 95% Wilson interval", "accuracy against time")
        out["accuracy"] = write_figure(fig, stem, "accuracy", fmt)
    kv = _points(res, "kv_peak")
    if kv:
        fig, ax, marks = _axes()
        for r in kv:
            ax.plot([r["time_per_prompt_s"]], [100 * r["kv_peak"]], next(marks), label=r["label"])
        ax.set_ylim(0, 1.2 * max(100 * r["kv_peak"] for r in kv) or 1)
        _finish(ax, res, "peak KV-pool use (%, largest over prompts)", "peak KV-pool use against time")
        out["kv"] = write_figure(fig, stem, "kv", fmt)
    else:
        out["kv_missing"] = NO_KV
    return out


def _axes():
    """A figure, its axes, and the markers to cycle through (one a method)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    return fig, fig.add_subplot(), itertools.cycle(MARKERS)


def _finish(ax, res: dict, ylabel: str, what: str) -> None:
    ax.set_xlabel(time_label(res))
    ax.set_ylabel(ylabel)
    ax.set_xlim(left=0)
    ax.legend(fontsize=8)
    ax.set_title(_title(res, what), fontsize=10)
    ax.grid(alpha=0.3)


def _title(res: dict, what: str) -> str:
    return f"{what}: {res['tasks']['items']} items, {res['backend']} {res['model']}"


def write_figure(fig, stem: Path, name: str, fmt: str) -> str:
    path = stem.with_name(f"{stem.name}-{name}.{fmt}")
    try:
        # no dates or software versions inside: the same results give the same file
        fig.savefig(path, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else {"Software": None})
    except OSError as e:
        raise OutputError(f"{path}: cannot write the figure ({e.strerror or e})") from None
    return str(path)


def terminal_figures(res: dict, width: int = 100, height: int = 18) -> list[str]:
    """The plots as text (plotext), without colours: one string per plot that has points."""
    import plotext as plt

    out = []
    for key, ylabel, scale in (("accuracy", "accuracy %", 100), ("kv_peak", "peak KV-pool use %", 100)):
        pts = _points(res, key)
        if not pts:
            continue
        plt.clear_figure()
        plt.theme("clear")
        plt.plotsize(max(40, width), height)
        xs = [r["time_per_prompt_s"] for r in pts]
        ys = [scale * r[key] for r in pts]
        if key == "accuracy":  # each interval as a vertical line (the Wilson interval is not symmetric)
            for x, r in zip(xs, pts):
                plt.plot([x, x], [100 * r["accuracy_low"], 100 * r["accuracy_high"]], marker="│")
            plt.ylim(0, 100)
        else:
            plt.ylim(0, max(ys) * 1.25 or 1)
        for x, y, r, mark in zip(xs, ys, pts, itertools.cycle(TEXT_MARKERS)):
            plt.scatter([x], [y], marker=mark, label=r["label"])
        span = (max(xs) - min(xs)) or max(xs) or 1
        plt.xlim(0, max(xs) + 0.1 * span)
        plt.title(f"{'accuracy (95% interval)' if key == 'accuracy' else 'peak KV-pool use'} against time per "
                  "prompt")
        plt.xlabel(time_label(res))
        plt.ylabel(ylabel)
        out.append(plt.uncolorize(plt.build()))
    plt.clear_figure()
    return out
