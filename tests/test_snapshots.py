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


def classes_app():
    return replay_app(read_trace(DATA / "classes.jsonl"))


def test_round_whose_path_crosses_all_four_classes(snap_compare):
    # The first round's path: certain accept, certain reject, uncertain, stop at a deferred node.
    # Each keeps its class colour on the path band; the selected root adds cursor, bold, underline.
    # A path drawn over the class colour (the old bold white on teal) changes this picture.
    assert snap_compare(classes_app(), terminal_size=(110, 32))


def test_overview(snap_compare):
    assert snap_compare(classes_app(), press=["o", "right"], terminal_size=(120, 40))


def test_help_at_120_columns(snap_compare):
    assert snap_compare(app(), press=["question_mark"], terminal_size=(120, 40))
