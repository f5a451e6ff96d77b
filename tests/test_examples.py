"""The example plugins (examples/): each written from the docs alone (it imports only the public
modules: a grep checks), each passing the law-test kit's checks that apply to it.

Fast: each example's `METHOD` is registered in this process from its source folder; the installed
packages (pip, entry points, every command) are tests/test_plugins.py's."""

from __future__ import annotations

import importlib
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

import presto_tui
from presto_tui import testing
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.params import SamplerParams

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PUBLIC = {"presto_tui", "presto_tui.plugin", "presto_tui.testing", "presto_tui.events"}
# the package's own modules and subpackages that are not public (presto_tui.Params is a name, not a module)
INTERNAL = {p.stem for p in (EXAMPLES.parent / "presto_tui").iterdir()
            if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem != "__init__"} \
    - {m.split(".")[1] for m in PUBLIC if "." in m}


@pytest.fixture
def example(monkeypatch):
    """Register the method of an example plugin (its folder on the path, as pip would install it)."""
    loaded = []

    def load(folder: str, module: str):
        monkeypatch.syspath_prepend(str(EXAMPLES / folder))
        m = registry.register(importlib.import_module(module).METHOD)
        loaded.append(module)
        return m

    yield load
    for module in loaded:
        sys.modules.pop(module, None)
    registry.reload()


def test_the_examples_import_only_the_public_modules():
    files = sorted(EXAMPLES.rglob("*.py"))
    assert len({f.parts[len(EXAMPLES.parts)] for f in files}) >= 2  # the IMH chain and the MBR selection
    private = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            # every dotted name of a module of the package, not only an import line's:
            # `importlib.import_module("presto_tui.runtime...")` reaches a private module as surely
            dotted = re.findall(r"\bpresto_tui((?:\.\w+)+)\b(?!_)", line)
            m = re.match(r"\s*(?:from\s+(presto_tui[\w.]*)\s+import|import\s+(presto_tui[\w.]*))", line)
            if any(tail.split(".")[1] in INTERNAL for tail in dotted) or (m and (m[1] or m[2]) not in PUBLIC):
                private.append(f"{f.relative_to(EXAMPLES)}:{n}: {line.strip()}")
    assert not private, "\n".join(private)


@pytest.mark.slow
def test_the_imh_chain_passes_every_check_of_the_kit(example):
    """Invariance (the only check that sees a wrong acceptance ratio), coupling (every PreSTO rule is the
    sequential chain) and the PITs (cuts, accepts and tokens drawn from the laws the chain claims)."""
    example("plugin", "presto_tui_imh")
    params = SamplerParams(sampler="imh", max_new_tokens=3, steps=4, prefetch="none")
    assert "within noise" in str(testing.check_invariance(params, chains=1000))
    testing.check_coupling(params.with_(max_new_tokens=6, steps=6), budgets=(4,), seeds=(0,))
    testing.check_pit(params.with_(max_new_tokens=8, steps=10), chains=40)


def test_mbr_answers_with_the_sample_agreeing_most_with_the_others(example, tmp_path):
    from presto_tui.logs.reader import read_trace

    example("plugin-mbr", "presto_tui_mbr")
    engine = presto_tui.Engine(backend="synthetic")
    [result] = presto_tui.sample(engine, "the cat", presto_tui.Params(sampler="mbr", mbr_samples=5,
                                                                      max_new_tokens=8), trace=tmp_path / "t.jsonl")
    trace = read_trace(tmp_path / "t.jsonl")
    events = trace.sessions[0].events
    samples = sorted((e for e in events if type(e).__name__ == "Sample"), key=lambda s: s.index)
    (choice,) = [e for e in events if type(e).__name__ == "Choice"]
    eos = trace.header["engine"]["eos_id"]
    texts = [list(s.tokens[:s.tokens.index(eos)] if eos in s.tokens else s.tokens) for s in samples]

    def f1(a, b):  # recomputed here: bag-of-tokens F1
        return 1.0 if not a and not b else 2 * sum((Counter(a) & Counter(b)).values()) / (len(a) + len(b))

    scores = [sum(f1(t, u) for j, u in enumerate(texts) if j != i) / 4 for i, t in enumerate(texts)]
    assert len(samples) == 5 and choice.scores == pytest.approx(scores)
    assert choice.index == max(range(5), key=lambda i: (scores[i], -i))
    assert result.tokens == tuple(samples[choice.index].tokens[:len(result.tokens)])
    assert "mean token F1 to the other 4" in choice.rule


def test_mbr_is_measured_against_pi_alpha_and_its_one_sample_is_low_temperatures(example):
    """Not a sampler of pi_alpha: the kit measures its distance (what a user reports); with one sample it
    is low temperature, answer for answer (the same seeds)."""
    example("plugin-mbr", "presto_tui_mbr")
    one = SamplerParams(sampler="mbr", mbr_samples=1, max_new_tokens=3, prefetch="none")
    mbr = testing.check_law(one, sessions=200, assert_=False)
    low = testing.check_law(one.with_(sampler="lowtemp"), sessions=200, assert_=False)
    assert mbr.tv == low.tv and mbr.foreign == 0
    four = testing.check_law(one.with_(mbr_samples=4), sessions=200, assert_=False)
    assert four.foreign == 0 and 0 < four.tv < 1


def test_mbr_reads_its_sample_count_and_score_label_in_the_views(example):
    from presto_tui.runtime.session.events import Sample
    from presto_tui.views.state.baseline import SamplesRun

    example("plugin-mbr", "presto_tui_mbr")
    run = SamplesRun.of(SamplerParams(sampler="mbr", mbr_samples=4).to_dict())
    run.apply(Sample(0, (1, 2), -1.0, -2.0, -1.0, -1.0, 0.1))
    assert run.progress() == "1/4 samples" and run.score_name == "mean token F1"
    bon = SamplesRun.of(SamplerParams(sampler="bestofn", samples=3, bon_rank="logp").to_dict())
    assert bon.progress() == "0/3 samples" and bon.score_name == "sum log p0"
