"""Snapshot tests of the app, fed from fixed traces (no live threads, no clock on screen).

Update after an intended change of the look: pytest tests/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from pathlib import Path

from presto_tui.logs.reader import read_trace
from presto_tui.views.app import replay_app

DATA = Path(__file__).parent / "data"


def app():
    return replay_app(read_trace(DATA / "replay.jsonl"))


def test_replay_first_round(snap_compare):
    assert snap_compare(app(), terminal_size=(100, 30))


def test_replay_node_mode_round_rounded_view(snap_compare):
    # last session uses BFS with node inputs: deferred and unreachable nodes appear
    assert snap_compare(app(), press=["end", "f", "right", "right"], terminal_size=(100, 30))


def test_replay_in_80x24(snap_compare):
    assert snap_compare(app(), press=["right_square_bracket", "down"], terminal_size=(80, 24))
