"""pass@k and maj@k (presto_tui/eval/passk.py): the estimator against a count over every k-subset, and
both in `eval --chains M`'s table and JSON and in the frontier's measures."""

from __future__ import annotations

import itertools
import json
import statistics
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.eval.graders import grader
from presto_tui.eval.passk import Sample, budgets, estimates, maj_at_k, pass_at_k

runner = CliRunner()

# a fixed set: per item, which of its samples are right (n from 1 to 10, c from 0 to n)
FIXED = [
    [True], [False], [True, False], [False, False, True], [False] * 5 + [True], [True] * 4,
    [False, True, False, True, False, False, True, False], [False] * 9 + [True], [True] * 9 + [False],
    [False, False, False, False, False, False, False], [True, False, True, True, False, True, False, False, True, True],
]


def brute_pass(right: list[bool], k: int) -> Fraction:
    """The share of the k-subsets of the samples that hold a right one, counted."""
    subsets = list(itertools.combinations(right, k))
    return Fraction(sum(any(s) for s in subsets), len(subsets))


def test_pass_at_k_equals_the_count_over_every_k_subset():
    checked = 0
    for right in FIXED:
        n, c = len(right), sum(right)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass(right, k)), abs=1e-12), (right, k)
            checked += 1
    assert checked == sum(len(r) for r in FIXED)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the share right
    assert pass_at_k(200, 100, 100) == pytest.approx(1 - _ratio(200, 100, 100))  # C(200, 100) is no float
    for bad in ((3, 4, 1), (3, 1, 4), (3, 1, 0), (0, 0, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def _ratio(n: int, c: int, k: int) -> float:
    from math import comb
    return float(Fraction(comb(n - c, k), comb(n, k)))


def brute_maj(samples: list[Sample], k: int) -> Fraction:
    """The vote of every k-subset, counted: the largest group of labels wins, a tie of t groups splits 1/t."""
    total = Fraction(0)
    subsets = list(itertools.combinations(samples, k))
    for sub in subsets:
        counts: dict[str, int] = {}
        for s in sub:
            if s.key is not None:
                counts[s.key] = counts.get(s.key, 0) + 1
        if counts:
            top = max(counts.values())
            tied = [key for key, c in counts.items() if c == top]
            right = {s.key for s in samples if s.correct}
            total += Fraction(sum(key in right for key in tied), len(tied))
    return total / len(subsets)


def test_maj_at_k_is_the_vote_of_every_k_subset_ties_split_evenly():
    a, b, c, none = Sample("1/2", True), Sample("3", False), Sample("4", False), Sample(None, False)
    assert maj_at_k([a, b], 2) == 0.5 == maj_at_k([b, a], 2)  # a tie of two: half right, in either order
    assert maj_at_k([none, none], 2) == 0.0 and maj_at_k([none, a], 2) == 1.0
    cases = [[b, a, b, a, a], [a, b, b, b], [a, b, c, none, a, c, b], [a, a, b, b, c, c, none, none], [none, a, b]]
    for samples in cases:
        for k in range(1, len(samples) + 1):
            want = float(brute_maj(samples, k))
            assert maj_at_k(samples, k) == pytest.approx(want, abs=1e-12), (samples, k)
            # the chains' order does not count
            for order in itertools.islice(itertools.permutations(samples), 0, None, 7):
                assert maj_at_k(list(order), k) == pytest.approx(want, abs=1e-12)
        assert maj_at_k(samples, 1) == pytest.approx(pass_at_k(len(samples), sum(s.correct for s in samples), 1))
    # many chains: exact without enumerating C(64, 32) subsets
    many = [Sample(str(i % 5), i % 5 == 0) for i in range(64)]
    assert maj_at_k(many, 32) == pytest.approx(maj_at_k(many[::-1], 32)) and 0 < maj_at_k(many, 32) < 1
    assert maj_at_k(many, 1) == pytest.approx(13 / 64)
    assert budgets(1) == [1] and budgets(4) == [1, 2, 4] and budgets(6) == [1, 2, 4, 6]


def test_estimates_average_every_k_over_the_same_items():
    """An item with fewer samples (a chain that failed) is left out of every column, so pass@k cannot fall
    as k grows because the items changed."""
    per_item = [[Sample(str(int(r)), r) for r in right] for right in FIXED]
    est = estimates(per_item, [1, 4])
    full = [r for r in FIXED if len(r) >= 4]
    assert est["items"] == {"1": len(full), "4": len(full)}
    assert est["pass"]["1"] == pytest.approx(statistics.fmean(sum(r) / len(r) for r in full))
    assert est["pass"]["4"] == pytest.approx(statistics.fmean(float(brute_pass(r, 4)) for r in full))
    r, w = Sample("1", True), Sample("2", False)
    est = estimates([[r, w, w, w], [r]], [1, 2, 4])
    assert est["pass"] == {"1": 0.25, "2": 0.5, "4": 1.0} and est["items"] == {"1": 1, "2": 1, "4": 1}


@pytest.mark.usefixtures("in_tmp")
def test_eval_chains_report_pass_and_maj_at_k_from_every_chain(tmp_path):
    """--chains 4 on the synthetic model: pass@k and maj@k of each method from its items' chains (as the JSON
    lists their readings and grades) by the count over k-subsets; on an item without a tie, maj@4 is what
    --vote scores."""
    prompts = ["the cat", "a dog ran", "the tree", "small red home", "it was warm", "then it slept"]
    tasks = tmp_path / "t.jsonl"
    pattern = "under|sat|quietly|the"  # some chains of an item match it, others not
    tasks.write_text("".join(json.dumps({"id": q, "prompt": q, "answer": pattern, "grader": "regex"}) + "\n"
                             for q in prompts))
    common = ["eval", str(tasks), "--methods", "powermh,bon:2", "-n", "4", "-K", "3", "--chains", "4",
              "--figures", "none", "--no-trace"]
    res = runner.invoke(app, [*common, "-o", "res.json"])
    assert res.exit_code == 0, res.output
    assert "pass@k and maj@k over 4 chains per item" in res.output and "maj@4" in res.output
    out = json.loads(Path("res.json").read_text())
    voted = runner.invoke(app, [*common, "--vote", "-o", "vote.json"])
    assert voted.exit_code == 0, voted.output
    vote = json.loads(Path("vote.json").read_text())
    regex = grader("regex")  # it groups by the response's text (what the pattern matches depends on the answer)
    for m, v in zip(out["methods"], vote["methods"]):
        grades = [[c["correct"] for c in item["results"][m["label"]]["chains"]] for item in out["items"]]
        assert set(m["pass_at_k"]) == {"1", "2", "4"}
        for k in (1, 2, 4):
            assert m["pass_at_k"][str(k)] == pytest.approx(statistics.fmean(float(brute_pass(g, k)) for g in grades))
        chains = [[Sample(regex.key(c["text"]), c["correct"]) for c in item["results"][m["label"]]["chains"]]
                  for item in out["items"]]
        for k in (1, 2, 4):
            assert m["maj_at_k"][str(k)] == pytest.approx(statistics.fmean(float(brute_maj(c, k)) for c in chains))
        assert m["pass_at_k"]["1"] == pytest.approx(m["chain_accuracy"]) == pytest.approx(m["maj_at_k"]["1"])
        untied = 0
        for item, mine in zip(vote["items"], chains):
            voted = item["results"][v["label"]]
            if not voted["vote"]["tied"]:  # the vote of all 4 chains: maj@4 of this item
                assert float(brute_maj(mine, 4)) == float(voted["correct"])
                untied += 1
        assert untied
    assert any(0 < m["pass_at_k"]["1"] < m["pass_at_k"]["4"] for m in out["methods"]), "no item mixes right and wrong"


@pytest.mark.usefixtures("in_tmp")
def test_frontier_offers_pass_and_maj_at_k_over_its_seeds(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": "the", "grader": "regex"}) + "\n"
                             for q in ("the cat", "a dog ran")))
    res = runner.invoke(app, ["eval", str(tasks), "--frontier", "bon@2; powermh@2", "--frontier-seeds", "4",
                              "-n", "4", "--figures", "none", "--no-trace", "-o", "f.json"])
    assert res.exit_code == 0, res.output
    out = json.loads(Path("f.json").read_text())
    assert out["measures"] == ["loglik", "confidence", "accuracy", "pass@k", "maj@k"]
    assert set(out["fronts"]["pass@k"]) == {"bon", "powermh"}
    for p in out["points"]:
        assert p["pass@k"] == p["pass_at_k"]["4"] and p["maj@k"] == p["maj_at_k"]["4"]
        assert p["pass_at_k"]["1"] == pytest.approx(p["accuracy"])  # pass@1: the share of sessions right
    assert "pass@k, maj@k: k = 4" in res.output
