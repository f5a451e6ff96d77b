"""Published task files read as they are (presto_tui/eval/tasks.py): the example files of
docs/eval/tasks in the layouts of MATH-500 (JSONL), AIME 2024 (CSV, capitalised columns), GSM8K and
HumanEval, each read by its preset and graded right (a right answer in another spelling) and wrong;
the same file as Parquet; --fields and --prompt-template; bad input in one line; a hub id offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.errors import InputError
from presto_tui.eval.graders import grader, prompt_imports
from presto_tui.eval.sandbox import CodeLimits
from presto_tui.eval.tasks import BOXED_REQUEST, layout, load_tasks

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "docs" / "eval" / "tasks"
runner = CliRunner()

# per item of math500-layout.jsonl: a right response in another spelling than the reference's, a wrong one
MATH500 = [
    (r"So it is \boxed{0.75}.", r"\boxed{\frac{4}{3}}"),
    (r"\boxed{\sqrt{50}}", r"\boxed{2\sqrt{5}}"),
    (r"Subtracting, \boxed{x = 3}", r"\boxed{x=4}"),
    (r"\boxed{(-2, 2)}", r"\boxed{[-2,2]}"),
    (r"\boxed{3, -3}", r"\boxed{3}"),
    (r"\boxed{\pi/6}", r"\boxed{\frac{\pi}{3}}"),
    (r"\boxed{0.25}", r"\boxed{\frac12}"),
    (r"\boxed{[1, \infty)}", r"\boxed{(1,\infty)}"),
    (r"It will be a \boxed{Tuesday}.", r"\boxed{\text{Wednesday}}"),
    (r"\boxed{\dfrac{1}{2}}", r"\boxed{\frac{\sqrt{2}}{2}}"),
    (r"\boxed{12\text{ cm}}", r"\boxed{9}"),
    (r"They meet at \boxed{(2, -1)}.", r"\boxed{(-1,2)}"),
]
# per item of aime2024-layout.csv
AIME = [
    (r"\boxed{30}", r"\boxed{24}"), (r"\boxed{376}", r"\boxed{976}"), (r"\boxed{33}", r"\boxed{34}"),
    ("The final answer is $735$.", r"\boxed{728}"), (r"\boxed{512}", r"\boxed{2^9 + 1}"),
    (r"\boxed{225}", r"\boxed{224}"), (r"\boxed{\binom{10}{3}}", r"\boxed{720}"), (r"\boxed{401}", r"\boxed{2401}"),
    (r"\boxed{45}", r"\boxed{46}"), (r"\boxed{025}", r"\boxed{24}"), (r"\boxed{13}", r"\boxed{9}"),
    (r"\boxed{210}", r"\boxed{200}"),
]
GSM8K = [("She has 29 left. The answer is 29.", "The answer is 36."), (r"\boxed{150}", r"\boxed{62.5}"),
         (r"\boxed{3{,}600}", "He saves 300 a month."), (r"4 1/2 cups: \boxed{\frac{9}{2}}", r"\boxed{4}"),
         ("The answer is -7.", "The answer is 7.")]


def _graded(items, responses, limits=None):
    """(right responses graded right, wrong ones graded wrong), per item."""
    out = []
    for it, (right, wrong) in zip(items, responses, strict=True):
        g = grader(it.grader, limits)
        out.append((g.grade(right, it.answer, it.prompt).correct, g.grade(wrong, it.answer, it.prompt).correct))
    return out


def test_math500_layout_read_by_its_preset_and_graded_right():
    items = load_tasks(str(TASKS / "math500-layout.jsonl"), layout=layout("math"))
    assert len(items) == 12 and {it.grader for it in items} == {"math"}
    assert items[0].id == "example/prealgebra/0.json"  # MATH-500's unique_id
    assert items[0].prompt == "Write $\\frac{6}{8}$ in lowest terms.\n\n" + BOXED_REQUEST
    assert items[0].answer == r"\frac{3}{4}"  # the answer field, not the solution
    assert _graded(items, MATH500) == [(True, False)] * 12


def test_aime_layout_csv_with_its_own_capitalised_columns():
    items = load_tasks(str(TASKS / "aime2024-layout.csv"), layout=layout("aime"))
    assert len(items) == 12 and items[2].id == "example-I-3" and items[2].answer == "033"
    assert items[0].prompt.startswith("Find the number of positive divisors of $720$.")
    assert _graded(items, AIME) == [(True, False)] * 12


def test_parquet_reads_as_the_jsonl_it_was_made_from(tmp_path):
    import pandas as pd

    jsonl = TASKS / "math500-layout.jsonl"
    frame = pd.read_json(jsonl, lines=True)
    frame.to_parquet(tmp_path / "test-00000-of-00001.parquet")
    got = load_tasks(str(tmp_path / "test-00000-of-00001.parquet"), layout=layout("math500"))
    assert got == load_tasks(str(jsonl), layout=layout("math"))


def test_gsm8k_layout_grades_the_number_after_the_hashes():
    items = load_tasks(str(TASKS / "gsm8k-layout.jsonl"), layout=layout("gsm8k"))
    assert [it.answer for it in items] == ["29", "150", "3600", "4.5", "-7"]
    assert [it.id for it in items] == ["1", "2", "3", "4", "5"] and {it.grader for it in items} == {"math"}
    assert _graded(items, GSM8K) == [(True, False)] * 5
    # the preset asks for a box: what a box holds is read as LaTeX (the number grader read 600 of 3{,}600)
    g, (_, _, thousands, half, _) = grader("math"), items
    assert g.grade(r"\boxed{3\,600}", thousands.answer).correct and g.grade(r"\boxed{4.5}", half.answer).correct


def test_humaneval_layout_runs_check_on_the_entry_point():
    items = load_tasks(str(TASKS / "humaneval-layout.jsonl"), layout=layout("humaneval"))
    assert [it.id for it in items] == ["Example/0", "Example/1", "Example/2"] and items[0].grader == "python"
    assert items[0].answer.rstrip().endswith("check(below_zero)")
    rows = [json.loads(line) for line in (TASKS / "humaneval-layout.jsonl").read_text().splitlines()]
    # the canonical solution as a chat model writes it: the whole function in a block; for the first, without
    # the prompt's `from typing import List` (the grader runs the prompt's imports first)
    whole = [f"Here it is:\n```python\n{r['prompt']}{r['canonical_solution']}```" for r in rows]
    whole[0] = "```python\ndef below_zero(operations: List[int]) -> bool:\n" + rows[0]["canonical_solution"] + "```"
    wrong = ["```python\ndef below_zero(operations):\n    return False\n```",
             "```python\ndef digit_sum(n):\n    return len(str(n))\n```",
             "```python\ndef hypotenuse(a, b):\n    return a + b\n```"]
    assert _graded(items, list(zip(whole, wrong)), CodeLimits(timeout_s=10)) == [(True, False)] * 3


def test_fields_and_a_prompt_template_map_any_layout(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text("qid,question_text,gold,topic\nq1,What is 1/2 + 1/4?,\\frac{3}{4},fractions\n"
                 "q2,What is 2 + 2?,4,sums\n")
    lay = layout(None, "prompt=question_text,answer=gold,id=qid",
                 "[{topic}] {prompt} Put it, as x^{2}, in \\boxed{}: \\boxed{Gold}.")
    items = load_tasks(str(p), layout=lay, default_grader="math")
    assert [it.id for it in items] == ["q1", "q2"] and items[0].answer == r"\frac{3}{4}"
    # a brace after a LaTeX command (or ^, _) is LaTeX's, even where it names a column
    assert items[0].prompt == "[fractions] What is 1/2 + 1/4? Put it, as x^{2}, in \\boxed{}: \\boxed{Gold}."
    assert grader("math").grade(r"\boxed{0.75}", items[0].answer).correct
    # --fields over a preset: the preset's grader and template stay
    over = load_tasks(str(p), layout=layout("math", "prompt=question_text,answer=gold,id=qid"))
    assert over[1].grader == "math" and over[1].prompt.endswith(BOXED_REQUEST)


@pytest.mark.parametrize(("content", "name", "preset", "message"), [
    ('{"problem": "x", "answer": "1"}\n', "t.jsonl", None,
     "t.jsonl:1: unknown field 'problem'; an item has prompt, answer, grader and id (map a file's own columns "
     "with --fields); a math file? --preset math"),
    ('{"question": "x", "answer": "1"}\n', "t.jsonl", None, "a gsm8k file? --preset gsm8k"),
    ('{"answer": "1", "level": "2", "problem": "x", "subject": "y"}\n', "t.jsonl", None, "a math file? --preset math"),
    ("ID,Problem,Answer\n1,x,1\n", "t.csv", None, "t.csv: row 1: unknown field 'Answer'; an item has prompt, answer, "
     "grader and id (map a file's own columns with --fields); a math file? --preset math"),
    ('{"problem": "x", "answer": "1"}\n{"problem": "y"}\n', "t.jsonl", "math", 't.jsonl:2: missing "answer"'),
    ("Problem,Answer\nx,1\ny,\n", "t.csv", "aime", 't.csv: row 2: "Answer" is empty'),
    ('{"question": "x", "answer": "it is 4"}\n', "t.jsonl", "gsm8k", "t.jsonl:1: the answer has no '#### <number>'"),
    ('{"prompt": "def f(): pass", "test": "def check(c): pass"}\n', "t.jsonl", "humaneval",
     't.jsonl:1: "entry_point" must name the function'),
    ("not,a\ntable\"\n", "t.parquet", None, "t.parquet: not a PARQUET table"),
    ("problem,answer\n", "t.csv", "math", "t.csv: no rows"),
    ('{"problem": "x", "answer": "???"}\n', "t.jsonl", "math",
     "t.jsonl:1: answer '???' is not an expression math-verify"),
    ('{"problem": "x", "answer": "1", "unique_id": "a"}\n{"problem": "y", "answer": "2", "unique_id": "a"}\n',
     "t.jsonl", "math", "t.jsonl:2: id 'a' repeats line 1"),
])
def test_published_files_refuse_bad_rows_in_one_line(tmp_path, content, name, preset, message):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(InputError) as e:
        load_tasks(str(p), layout=layout(preset))
    assert message in e.value.line and "\n" not in e.value.line


def test_a_template_or_fields_naming_no_column_or_the_answer_are_refused_in_one_line(tmp_path):
    """A typo'd placeholder or mapped column is no silent default (the text as written, exact grading, line
    numbers as ids), and a template that would put the reference into the prompt is refused."""
    p = tmp_path / "m.jsonl"
    p.write_text('{"problem": "1+1?", "solution": "It is \\\\boxed{2}.", "answer": "2", "level": "1"}\n')
    for preset, fields, template, message in (
            ("math", None, "{problme} Answer in \\boxed{}.", "m.jsonl:1: --prompt-template: {problme} is no column "
             "of the file (its columns: problem, solution, answer, level)"),
            ("math", None, "{prompt} Level {level}; as \\boxed{ANSWER}, not {Answer}.",
             "m.jsonl:1: --prompt-template names {Answer}, which holds the answer"),
            ("math", None, "{prompt} {solution}", "--prompt-template names {solution}, which holds the answer"),
            (None, "prompt=problem,answer=answer,grader=math", None, "m.jsonl:1: --fields grader=math: no column "
             "'math' (its columns: problem, solution, answer, level); to grade every item with one grader use "
             "--grader math"),
            ("math", "id=uid", None, "--fields id=uid: no column 'uid'"),
            ("math", "prompt=question", None, "m.jsonl:1: --fields prompt=question: no column 'question' (its "
             "columns: problem, solution")):
        with pytest.raises(InputError) as e:
            load_tasks(str(p), layout=layout(preset, fields, template))
        assert message in e.value.line and "\n" not in e.value.line, e.value.line
    q = tmp_path / "aime2025.jsonl"  # AIME 2025 as published: question, answer
    q.write_text('{"question": "2+2?", "answer": "4"}\n')
    assert load_tasks(str(q), layout=layout("math"))[0].prompt.startswith("2+2?\n\n")
    item, = load_tasks(str(p), layout=layout("math", None, "{prompt} Level {LEVEL}, as \\boxed{Answer}."))
    assert item.prompt == "1+1? Level 1, as \\boxed{Answer}."  # a column ignoring case; \boxed{...} LaTeX's


def test_limit_reads_only_the_first_rows(tmp_path):
    """--limit N: the rows after the N-th are not read (a bad row there, an answer there, is never parsed)."""
    p = tmp_path / "m.jsonl"
    p.write_text('{"problem": "a", "answer": "1"}\n{"problem": "b", "answer": "2"}\nnot json\n')
    assert [it.prompt[:1] for it in load_tasks(str(p), layout=layout("math"), limit=2)] == ["a", "b"]
    with pytest.raises(InputError, match="m.jsonl:3: not valid JSON"):
        load_tasks(str(p), layout=layout("math"), limit=3)
    assert len(load_tasks("builtin:arith", limit=4)) == 4


def test_layout_flags_refuse_bad_input():
    for args, message in ((("gsm9k",), "unknown --preset 'gsm9k'; choose one of math"),
                          ((None, "prompt"), "--fields takes FIELD=COLUMN pairs"),
                          ((None, "question=q"), "--fields: unknown item field 'question'"),
                          ((None, None, "Solve it."), "--prompt-template names no field")):
        with pytest.raises(InputError, match=message):
            layout(*args)
    with pytest.raises(InputError, match="--preset, --fields and --prompt-template read a task file"):
        load_tasks("builtin:arith", layout=layout("math"))
    for spec in ("hf:justname", "hf:a/b/c/d:test", "hf:a/b/:test"):
        with pytest.raises(InputError, match=r"a hub dataset is hf:ORG/NAME\[/CONFIG\]\[:SPLIT\]"):
            load_tasks(spec)


@pytest.mark.usefixtures("in_tmp")
def test_eval_reads_a_published_file_with_its_preset():
    res = runner.invoke(app, ["eval", str(TASKS / "math500-layout.jsonl"), "--preset", "math", "--methods",
                              "lowtemp", "--limit", "3", "-n", "4", "--figures", "none", "--no-trace", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["tasks"]["preset"] == "math" and out["tasks"]["items"] == 3
    assert [it["grader"] for it in out["items"]] == ["math"] * 3
    assert out["items"][0]["prompt"].endswith(BOXED_REQUEST)


def test_hub_dataset_offline_and_not_cached_is_one_line(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT),
           "PRESTO_TUI_BACKEND": "synthetic"}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HF_DATASETS_CACHE", None)
    res = subprocess.run([sys.executable, "-m", "presto_tui", "eval", "hf:example-org/no-such-set:test", "--methods",
                          "lowtemp", "--no-trace", "--figures", "none"], env=env, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert f"hf:example-org/no-such-set:test: not in the Hugging Face cache {tmp_path / 'hf' / 'hub'} and not " \
        "downloaded (HF_HUB_OFFLINE is set)" in line
    assert not (tmp_path / "hf").exists() or not any((tmp_path / "hf").rglob("*.parquet"))


def _cached_dataset(hub: Path, repo: str, files: dict[str, str]) -> None:
    """A dataset snapshot in a Hugging Face cache, laid out as huggingface_hub downloads one."""
    commit = "0" * 40
    root = hub / f"datasets--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    for name, text in files.items():
        (root / "snapshots" / commit / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "snapshots" / commit / name).write_text(text)


def test_hub_dataset_is_read_from_the_cache_with_its_config_and_split(tmp_path, monkeypatch):
    """hf:ORG/NAME/CONFIG:SPLIT is found in the hub cache first (no network asked), its config and split read
    by datasets, its rows read through the layout (row numbers in errors)."""
    import datasets

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    rows = (TASKS / "gsm8k-layout.jsonl").read_text()
    card = ("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: test\n    path: main/test.jsonl\n"
            "  - split: train\n    path: main/train.jsonl\n---\n")
    bad = '{"question": "x", "answer": "1\\n#### 1"}\n{"question": "y", "answer": "no hashes"}\n'
    _cached_dataset(tmp_path / "hub", "example-org/gsm", {"README.md": card, "main/test.jsonl": rows,
                                                          "main/train.jsonl": bad})
    items = load_tasks("hf:example-org/gsm/main:test", layout=layout("gsm8k"))
    assert [it.answer for it in items] == ["29", "150", "3600", "4.5", "-7"]
    assert len(load_tasks("hf:example-org/gsm/main", layout=layout("gsm8k"))) == 5  # the test split by default
    with pytest.raises(InputError, match=r"^hf:example-org/gsm/main:train: row 2: the answer has no '#### <number>'"):
        load_tasks("hf:example-org/gsm/main:train", layout=layout("gsm8k"))
    with pytest.raises(InputError, match=r"^hf:example-org/gsm/main:dev: not read from .*hub.* \(ValueError: "):
        load_tasks("hf:example-org/gsm/main:dev", layout=layout("gsm8k"))


def test_hub_dataset_without_a_network_is_one_line_soon(tmp_path):
    """Not cached and no network: a 'downloading ... into CACHE' line, then the one line naming the cache
    (no half-minute of datasets' retries)."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT), "PRESTO_TUI_BACKEND": "synthetic",
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there: refused at once
    for var in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_DATASETS_OFFLINE"):
        env.pop(var, None)
    res = subprocess.run([sys.executable, "-m", "presto_tui", "eval", "hf:example-org/no-such-set", "--methods",
                          "lowtemp", "--no-trace", "--figures", "none"], env=env, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    hub = tmp_path / "hf" / "hub"
    assert lines[0] == f"presto-tui: downloading hf:example-org/no-such-set into {hub}..." and len(lines) == 2, lines
    assert f"hf:example-org/no-such-set: not in the Hugging Face cache {hub} and not downloaded (" in lines[1]


def test_a_humaneval_prompts_helpers_run_before_the_code(tmp_path):
    """HumanEval/10, /38 define helpers in the prompt that the response (is_palindrome) or the tests
    (encode_shift) call: the whole prompt runs before the response's code, as the benchmark's harness runs
    prompt + completion."""
    from presto_tui.eval.graders import prompt_code

    rows = [{"task_id": "X/10", "entry_point": "make_palindrome",
             "prompt": "from typing import List\n\n\ndef is_palindrome(string: str) -> bool:\n    \"\"\" Test if given "
                       "string is a palindrome \"\"\"\n    return string == string[::-1]\n\n\n"
                       "def make_palindrome(string: str) -> str:\n    \"\"\" The shortest palindrome starting with "
                       "string. \"\"\"\n",
             "test": "def check(candidate):\n    assert candidate('') == ''\n    assert candidate('cat') == 'catac'\n"},
            {"task_id": "X/38", "entry_point": "decode_shift",
             "prompt": "def encode_shift(s: str):\n    return ''.join(chr((ord(c) + 5 - 97) % 26 + 97) for c in s)\n"
                       "\n\ndef decode_shift(s: str):\n    \"\"\" Decodes encode_shift. \"\"\"\n",
             "test": "def check(candidate):\n    for s in ['abc', 'hello']:\n"
                     "        assert candidate(encode_shift(s)) == s\n"}]
    p = tmp_path / "he.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_tasks(str(p), layout=layout("humaneval"))
    right = ["```python\ndef make_palindrome(string: str) -> str:\n    for i in range(len(string) + 1):\n"
             "        if is_palindrome(string[i:]):\n            return string + string[:i][::-1]\n```",
             "```python\ndef decode_shift(s: str):\n    return ''.join(chr((ord(c) - 5 - 97) % 26 + 97) for c in s)"
             "\n```"]
    wrong = ["```python\ndef make_palindrome(string):\n    return string\n```",
             "```python\ndef decode_shift(s):\n    return s\n```"]
    assert _graded(items, list(zip(right, wrong)), CodeLimits(timeout_s=10)) == [(True, False)] * 2
    # prose, or a prompt whose code does something, runs its import lines only
    prose = "Write add(a, b) in Python.\nfrom typing import List"
    assert prompt_code(prose) == prompt_imports("from typing import List")
    assert "os.remove" not in prompt_code("import os\nos.remove('x')\ndef f(): pass\n")


def test_the_prompts_imports_run_before_the_code_each_tried():

    prompt = ("from typing import List\nimport math, os.path as p\nfrom the list below import nothing good\n"
              "import no_such_module_here\n    import indented\nfrom typing import List\n")
    code = prompt_imports(prompt)
    assert code.count("try:") == 3 and "from typing import List" in code and "no_such_module_here" in code
    namespace: dict = {}
    exec(compile(code, "<imports>", "exec"), namespace)  # the missing module does not stop the others
    assert "List" in namespace and "math" in namespace and "p" in namespace
    assert prompt_imports("Write add(a, b).") == ""
