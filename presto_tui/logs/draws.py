"""Every chain's draws in one export: a tidy CSV, and the NetCDF file ArviZ writes for its DataTree.

`run --draws`, `stats --draws` (and the chains screen, through the same functions) fold
each MH session's events into a `ChainDraws` (its transitions and the state after each,
from the round trees), group the chains of a prompt (`--chains M`; a single chain is a
group of one), and write them.

Prompts are numbered from 1 in order of first appearance, every session counting (a
baseline's, or one cut before its first transition, keeps its number and has no draws), as
`presto_tui.read_trace(...).chains(p)` numbers them.  Chains of a prompt that were cut at
different transitions (a session cancelled midway) are cut to the shortest: the diagnostics
read the first `common_draws` kept transitions of every chain of a block, here as in `run`,
`stats` and the app (`diagnostics.draws_of`), and the export says which:

- `.csv`, tidy: one row per transition of every chain, all of them, with `prompt`,
  `group`, `chain`, `block` and `transition` (within its block), each counted from 1 as
  every screen and table counts them (the trace's own `chain` field is that minus 1),
  `accepted`, `log_target`, `loglik`, `confidence`, `state` (an id per distinct state over
  the whole export, from 1, in order of first visit: chains that visit the same tokens share
  it) and `kept` (whether the diagnostics read it: kept by `--burn-in` and `--thin`, and
  within the prompt's common length); cells as the JSON writes them (`logs/tidy.py`);
- `.nc`, ArviZ's DataTree (`diagnostics.datatree`: arviz-base's `from_dict`; xarray's
  `to_netcdf` through h5netcdf): `posterior` holds `log_target`, `loglik` and `confidence`
  over (chain, draw, prompt, block), exactly the draws the diagnostics read (`draw` from 1,
  `prompt` the numbers above, prompts without draws left out); `warmup_posterior` the
  burn-in's, cut alike; `sample_stats` `accepted` (bool), `state` and `transition` of each
  draw; `constant_data` each prompt's text, its number of `chains` and, per prompt and block,
  the `draws` every chain holds (and `warmup_draws`).  A prompt's draws hold no NaN; where
  prompts differ in chains or draws the rest of those dimensions is NaN (-1 for the ids,
  false for `accepted`), so ArviZ gives a prompt's printed diagnostics on that prompt and
  block: `arviz_stats.rhat(dt.posterior.sel(prompt=p, block=b).dropna("chain", how="all")
  .dropna("draw"))`, and on the whole file where every prompt and block holds as many (one
  prompt, chains that all ended).  ArviZ reads it with nothing of presto-tui
  (`arviz_base.convert_to_datatree(path)`).

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
    params: dict = field(default_factory=dict)  # the session's (what its method's warm-up is read from)
    transitions: list[Transition] = field(default_factory=list)
    _states: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)

    def update(self, ev: Event) -> ChainDraws:
        if isinstance(ev, SessionStart):
            self.group, self.prompt, self.chain, self.session_id = ev.group, ev.prompt, ev.chain, ev.session_id
            self.params = ev.params
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
    """The chains by prompt, each prompt numbered by its place here from 1 (`prompt` in both files, as
    `presto_tui.read_trace(...).chains(p)` numbers it): a `--chains M` group in chain order, a single
    session alone, in order of first appearance; a prompt without draws (a baseline, a session cut
    before its first transition) keeps its number and has no rows."""
    groups: dict[str, list[ChainDraws]] = {}
    for c in chains:
        groups.setdefault(c.group or f"session:{c.session_id or id(c)}", []).append(c)
    return [sorted(g, key=lambda c: c.chain) for g in groups.values()]


def common_draws(group: Sequence[ChainDraws], block: int, selection: Selection = ALL) -> int:
    """How many draws of `block` the diagnostics read from each chain of a prompt: the transitions
    `selection` keeps, every chain cut to the shortest (a chain cancelled midway cuts the others),
    as `diagnostics.draws_of` cuts them."""
    return min(sum(1 for t in c.transitions if t.block == block and selection.keeps(t.k)) for c in group)


def common_warmup(group: Sequence[ChainDraws], block: int, selection: Selection = ALL) -> int:
    """The burn-in draws of `block` in every chain of a prompt, cut to the shortest chain's."""
    return min(sum(1 for t in c.transitions if t.block == block and t.k < selection.burn_in) for c in group)


