"""Evaluation parts on their own: graders, the sandbox, task files and the built-in set, the method
language, and the paired statistics (checked against independent computations)."""

from __future__ import annotations

import math
import re

import pytest

from presto_tui.api.params import describe, parse_method, parse_methods, sequential_of
from presto_tui.errors import InputError
from presto_tui.eval.graders import GRADERS, code_of, grader, options_of, parse_number
from presto_tui.eval.sandbox import CodeLimits, run_tests
from presto_tui.eval.tasks import MC_BANK, builtin_tasks, load_tasks
from presto_tui.logs.paired import EQUIVALENT, IDENTICAL, NOT_SHOWN, accuracy, paired_tost
from presto_tui.runtime.core.params import SamplerParams

# -- graders ---------------------------------------------------------------------------------


@pytest.mark.parametrize("response, answer, right", [
    ("47 + 38 = 85.", "85", True),
    ("The answer is 85 because 47 + 38 = 85", "85", True),
    ("It is 1,000 in total.", "1000", True),
    ("85.0", "85", True),
    ("half: 1/2", "0.5", True),
    ("\u22123 degrees", "-3", True),
    ("It costs $12.", "12", True),
    ("We get \\boxed{42}, not 41", "42", True),  # boxed wins over the last number
    ("The answer is 7. Check: 3 + 4 = 7 and 2 + 5 = 8", "7", True),  # the answer marker wins over the last
    ("47 + 38 = 75", "85", False),
    ("I do not know.", "85", False),
    ("85", "85.0000001", True),  # within the relative tolerance
    ("85.01", "85", False),
])
def test_number_grader_reads_the_number_given_however_written(response, answer, right):
    assert grader("number").grade(response, answer).correct is right


def test_number_grader_says_when_no_number_was_found_and_refuses_a_non_number_answer():
    g = grader("number").grade("no digits here", "3")
    assert g.extracted is None and not g.correct
    with pytest.raises(ValueError, match="not a number"):
        grader("number").check("three")
    assert parse_number("2e3") == 2000 and parse_number("abc") is None
    # a huge exponent is no number here (Fraction would compute 10**999999999); 1e400 compares exactly
    assert parse_number("1e999999999") is None
    assert grader("number").grade("It is 1e400.", "1e400").correct
    assert not grader("number").grade("It is 1e400.", "3").correct


MC_PROMPT = "Which planet is red?\nA) Venus\nB) Mars\nC) Jupiter\nD) Saturn\nAnswer with the letter."


@pytest.mark.parametrize("response, got", [
    ("The answer is (B).", "B"),
    ("Answer: b", "B"),
    ("B) Mars", "B"),
    ("(C)", "C"),
    ("D", "D"),
    ("A planet that looks red is Mars.", "B"),  # 'A planet' is no letter; the one option named is
    ("The answer is a planet: Mars.", "B"),  # nor is 'a planet' after 'answer is'
    ("The answer is a butterfly.", None),
    ("Mars", "B"),
    ("Mars or Venus, hard to say", None),  # two options named: no answer
    ("I am not sure.", None),
])
def test_choice_grader_reads_the_letter_or_the_one_option_named(response, got):
    assert grader("mc").extract(response, MC_PROMPT) == got
    assert grader("mc").grade(response, "B", MC_PROMPT).correct is (got == "B")


def test_choice_grader_refuses_an_answer_that_is_no_letter_and_reads_the_options():
    for bad in ("", "AB", "K", "Mars"):
        with pytest.raises(ValueError):
            grader("mc").check(bad)
    assert options_of(MC_PROMPT) == {"A": "Venus", "B": "Mars", "C": "Jupiter", "D": "Saturn"}


def test_exact_grader_ignores_case_spacing_and_outer_punctuation_only():
    g = grader("exact")
    assert g.grade("  Paris. ", "paris").correct
    assert g.grade("The  capital\nis PARIS!", "the capital is paris").correct
    assert not g.grade("Paris is the capital", "paris").correct


def test_regex_grader_reports_the_match_and_refuses_a_bad_pattern():
    g = grader("regex").grade("the cat sat", r"c[a-z]t")
    assert g.correct and g.extracted == "cat"
    assert not grader("regex").grade("a dog", r"c[a-z]t").correct
    with pytest.raises(ValueError, match="regular expression"):
        grader("regex").check("(unclosed")


