"""What the app exports, and writing it (no Textual here; the screenshot itself is Textual's).

- a round's tree as text: the rows the tree view shows (its mode and reach threshold),
  under a header naming the session and round;
- a population's members (tempering's replicas, the particles) as text or JSON: each member's
  records as its chain's screen shows them, and (JSON) the trace's own records of its barriers or blocks;
- a round's tree as JSON: where it is (session, round or epoch, block), the trace's own `round`
  record (`record`: logs.schema.encode, so `logs.schema.decode` reads it back), with the
  session's prompt and parameters and the text of every token the round mentions;
- the answer: the state's text up to its first EOS;
- a session's chain history (history.py): JSON with every transition and every distinct
  state (its text too), or CSV, one file of transitions and one of states.  Numbers that are not
  finite are written as the trace writes them ("-inf"), so the JSON stays JSON;
- a prompt's chains' draws: the tidy CSV and ArviZ's NetCDF file that `run --draws` and
  `stats --draws` write, by the same functions (`logs/draws.py`).

Sessions, chains, rounds (epochs), blocks and transitions are numbered from 1, as the screen
shows them (a history's `transition` over the session, its `k` within the block: both from 1;
docs/numbering.md); node ids are ids, state ids count from 1.  A trace record exported as it is (a round's tree as
JSON) keeps the trace's own fields, whose indices count from 0 (docs/trace-format.md).

Exported text is passed through `visible()`: a trace's token text may hold escape
sequences, and an exported file or clipboard is often pasted into a terminal.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Sequence
from pathlib import Path

from presto_tui.api.diagnostics import Selection
from presto_tui.api.events import RoundDone, cut_at_eos, event_token_ids
from presto_tui.errors import OutputError
from presto_tui.files import make_folders
from presto_tui.logs import draws
from presto_tui.logs.schema import encode
from presto_tui.logs.tidy import csv_text
from presto_tui.logs.tidy import number as _number
from presto_tui.safetext import visible
from presto_tui.views.state import members
from presto_tui.views.state.history import ChainHistory
from presto_tui.views.state.layout import Layout, tree_text
from presto_tui.views.state.reducer import AppState, SessionView


class ExportError(OutputError):
    """A file that could not be written; the message is one line naming the path and the reason."""


def file_name(kind: str, cursor: tuple[int, int] | None, ext: str, unit: str, stem: str | None = None) -> str:
    """`presto-<time>-s<session><r|e><round or epoch>-<kind>.<ext>` (`unit`: the session's, reducer.unit_name;
    `stem`: the session's part where it is not `s<session>`, `AppState.stem`: a member's chain's)."""
    where = f"-{stem or f's{cursor[0] + 1}'}{unit[0]}{cursor[1] + 1}" if cursor else ""
    return f"presto-{time.strftime('%Y%m%d-%H%M%S')}{where}-{kind}.{ext}"


def write(folder: Path, name: str, content: str) -> Path:
    path = folder / name
    make_folders(folder, "export", error=ExportError)  # the one rule for every output (files.py)
    try:
        path.write_text(content, encoding="utf-8")
    except OSError as e:
        raise ExportError(f"cannot write {shown(path)}: {e.strerror or type(e).__name__}") from None
    return path


def shown(path: Path) -> str:
    return visible(str(path), keep_newlines=False)


def round_header(session: SessionView, cursor: tuple[int, int], rd: RoundDone, name: str = "") -> str:
    """`name`: whose rounds (`AppState.session_name`; default 'session <s>')."""
    s, r = cursor
    p = session.params
    return (f"{name or f'session {s + 1}'}, {session.unit} {r + 1} (block {rd.block + 1}, "
            f"k {rd.k_before}->{rd.k_after}), "
            f"{p.get('sampler')} {rd.tree.rule}/{rd.tree.inputs} N={p.get('budget')}\n"
            f"prompt: {visible(session.start.prompt[:300], keep_newlines=False)}\n")


def tree_as_text(session: SessionView, cursor: tuple[int, int], rd: RoundDone, lay: Layout,
                 name: str = "") -> str:
    return round_header(session, cursor, rd, name) + "\n" + visible(tree_text(rd.tree, lay))


def session_doc(state: AppState, session: SessionView, s: int, status: bool = False) -> dict:
    """Session `s` as an export's JSON names it (with its `status` where asked); a member's chain opened as a
    session of its own (`AppState.member`): its population's session and the member, its own params."""
    return {"index": s + 1, "prompt": session.start.prompt, "params": session.params,
            "backend": session.start.backend, "model": session.start.model,
            **({"status": session.status} if status else {}),
            **({"index": state.member[0] + 1, "member": state.member[1] + 1} if state.member is not None else {})}


def tree_as_json(state: AppState, session: SessionView, cursor: tuple[int, int], rd: RoundDone) -> str:
    """The round at `cursor` (session, round index) as JSON: where it is, numbered as the screen
    says it ("session 2 · epoch 1304 · block 1"), and the trace's own record of it (`record`, which
    `logs.schema.decode` reads back; its `round` and `block` are the trace's indices, from 0)."""
    s, r = cursor
    ids = sorted(set(event_token_ids(rd)))
    doc = {
        "format": "presto-tui-round",
        "session": session_doc(state, session, s),
        session.unit: r + 1,
        "block": rd.block + 1,
        "record": encode(rd),
        "vocab": {str(i): piece for i, piece in zip(ids, state.pieces(ids))},
    }
    return json.dumps(doc) + "\n"  # ASCII escapes: no raw control character reaches a terminal


def answer_text(state: AppState, session: SessionView, tokens: tuple[int, ...] | list[int]) -> str:
    answer = cut_at_eos(tokens, session.start.backend_info.get("eos_id"))
    return visible("".join(state.pieces(answer)))


# -- a population's records -------------------------------------------------------------------------

def population_rows(session: SessionView) -> list[dict]:
    """Each member (tempering's replicas from the lowest exponent, the particles from 1) with its records as
    its chain's table shows them (`state/members.py`)."""
    run = session.method_run
    assert run is not None and members.is_population(run)
    out = []
    for m in range(members.members(run)):
        c = members.member_chain(run, m, session.events)
        out.append({"member": m + 1, "title": c.title, "transitions": c.transitions, "accepted": c.accepted,
                    "records": [dict(zip(c.columns, r.cells)) for r in c.rows]})
    return out


def population_as_text(session: SessionView, s: int) -> str:
    """A population session's members, each a table of its records (the member screens' rows)."""
    p = session.params
    lines = [f"session {s + 1}, {p.get('sampler')} {p.get('prefetch')}, the members' records",
             f"prompt: {visible(session.start.prompt[:300], keep_newlines=False)}"]
    for m in population_rows(session):
        rows = m["records"]
        lines += ["", f"{m['title']}: {m['transitions']} MH transitions, {m['accepted']} accepted"]
        if rows:
            names = list(rows[0])
            widths = [max(len(n), *(len(r[n]) for r in rows)) for n in names]
            lines.append("  ".join(n.rjust(w) for n, w in zip(names, widths)).rstrip())
            lines += ["  ".join(r[n].rjust(w) for n, w in zip(names, widths)).rstrip() for r in rows]
    return visible("\n".join(lines) + "\n")


def population_as_json(state: AppState, session: SessionView, s: int) -> str:
    """A population session as JSON: its members' records as the app shows them (`members`, numbered from 1),
    and the trace's own records of its barriers or blocks (`records`: logs.schema.encode, whose indices count
    from 0, as docs/trace-format.md says), with the text of every token they hold."""
    run = session.method_run
    assert run is not None
    own = [ev for ev in session.events if isinstance(ev, run.own_events)]
    ids = sorted({t for ev in own for t in event_token_ids(ev)})
    doc = {
        "format": "presto-tui-population",
        "session": session_doc(state, session, s, status=True),
        "members": population_rows(session),
        "records": [encode(ev) for ev in own],
        "vocab": {str(i): piece for i, piece in zip(ids, state.pieces(ids))},
    }
    return json.dumps(doc) + "\n"


# -- a session's chain history ----------------------------------------------------------------------

TRANSITION_FIELDS = ("transition", "block", "k", "accepted", "state", "log_target", "loglik", "confidence",
                     "first_diff")
STATE_FIELDS = ("state", "block", "visits", "first", "last", "log_target", "first_diff", "tokens", "text")


def history_rows(state: AppState, session: SessionView, history: ChainHistory) -> tuple[list[dict], list[dict]]:
    """(one dict per transition, one per distinct state) with the export's field names."""
    steps = [dict(zip(TRANSITION_FIELDS, (s.n, s.block + 1, s.k + 1, s.accepted, s.state + 1, _number(s.log_target),
                                          _number(s.loglik), _number(s.confidence), s.first_diff)))
             for s in history.steps]
    states = [dict(zip(STATE_FIELDS, (j + 1, v.block + 1, v.visits, v.first, v.last, _number(v.log_target),
                                      v.from_start, len(v.tokens), answer_text(state, session, v.tokens))))
              for j, v in enumerate(history.states)]
    return steps, states


def history_as_json(state: AppState, session: SessionView, s: int, history: ChainHistory) -> str:
    steps, states = history_rows(state, session, history)
    doc = {
        "format": "presto-tui-history",
        "session": session_doc(state, session, s, status=True),
        "diagnostics_recorded": history.diagnostics,
        "transitions": steps,
        "states": states,
    }
    return json.dumps(doc) + "\n"


def history_as_csv(state: AppState, session: SessionView, history: ChainHistory) -> tuple[str, str]:
    """(the transitions, the distinct states) as CSV, each cell as the JSON export writes it."""
    steps, states = history_rows(state, session, history)
    return csv_text(TRANSITION_FIELDS, steps), csv_text(STATE_FIELDS, states, text=("text",))


# -- a prompt's chains' draws ------------------------------------------------------------------------

DRAWS_FORMATS = {"csv": (".csv",), "nc": (".nc",), "both": (".csv", ".nc")}


def chain_draws(state: AppState, members: Sequence[int]) -> list[list[draws.ChainDraws]]:
    """The draws of sessions `members` (a prompt's chains), grouped as `run --draws` groups them."""
    return draws.grouped(draws.ChainDraws.of(state.sessions[i].events) for i in members)


def write_draws(folder: Path, stem: str, groups: Sequence[Sequence[draws.ChainDraws]], selection: Selection,
                kind: str) -> list[Path]:
    """Write the draws as `kind` (csv, nc or both: DRAWS_FORMATS) into `folder`; the paths written."""
    if not draws.with_draws(groups):
        raise ExportError("no draws to export: the chains have made no transition yet")
    paths = [folder / file_name(stem, None, ext.lstrip("."), "round") for ext in DRAWS_FORMATS[kind]]
    if any(p.suffix == ".nc" for p in paths) and not all(importlib.util.find_spec(m) for m in draws.NETCDF_NEEDS):
        raise ExportError(draws.MISSING.replace("--draws PATH.nc", "the NetCDF export"))
    make_folders(folder, "export", error=ExportError)
    try:
        return draws.write(paths, groups, selection)
    except OutputError as e:
        raise ExportError(str(e)) from None
