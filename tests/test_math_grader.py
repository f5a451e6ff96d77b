"""The math grader (math-verify) against a person's reading on hard cases: fractions, radicals,
intervals, units, text answers, equations and sets, and which answer of a response it reads.

Each case: (kind, the reference as a benchmark writes it, a response, whether a person grades it
right, and where the grader disagrees, the grader's verdict: a known miss, kept in the table so that
a change of math-verify shows here)."""

from __future__ import annotations

import threading

import pytest

from presto_tui.eval.graders import grader, last_boxed

MISS = "miss"
CASES = [
    ("fraction", r"\frac{1}{2}", r"The answer is \boxed{0.5}", True),
    ("fraction", r"\frac{1}{2}", "so the probability is 1/2", True),
    ("fraction", r"\frac12", r"\boxed{\dfrac{1}{2}}", True),
    ("fraction", r"-\frac{3}{4}", r"\boxed{-0.75}", True),
    ("fraction", r"\frac{3}{4}", r"\boxed{\frac{4}{3}}", False),
    ("fraction", r"\frac{1}{3}", r"\boxed{0.333}", False),
    ("radical", r"2\sqrt{3}", r"\boxed{\sqrt{12}}", True),
    ("radical", r"\frac{\sqrt{2}}{2}", r"\boxed{\frac{1}{\sqrt{2}}}", True),
    ("radical", r"\frac{\sqrt{2}}{2}", r"\boxed{0.7071}", False),
    ("radical", r"2\sqrt{3}", r"\boxed{3\sqrt{2}}", False),
    ("interval", r"(-\infty, 2]", r"\boxed{(-\infty,2]}", True),
    ("interval", r"(-\infty,-1)\cup(1,\infty)", r"\boxed{(-\infty, -1) \cup (1, \infty)}", True),
    ("interval", r"[0,1)", r"\boxed{(0,1]}", False),
    ("interval", r"[1,\infty)", r"\boxed{(1,\infty)}", False),
    ("interval", r"(-2,2)", r"\boxed{-2<x<2}", True, MISS),
    ("interval", r"[1,\infty)", r"\boxed{x \ge 1}", True, MISS),
    ("units", "12", r"\boxed{12\text{ cm}}", True),
    ("units", r"12\text{ cm}", r"\boxed{12}", True),
    ("units", r"60^\circ", r"\boxed{60}", True),
    ("units", r"\$18.90", r"\boxed{18.9}", True),
    ("units", "25", r"\boxed{25\%}", True),
    ("units", "1000", r"\boxed{1{,}000}", True),
    ("units", "1000", r"\boxed{1\,000}", True),
    ("units", "1000", r"\boxed{1\ 000}", True),
    ("units", r"60^\circ", r"\boxed{60°}", True),
    ("text", r"\text{Tuesday}", r"\boxed{Tuesday}", True),
    ("text", r"\text{Tuesday}", r"\boxed{\text{Monday}}", False),
    ("text", r"\text{(B)}", r"\boxed{B}", True),
    ("text", r"\text{even}", r"\boxed{\text{Even}}", True),
    ("text", r"\text{(B)}", "The answer is (B).", True, MISS),
    ("equation", "3", r"We get $x=3$, so \boxed{x=3}", True),
    ("equation", "y=2x+3", r"\boxed{2x+3}", True),
    ("set", "-3, 3", r"\boxed{3,-3}", True),
    ("set", r"\{1,2\}", r"\boxed{\{2,1\}}", True),
    ("tuple", "(2,-1)", r"\boxed{(-1,2)}", False),
    ("expression", "2x+3", r"\boxed{3+2x}", True),
    ("expression", "4", r"\boxed{2^2}", True),
    ("reading", "3", "First \\boxed{3}.\n\nWait, that is wrong: \\boxed{4}", False),
    ("reading", "4", "First \\boxed{3}.\n\nWait, that is wrong: \\boxed {4}", True),
    ("reading", "4", "First \\boxed{3}.\n\nWait, that is wrong: \\boxed 4.", True),
    ("reading", "10", "The final answer is 10.", True),
    ("reading", "3", r"\boxed{3!}", False),  # 3! is 6: no text answer, so no reading by its words
    ("reading", "3", "I cannot tell.", False),
    ("reading", "033", r"\boxed{33}", True),
]