def test_vote_keys_group_what_the_grader_reads_as_one_answer():
    read = grader("number").key
    answers = ["It is 85.", "85", "I think 84", "The answer is 85, since 40 + 45 = 85", "1,000", "1000", "0.5",
               "1/2"]
    assert [read(a) for a in answers] == ["85", "85", "84", "85", "1000", "1000", "1/2", "1/2"]
    assert grader("regex").key("  The Cat sat. ") == grader("regex").key("the cat sat") == "the cat sat"
    assert set(GRADERS) == {"exact", "number", "mc", "regex", "python", "math"}


# -- the sandbox -------------------------------------------------------------------------------

FAST = CodeLimits(timeout_s=5)


def test_python_grader_takes_the_fenced_code_and_runs_the_tests():
    response = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    assert code_of(response).strip() == "def add(a, b):\n    return a + b"
    g = grader("python", FAST)
    assert g.grade(response, "assert add(2, 3) == 5").correct
    wrong = g.grade(response.replace("a + b", "a - b"), "assert add(2, 3) == 5, 'add is wrong'")
    assert not wrong.correct and "add is wrong" in wrong.detail


def test_code_that_exits_early_loops_or_eats_memory_does_not_pass(tmp_path):
    assert not run_tests("import sys\nsys.exit(0)", "assert False", FAST).passed
    assert not run_tests("import os\nos._exit(0)", "assert False", FAST).passed
    # the pass token is not in the program's file: reading it and writing it gets nowhere
    forged = ("import os, re, sys\nsrc = open(__file__).read()\nm = re.findall(r\"[0-9a-f]{32}\", src)\n"
              "[open(p, 'w').write(m[0]) for p in re.findall(r\"'(/[^']*done)'\", src)] if m else None\n"
              "os._exit(0)")
    assert not run_tests(forged, "assert False", FAST).passed
    looped = run_tests("while True:\n    pass", "pass", CodeLimits(timeout_s=1))
    assert not looped.passed and "timed out" in looped.detail
    greedy = run_tests("x = bytearray(4 * 1024**3)", "pass", CodeLimits(timeout_s=5, memory_mib=256))
    # a MemoryError where memory is limited per process; killed where a cgroup holds the tree's memory
    assert not greedy.passed and ("MemoryError" in greedy.detail or "ran out of memory (256 MiB" in greedy.detail)


@pytest.mark.usefixtures("in_tmp")
def test_code_runs_in_another_process_and_folder(tmp_path):
    # writing a file and changing this process's state: neither reaches the tool
    r = run_tests("import os\nopen('left.txt', 'w').write('x')\nos.environ['PRESTO_LEAK'] = '1'",
                  "import os\nassert os.getpid() != " + str(__import__("os").getpid()), FAST)
    assert r.passed
    # a right answer that shadows `open` (a star import) still passes
    assert run_tests("from os import *\ndef add(a, b):\n    return a + b", "assert add(2, 3) == 5", FAST).passed
    assert not (tmp_path / "left.txt").exists() and "PRESTO_LEAK" not in __import__("os").environ


# -- task files and the built-in set -----------------------------------------------------------


def _task_file(tmp_path, text: str):
    p = tmp_path / "tasks.jsonl"
    p.write_text(text)
    return p