def rows(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL) -> list[dict]:
    """The tidy rows (FIELDS), every transition of every chain; `kept`: the diagnostics read it (kept
    by `selection`, and within the prompt's common length: `common_draws`)."""
    ids: dict[tuple[int, ...], int] = {}
    out = []
    for p, group in enumerate(groups, 1):
        common = {b: common_draws(group, b, selection) for b in {t.block for c in group for t in c.transitions}}
        for c in group:
            seen: dict[int, int] = {}  # block -> draws kept so far
            for t in c.transitions:
                tokens = c.state(t)
                state = None if tokens is None else ids.setdefault(tokens, len(ids) + 1)
                kept = selection.keeps(t.k) and seen.get(t.block, 0) < common[t.block]
                seen[t.block] = seen.get(t.block, 0) + selection.keeps(t.k)
                out.append({"prompt": p, "group": c.group, "chain": c.chain + 1, "block": t.block + 1,
                            "transition": t.k + 1, "accepted": t.accepted, "log_target": t.log_target,
                            "loglik": t.loglik, "confidence": t.confidence, "state": state, "kept": kept})
    return out


def csv_of(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL) -> str:
    return csv_text(FIELDS, rows(groups, selection))


def selected(groups: Sequence[Sequence[ChainDraws]], selection: Selection) -> Selection:
    """`selection` with its burn-in raised over a method's own warm-up (`diagnostics.warmed`: the draws of an
    adaptive ladder's warm-up are warm-up here as in the diagnostics)."""
    return diagnostics.warmed(selection, [c.params for g in groups for c in g])


def with_draws(groups: Sequence[Sequence[ChainDraws]]) -> list[int]:
    """The numbers (from 1) of the prompts that have draws."""
    return [p for p, g in enumerate(groups, 1) if any(c.transitions for c in g)]


def datatree(groups: Sequence[Sequence[ChainDraws]], selection: Selection = ALL):
    """ArviZ's DataTree of the draws (see the module docstring)."""
    import numpy as np

    table = rows(groups, selection)
    prompts = with_draws(groups)
    at = {p: i for i, p in enumerate(prompts)}
    chains = max(len(groups[p - 1]) for p in prompts)
    blocks = max(r["block"] for r in table)
    common = np.array([[common_draws(groups[p - 1], b, selection) for b in range(blocks)] for p in prompts])
    warm_common = np.array([[common_warmup(groups[p - 1], b, selection) for b in range(blocks)] for p in prompts])
    kept, warm = int(common.max()), int(warm_common.max())
    shape, warm_shape = (chains, kept, len(prompts), blocks), (chains, warm, len(prompts), blocks)
    post = {q: np.full(shape, np.nan) for q in QUANTITIES}
    early = {q: np.full(warm_shape, np.nan) for q in QUANTITIES}
    stats = {"accepted": np.zeros(shape, dtype=bool), "state": np.full(shape, -1, dtype=np.int64),
             "transition": np.full(shape, -1, dtype=np.int64)}
    chain_at = {(p, c.chain + 1): m for p, g in enumerate(groups, 1) for m, c in enumerate(g)}
    slot: dict[tuple[int, int, int], int] = {}  # (prompt, chain, block) -> next kept draw
    for r in table:
        m, p, b = chain_at[(r["prompt"], r["chain"])], at[r["prompt"]], r["block"] - 1
        if not r["kept"]:
            if r["transition"] <= warm_common[p, b]:
                for q in QUANTITIES:
                    early[q][m, r["transition"] - 1, p, b] = r[q]
            continue
        d = slot.get((p, m, b), 0)
        slot[(p, m, b)] = d + 1
        for q in QUANTITIES:
            post[q][m, d, p, b] = r[q]
        stats["accepted"][m, d, p, b] = r["accepted"]
        stats["state"][m, d, p, b] = -1 if r["state"] is None else r["state"]
        stats["transition"][m, d, p, b] = r["transition"]
    dims = {name: ["prompt", "block"] for name in (*QUANTITIES, *stats)} | {"prompt_text": ["prompt"],
                                                                           "chains": ["prompt"],
                                                                           "draws": ["prompt", "block"],
                                                                           "warmup_draws": ["prompt", "block"]}
    data = {"posterior": post, "sample_stats": stats,
            "constant_data": {"prompt_text": np.array([groups[p - 1][0].prompt for p in prompts], dtype=object),
                              "chains": np.array([len(groups[p - 1]) for p in prompts], dtype=np.int64),
                              "draws": common.astype(np.int64), "warmup_draws": warm_common.astype(np.int64)}}
    if warm:
        data["warmup_posterior"] = early
    coords = {"chain": list(range(1, chains + 1)), "prompt": prompts, "block": list(range(1, blocks + 1))}
    attrs = {"created_by": f"presto-tui {__version__}", **selection.to_dict(),
             "groups": ",".join(groups[p - 1][0].group for p in prompts)}
    tree = diagnostics.datatree(data, dims, coords, attrs)
    for name, node in list(tree.children.items()):  # draws from 1 in each group, as chains, blocks, prompts
        if "draw" in node.dims:
            tree[name] = node.to_dataset().assign_coords(draw=np.arange(1, node.sizes["draw"] + 1))
    return tree


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
    if not with_draws(groups):
        return []
    selection = selected(groups, selection)
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