def agreement(cases=CASES) -> list[dict]:
    """Per case: what the grader read, its verdict and a person's."""
    g = grader("math")
    rows = []
    for kind, answer, response, person, *miss in cases:
        got = g.grade(response, answer)
        rows.append({"kind": kind, "answer": answer, "response": response, "extracted": got.extracted,
                     "grader": got.correct, "person": person, "known_miss": bool(miss)})
    return rows


def test_math_grader_agrees_with_a_person_on_hard_cases_but_its_known_misses():
    rows = agreement()
    for r in rows:
        assert (r["grader"] == r["person"]) is not r["known_miss"], r
    kinds = {r["kind"] for r in rows}
    assert {"fraction", "radical", "interval", "units", "text"} <= kinds
    agree = sum(r["grader"] == r["person"] for r in rows)
    assert agree == len(rows) - 3  # the three known misses: -2<x<2, x >= 1, an unboxed '(B)'


def test_the_last_box_is_the_answer_and_is_shown_as_written():
    g = grader("math")
    assert last_boxed(r"a \boxed{\frac{1}{2}} b \boxed{\{1, \{2\}\}} c") == r"\{1, \{2\}\}"
    assert last_boxed("no box") is None and last_boxed(r"\boxed{unclosed") is None
    assert g.extract(r"\boxed{0.5}") == "0.5"  # as written, not math-verify's 1/2
    assert g.extract("So x = 10.") == "10" and g.extract("nothing") is None
    with pytest.raises(ValueError, match="longer than 2000"):
        g.check("1+" * 1001)


def test_vote_groups_equivalent_spellings_as_one_answer():
    key = grader("math").key
    assert key(r"\boxed{0.5}") == key(r"\boxed{\frac{1}{2}}") == key("so it is 1/2") == key(r"\boxed{\dfrac12}") \
        == "1/2"
    assert key(r"\boxed{x=3}") == key(r"\boxed{3}") == "3"
    assert key(r"\boxed{\sqrt{12}}") == key(r"\boxed{2\sqrt{3}}")
    assert key(r"\boxed{\text{Tuesday}}") == key(r"\boxed{Tuesday}") == "tuesday"
    assert key(r"\boxed{\frac{1}{2}}") != key(r"\boxed{\frac{1}{3}}") and key("no answer") is None


@pytest.mark.parametrize(("reference", "spellings"), [
    ("25", [r"\boxed{25}", r"\boxed{25\%}"]),  # keys 25 and 1/4: both graded right against 25
    (r"\frac13", [r"\boxed{\frac13}", r"\boxed{0.3333333}"]),
    ("(x+1)^2", [r"\boxed{(x+1)^2}", r"\boxed{x^2+2x+1}"]),
])
def test_vote_groups_as_the_grader_grades_so_one_right_answer_is_one_vote(reference, spellings):
    """Spellings math-verify grades right against the same reference are one group, in either order, and
    outvote a wrong answer given twice (grouped by a string key, each was one vote against two)."""
    from presto_tui.runtime.session.answers import vote

    g = grader("math")
    assert all(g.grade(r, reference).correct for r in spellings)
    wrong = [r"\boxed{7}", r"\boxed{7}"]
    for chains in ([*spellings, *wrong, spellings[1]], [wrong[0], spellings[1], wrong[1], spellings[0], spellings[1]]):
        result = vote(chains, g.grouper())
        assert result.majority is not None and result.majority.count == 3, result.to_dict()
        assert g.grade(chains[result.majority.chains[0] - 1], reference).correct
    label = g.grouper()
    assert label(spellings[0]) == label(spellings[1]) != label(r"\boxed{7}") and label("nothing to read") is None


def test_math_grader_works_off_the_main_thread():
    """math-verify's timer is signal.alarm, which only the main thread may set: in a thread it runs without."""
    out = {}

    def grade():
        out["grade"] = grader("math").grade(r"\boxed{\frac{2}{4}}", "0.5")

    t = threading.Thread(target=grade)
    t.start()
    t.join(60)
    assert out["grade"].correct and out["grade"].extracted == r"\frac{2}{4}"


def table(rows: list[dict]) -> str:
    """The agreement table in Markdown (for the docs)."""
    lines = ["| kind | reference | response | read | grader | person |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        def cell(s):
            return "-" if s is None else "`" + s.replace("\n", " ").replace("|", "\\|") + "`"
        lines.append(f"| {r['kind']} | {cell(r['answer'])} | {cell(r['response'])} | {cell(r['extracted'])} | "
                     f"{'right' if r['grader'] else 'wrong'} | {'right' if r['person'] else 'wrong'}"
                     f"{' (miss)' if r['known_miss'] else ''} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(agreement()))
