"""Every chain's draws in one export: a tidy CSV, and the NetCDF file ArviZ writes for its DataTree.

`run --draws`, `stats --draws` (and the chains screen, through the same functions) fold
each MH session's events into a `ChainDraws` (its transitions and the state after each,
from the round trees), group the chains of a prompt (`--chains M`; a single chain is a
group of one), and write:

- `.csv`, tidy: one row per transition of every chain, with `prompt` (the group's index),
  `group`, `chain`, `block` and `transition` (within its block), each counted from 1 as
  every screen and table counts them (the trace's own `chain` field is that minus 1),
  `accepted`, `log_target`, `loglik`, `confidence`, `state` (an id per distinct state over
  the whole export, from 1, in order of first visit: chains that visit the same tokens share
  it) and `kept` (whether the diagnostics read it under `--burn-in` and `--thin`); cells as
  the JSON writes them (`logs/tidy.py`);
- `.nc`, ArviZ's DataTree (`diagnostics.datatree`: arviz-base's `from_dict`; xarray's
  `to_netcdf` through h5netcdf): `posterior` holds `log_target`, `loglik` and `confidence` over (chain, draw,
  prompt, block), the draws the diagnostics read; `warmup_posterior` the burn-in's;
  `sample_stats` `accepted` (1 or 0), `state` and `transition` of each draw;
  `constant_data` each prompt's text.  Where prompts differ in chains, draws or blocks
  the missing places are NaN (-1 for the ids).  ArviZ reads it back with nothing of
  presto-tui (`arviz_base.convert_to_datatree(path)`, then `arviz_stats.rhat(...)`), and
  gets the diagnostics presto-tui printed.

No Textual here; ArviZ (in `diagnostics.py`) and xarray only to write `.nc`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from presto_tui import __version__
from presto_tui.errors import InputError, OutputError
from presto_tui.files import make_folders, output_path
from presto_tui.logs.tidy import csv_text
from presto_tui.runtime.session import diagnostics
from presto_tui.runtime.session.diagnostics import ALL, QUANTITIES, Selection
from presto_tui.runtime.session.events import Event, RoundDone, SessionStart, Transition
from presto_tui.safetext import visible

FORMATS = (".csv", ".nc")
FIELDS = ("prompt", "group", "chain", "block", "transition", "accepted", "log_target", "loglik", "confidence",
          "state", "kept")
NETCDF_NEEDS = ("arviz_base", "xarray", "h5netcdf")
MISSING = "--draws PATH.nc needs arviz-base, xarray and h5netcdf: pip install 'presto-tui[diagnostics]'"


@dataclass
class ChainDraws:
    """One MH session's draws, folded from its events: every `Transition` and the tokens of the state
    it left the chain in (from the round trees; None where a trace holds no tree for it)."""

    group: str = ""
    prompt: str = ""
    chain: int = 0
    session_id: str = ""
    transitions: list[Transition] = field(default_factory=list)
    _states: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)

    def update(self, ev: Event) -> ChainDraws:
        if isinstance(ev, SessionStart):
            self.group, self.prompt, self.chain, self.session_id = ev.group, ev.prompt, ev.chain, ev.session_id
        elif isinstance(ev, Transition):
            self.transitions.append(ev)
        elif isinstance(ev, RoundDone):
            for i, state in enumerate(ev.tree.states_after_steps()):
                self._states[(ev.block, ev.k_before + i)] = state.tokens
        return self

    @classmethod
    def of(cls, events: Iterable[Event]) -> ChainDraws:
        out = cls()
        for ev in events:
            out.update(ev)
        return out

    def state(self, t: Transition) -> tuple[int, ...] | None:
        return self._states.get((t.block, t.k))


def grouped(chains: Iterable[ChainDraws]) -> list[list[ChainDraws]]:
    """The chains with draws, by prompt: a `--chains M` group in chain order, a single chain alone;
    in order of first appearance."""
    groups: dict[str, list[ChainDraws]] = {}
    for c in chains:
        if c.transitions:
            groups.setdefault(c.group or f"session:{c.session_id or id(c)}", []).append(c)
    return [sorted(g, key=lambda c: c.chain) for g in groups.values()]


def rows(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL) -> list[dict]:
    """The tidy rows (FIELDS), every transition of every chain."""
    ids: dict[tuple[int, ...], int] = {}
    out = []
    for p, group in enumerate(groups, 1):
        for c in group:
            for t in c.transitions:
                tokens = c.state(t)
                state = None if tokens is None else ids.setdefault(tokens, len(ids) + 1)
                out.append({"prompt": p, "group": c.group, "chain": c.chain + 1, "block": t.block + 1,
                            "transition": t.k + 1, "accepted": t.accepted, "log_target": t.log_target,
                            "loglik": t.loglik, "confidence": t.confidence, "state": state,
                            "kept": selection.keeps(t.k)})
    return out


def csv_of(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL) -> str:
    return csv_text(FIELDS, rows(groups, selection))


def datatree(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL):
    """ArviZ's DataTree of the draws (see the module docstring)."""
    import numpy as np

    table = rows(groups, selection)
    chains = max(len(g) for g in groups)
    blocks = max(r["block"] for r in table)
    warm = selection.burn_in
    kept = max((sum(1 for t in c.transitions if t.block == b and selection.keeps(t.k))
                for g in groups for c in g for b in range(blocks)), default=0)
    shape, warm_shape = (chains, kept, len(groups), blocks), (chains, warm, len(groups), blocks)
    post = {q: np.full(shape, np.nan) for q in QUANTITIES}
    early = {q: np.full(warm_shape, np.nan) for q in QUANTITIES}
    stats = {"accepted": np.full(shape, np.nan), "state": np.full(shape, -1, dtype=np.int64),
             "transition": np.full(shape, -1, dtype=np.int64)}
    chain_at = {(p, c.chain + 1): m for p, g in enumerate(groups, 1) for m, c in enumerate(g)}
    slot: dict[tuple[int, int, int], int] = {}  # (prompt, chain, block) -> next kept draw
    for r in table:
        m, p, b = chain_at[(r["prompt"], r["chain"])], r["prompt"] - 1, r["block"] - 1
        if not r["kept"]:
            if r["transition"] <= warm:
                for q in QUANTITIES:
                    early[q][m, r["transition"] - 1, p, b] = r[q]
            continue
        d = slot.get((p, m, b), 0)
        slot[(p, m, b)] = d + 1
        for q in QUANTITIES:
            post[q][m, d, p, b] = r[q]
        stats["accepted"][m, d, p, b] = float(r["accepted"])
        stats["state"][m, d, p, b] = -1 if r["state"] is None else r["state"]
        stats["transition"][m, d, p, b] = r["transition"]
    dims = {name: ["prompt", "block"] for name in (*QUANTITIES, *stats)} | {"prompt_text": ["prompt"]}
    data = {"posterior": post, "sample_stats": stats,
            "constant_data": {"prompt_text": np.array([g[0].prompt for g in groups], dtype=object)}}
    if warm:
        data["warmup_posterior"] = early
    coords = {"chain": list(range(1, chains + 1)), "prompt": list(range(1, len(groups) + 1)),
              "block": list(range(1, blocks + 1))}
    attrs = {"created_by": f"presto-tui {__version__}", **selection.to_dict(),
             "groups": ",".join(g[0].group for g in groups)}
    return diagnostics.datatree(data, dims, coords, attrs)


