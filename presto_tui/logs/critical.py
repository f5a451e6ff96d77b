"""`stats --critical-path`: where each chain's time went, per session and pooled over comparable sessions.

The decomposition itself is `runtime/session/critpath.py` (one definition, which
`bench`, `stats` and the app read); here are its tables.  A session's parts, in
seconds of engine time, add up to its time; the first (`limit`) is the
dependency limit, so the others add up to the time beyond it.  A pooled row
holds the means over its sessions.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from presto_tui.logs.stats import _labels, _table
from presto_tui.runtime.session.critpath import CAUSES, MEANING, SHORT
from presto_tui.safetext import visible

# dep%: the dependency limit (`limit`) over the time; not `stats`' lim%, the binding limit (the dependency or the
# compute limit, whichever is longer, at the engine's learned step cost) over the session's time
# idle%: a population's member-time idle at its barriers (each member's wait for the phase's slowest)
COLUMNS = ("rule", "time s", "dep%", *(SHORT[c] for c in CAUSES), "idle%")


def with_path(rows: list[dict]) -> list[dict]:
    """The sessions whose trace holds what the critical path needs."""
    return [r for r in rows if r.get("critical_path") is not None]


def pooled_paths(rows: list[dict], groups: list[dict]) -> list[dict]:
    """Per comparable group (`stats.pooled_groups`) of sessions with a critical path: the means of
    their time, limit and parts."""
    by_id = {r["session_id"]: r for r in with_path(rows)}
    out = []
    for g in groups:
        paths = [by_id[m["session_id"]]["critical_path"] for m in g["members"] if m["session_id"] in by_id]
        if not paths:
            continue
        out.append({"group": g["group"], "rule": g["rule"], "sessions": len(paths), "members": g["members"],
                    "critical_path": mean_path(paths)})
    return out


def mean_path(paths: list[dict]) -> dict:
    """The means of critical paths' (`CriticalPath.to_dict`) time, limit, parts and (populations') idle share."""
    n = len(paths)
    idle = [p["idle_share"] for p in paths if p.get("idle_share") is not None]
    return {"time_s": sum(p["time_s"] for p in paths) / n, "limit_s": sum(p["limit_s"] for p in paths) / n,
            "parts": {c: sum(p["parts"].get(c, 0.0) for p in paths) / n for c in CAUSES},
            **({"idle_share": sum(idle) / len(idle)} if idle else {})}


def cells(rule: str, cp: dict) -> list:
    time = cp["time_s"]
    return [Text(visible(rule)), f"{time:.2f}", f"{100 * cp['limit_s'] / time:.0f}" if time else "-",
            *(f"{round(cp['parts'].get(c, 0.0), 2) + 0.0:.2f}" for c in CAUSES),  # + 0.0: no "-0.00"
            f"{100 * idle:.0f}" if (idle := cp.get("idle_share")) is not None else "-"]


def legend() -> str:
    return ("seconds of engine time on the critical path, by cause; they add up to the time (from the session's "
            "start to its last decision; a population's: to its end), and all but limit to the time beyond the "
            "dependency limit. dep%: limit as a share of the time (stats' lim% is another number: the binding limit, "
            "the dependency or the compute limit whichever is longer, over the session's time). "
            + "; ".join(f"{SHORT[c]}: {MEANING[c]}" for c in CAUSES)
            + "; idle%: a population's member-time idle at its barriers, waiting for the phase's slowest member")


def render(console: Console, rows: list[dict], pooled: list[dict]) -> None:
    rows = with_path(rows)
    names = list(dict.fromkeys(r["trace"] for r in rows))
    caption = " ".join(f"[{i}] {visible(Path(n).name, keep_newlines=False)}" for i, n in enumerate(names, 1))
    console.print(_table(console, "critical path per session", caption, "prompt", COLUMNS, _labels(rows, names),
                         [cells(r["rule"], r["critical_path"]) for r in rows]))
    labels = [(f"g{g['group']}", Text(f"{g['sessions']} session{'s' if g['sessions'] != 1 else ''}"))
              for g in pooled]
    console.print(_table(console, "critical path pooled (comparable sessions; per session: means)", legend(),
                         "pools", COLUMNS, labels, [cells(g["rule"], g["critical_path"]) for g in pooled]))
    populations = [r for r in rows if r["critical_path"].get("phases")]
    if populations:
        console.print(_table(console, "populations' barriers (members from 1)", BARRIER_LEGEND, "prompt",
                             BARRIER_COLUMNS, _labels(populations, names),
                             [barrier_cells(r["rule"], r["critical_path"]) for r in populations]))


BARRIER_COLUMNS = ("rule", "phases", "path", "barrier s", "idle s", "idle%", "pace set by (phases)",
                   "the pace's paths")
BARRIER_LEGEND = ("a population's phases run from one barrier's crossing to the next; path: the member its critical "
                  "path follows (the most time at work); barrier s: the time that member waited at the barriers for "
                  "the phase's slowest; idle s: every member's wait for the phase's slowest, in member-seconds; "
                  "idle%: that over the members' time; pace: which members arrived last, in how many phases; "
                  "the pace's paths: where the time of the member that set each phase's pace went, summed over the "
                  "phases, its largest causes")


def barrier_cells(rule: str, cp: dict) -> list:
    """A population's row of the barriers table (`CriticalPath.to_dict`'s phases)."""
    phases = cp["phases"]
    pace: dict[int, int] = {}
    for p in phases:
        if sum(p["waits"]) > 0:  # (a phase every member ended at once was paced by none)
            pace[p["pace"]] = pace.get(p["pace"], 0) + 1
    idle = cp.get("idle_share")
    return [Text(visible(rule)), str(len(phases)), str(cp.get("member", "-")), f"{cp['parts'].get('barrier', 0.0):.2f}",
            f"{cp.get('idle_s', 0.0):.2f}", f"{100 * idle:.0f}" if idle is not None else "-",
            " ".join(f"{m}:{n}" for m, n in sorted(pace.items(), key=lambda kv: (-kv[1], kv[0]))),
            _top(phases)]


def _top(phases: list[dict], n: int = 3) -> str:
    """The pace's paths summed over the phases: the n largest causes and their shares."""
    total: dict[str, float] = {}
    for p in phases:
        for c, v in p.get("pace_parts", {}).items():
            total[c] = total.get(c, 0.0) + v
    span = sum(total.values())
    if span <= 0:
        return "-"
    largest = sorted(total.items(), key=lambda kv: -kv[1])[:n]
    return " ".join(f"{SHORT.get(c, c)} {100 * v / span:.0f}%" for c, v in largest)