@pytest.mark.parametrize("line, needle", [
    ("not json", "not valid JSON"),
    ('["a"]', "JSON object"),
    ('{"prompt": "2+2?"}', 'missing "answer"'),
    ('{"prompt": "", "answer": "4"}', '"prompt" is empty'),
    ('{"prompt": "2+2?", "answer": 4}', "must be a string (a number only with grader number or math), got int"),
    ('{"prompt": "2+2?", "answer": true, "grader": "number"}', "must be a string, got bool"),
    ('{"prompt": "2+2?", "answer": "4", "grader": "fuzzy"}', "unknown grader 'fuzzy'"),
    ('{"prompt": "2+2?", "answer": "four", "grader": "number"}', "not a number"),
    ('{"prompt": "x", "answer": "(", "grader": "regex"}', "regular expression"),
    ('{"prompt": "x", "answer": "assert (", "grader": "python"}', "do not compile"),
    ('{"prompt": "x", "answer": "y", "extra": 1}', "unknown field 'extra'"),
    ('{"prompt": "x", "answer": "y", "id": [1]}', '"id" must be'),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, needle):
    p = _task_file(tmp_path, '# a comment\n{"prompt": "1+1?", "answer": "2", "grader": "number"}\n\n' + line + "\n")
    with pytest.raises(InputError, match=re.escape(f"{p}:4: ") + ".*" + re.escape(needle)):
        load_tasks(str(p))


def test_a_number_graders_answer_may_be_a_json_number(tmp_path):
    """`"answer": 4` was refused as not a string: the number grader takes the number as it is written."""
    p = _task_file(tmp_path, '{"prompt": "2+2?", "answer": 4, "grader": "number"}\n'
                             '{"prompt": "half?", "answer": 0.5}\n')
    items = load_tasks(str(p), default_grader="number")
    assert [it.answer for it in items] == ["4", "0.5"]
    g = grader("number")
    assert g.grade("so it is 4", items[0].answer).correct and g.grade("1/2", items[1].answer).correct
    assert not g.grade("5", items[0].answer).correct


def test_task_file_defaults_ids_and_graders_and_refuses_repeats(tmp_path):
    p = _task_file(tmp_path, '{"prompt": "a", "answer": "b"}\n{"prompt": "c", "answer": "1", "id": "x"}\n')
    items = load_tasks(str(p), default_grader="regex")
    assert [(it.id, it.grader) for it in items] == [("1", "regex"), ("x", "regex")]
    assert load_tasks(str(p))[0].grader == "exact"
    p2 = _task_file(tmp_path, '{"prompt": "a", "answer": "b", "id": 7}\n{"prompt": "c", "answer": "d", "id": 7}\n')
    with pytest.raises(InputError, match=":2: id '7' repeats line 1"):
        load_tasks(str(p2))
    with pytest.raises(InputError, match="no items"):
        load_tasks(str(_task_file(tmp_path, "# nothing\n\n")))
    with pytest.raises(InputError, match="no such task file"):
        load_tasks(str(tmp_path / "missing.jsonl"))


def test_builtin_set_is_fixed_by_its_seed_and_its_answers_are_right():
    a, b, c = builtin_tasks(seed=0), builtin_tasks(seed=0), builtin_tasks(seed=1)
    assert a == b and a != c
    assert [it.id[:2] for it in a[:4]] == ["ar", "mc", "ar", "mc"]  # both kinds from the first items on
    for it in a:
        if it.grader == "number":
            x, op, y = re.match(r"What is (\d+) ([+-]) (\d+)\?", it.prompt).groups()
            assert int(it.answer) == (int(x) + int(y) if op == "+" else int(x) - int(y)) >= 0
            assert 10 <= int(x) <= 99 and 10 <= int(y) <= 99
        else:
            question = it.prompt.splitlines()[0]
            right = next(r for q, r, _ in MC_BANK if q == question)
            assert options_of(it.prompt)[it.answer] == right
    letters = {it.answer for it in a if it.grader == "mc"}
    assert len(letters) > 1  # the right option moves
    assert len(load_tasks("builtin:mc")) == len(MC_BANK) and all(it.grader == "number"
                                                                for it in load_tasks("builtin:arith"))
    with pytest.raises(InputError, match="unknown built-in task set 'poems'"):
        load_tasks("builtin:poems")


# -- methods -------------------------------------------------------------------------------------

BASE = SamplerParams(prefetch="none", budget=8)


@pytest.mark.parametrize("spec, want", [
    ("lowtemp", dict(sampler="lowtemp", prefetch="none")),
    ("bon:4", dict(sampler="bestofn", samples=4, prefetch="none")),
    ("bestofn:16", dict(sampler="bestofn", samples=16)),
    ("smc:8", dict(sampler="powersmc", particles=8)),
    ("powermh", dict(sampler="powermh", prefetch="none", inputs="decision")),
    ("powermh+stream", dict(sampler="powermh", prefetch="stream", budget=8)),
    ("entropycut+spine:20", dict(sampler="entropycut", prefetch="spine", budget=20)),
    ("powermh+bfs/node:20", dict(sampler="powermh", prefetch="bfs", inputs="node", budget=20)),
    (" PowerMH+BFS ", dict(prefetch="bfs", inputs="decision")),
])
def test_method_specs_become_sampler_params(spec, want):
    m = parse_method(spec, BASE)
    for k, v in want.items():
        assert getattr(m.params, k) == v, (spec, k)
    assert m.params.alpha == BASE.alpha and m.params.steps == BASE.steps  # the rest from the flags


def test_inputs_flag_applies_where_the_rule_takes_node_inputs():
    base = BASE.with_(inputs="node")
    assert parse_method("powermh+bfs", base).params.inputs == "node"
    assert parse_method("powermh+spine", base).params.inputs == "decision"
    assert parse_method("powermh", base).params.inputs == "decision"


@pytest.mark.parametrize("spec, needle", [
    ("greedy", "unknown method 'greedy'"),
    ("lowtemp+spine", "one-shot sampler"),
    ("lowtemp:4", "takes no :N"),
    ("powermh:8", "powermh+RULE:8"),
    ("powermh+fast", "unknown PreSTO rule 'fast'"),
    ("powermh+spine/node", "needs --inputs decision"),
    ("powermh+bfs/sometimes", "unknown inputs"),
    ("bon:0", "--samples must lie in"),
    ("powermh + stream", "cannot read"),
])
def test_bad_method_specs_say_what_is_wrong(spec, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        parse_method(spec, BASE)


def test_method_lists_pair_presto_with_its_sequential_sampler():
    ms = parse_methods("lowtemp,powermh,powermh+spine:4,entropycut+stream,bon:4", BASE)
    by = {m.label: m for m in ms}
    assert sequential_of(by["powermh+spine:4"], ms) is by["powermh"]
    assert sequential_of(by["entropycut+stream"], ms) is None  # its sequential sampler is not listed
    assert sequential_of(by["powermh"], ms) is None
    with pytest.raises(InputError, match="listed twice"):
        parse_methods("powermh,powermh", BASE)
    with pytest.raises(InputError, match=r"bestofn:4 is listed twice \(as bon:4: the same settings\)"):
        parse_methods("bon:4,bestofn:4", BASE)
    assert describe(by["bon:4"].params) == "best-of-4"
    assert describe(by["powermh+spine:4"].params) == "PowerMH, PreSTO spine N=4"


def test_a_method_matches_recorded_sessions_on_what_it_names():
    recorded = BASE.with_(prefetch="bfs", inputs="node", budget=20).to_dict()
    assert parse_method("powermh+bfs", BASE).matches(recorded)  # any budget, any inputs
    assert parse_method("powermh+bfs/node:20", BASE).matches(recorded)
    assert not parse_method("powermh+bfs:8", BASE).matches(recorded)
    assert not parse_method("powermh", BASE).matches(recorded)


# -- paired statistics -------------------------------------------------------------------------

Z95 = 1.959963984540054


def _wilson(k: int, n: int) -> tuple[float, float]:
    p, z2 = k / n, Z95 ** 2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return centre - half, centre + half


@pytest.mark.parametrize("k, n", [(0, 6), (3, 10), (10, 10), (17, 50)])
def test_accuracy_interval_is_wilsons(k, n):
    a = accuracy(k, n)
    low, high = _wilson(k, n)
    assert a.rate == k / n and a.low == pytest.approx(low, abs=1e-9) and a.high == pytest.approx(high, abs=1e-9)
    assert accuracy(0, 0).rate is None


def _tost_by_hand(first, second, delta):
    """Two one-sided paired t-tests from the t distribution (scipy), for checking statsmodels' use."""
    from scipy import stats

    d = [b - a for a, b in zip(first, second)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    p_low = stats.t.sf((mean + delta) / se, n - 1)  # H0: mean <= -delta
    p_high = stats.t.cdf((mean - delta) / se, n - 1)  # H0: mean >= delta
    return max(p_low, p_high)


def test_paired_tost_is_eq_23():
    import numpy as np

    rng = np.random.default_rng(3)
    first = list(rng.normal(-1.0, 0.1, 40))
    close = [x + rng.normal(0, 0.005) for x in first]
    shifted = [x + 0.05 + rng.normal(0, 0.005) for x in first]
    delta = 0.2 * float(np.std(first, ddof=1))
    eq = paired_tost("loglik", first, close)
    assert eq.verdict == EQUIVALENT and eq.margin == pytest.approx(delta)
    assert eq.p_eq == pytest.approx(_tost_by_hand(first, close, delta), rel=1e-9)
    assert -delta < eq.ci_low < eq.mean_diff < eq.ci_high < delta
    far = paired_tost("loglik", first, shifted)
    assert far.verdict == NOT_SHOWN and far.p_eq == pytest.approx(_tost_by_hand(first, shifted, delta), rel=1e-9)
    assert far.ci_high > delta


def test_paired_tost_says_when_no_test_is_needed_or_possible():
    assert paired_tost("loglik", [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], identical=True).verdict == IDENTICAL
    assert "too few" in paired_tost("loglik", [1.0, 2.0], [1.0, 2.5]).verdict
    assert "no margin" in paired_tost("loglik", [1.0] * 5, [1.1] * 5).verdict
    assert paired_tost("loglik", [math.nan] * 3, [1.0] * 3).verdict == "no pairs"