def check_paths(paths: Sequence[Path]) -> list[Path]:
    """`--draws` paths: a known format each, writable, and what `.nc` needs installed (before any work)."""
    for p in paths:
        if p.suffix not in FORMATS:
            raise InputError(f"--draws {visible(str(p), keep_newlines=False)}: name a .csv (tidy table) or .nc "
                             "(ArviZ's NetCDF) file")
        if p.suffix == ".nc" and not all(importlib.util.find_spec(m) for m in NETCDF_NEEDS):
            raise InputError(MISSING)
        output_path(p, "draws", overwrite=True)
    return list(paths)


def write(paths: Sequence[Path], groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL) -> list[Path]:
    """Write the draws to each path, in the format its suffix names; the paths written (none without
    draws: a baseline or a session cancelled before its first transition has none)."""
    if not groups:
        return []
    for p in paths:
        make_folders(p.parent, "draws", error=OutputError)
        try:
            if p.suffix == ".csv":
                p.write_text(csv_of(groups, selection), encoding="utf-8")
            else:
                datatree(groups, selection).to_netcdf(p, engine="h5netcdf")
        except OSError as e:
            raise OutputError(f"{visible(str(p), keep_newlines=False)}: cannot write the draws "
                              f"({e.strerror or e})") from None
    return list(paths)
