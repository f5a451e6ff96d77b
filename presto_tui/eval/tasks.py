"""Graded tasks: a task file (JSONL, CSV or Parquet), a Hugging Face dataset, or the built-in set.

The tool's own layout is JSONL, one JSON object a line: `prompt` and `answer` (strings; the
`number` and `math` graders' answer may also be a JSON number, `"answer": 4`), and
optionally `grader` (one of `graders.GRADERS`; default: `--grader`, else `exact`) and `id`
(a string or a whole number; default: the line number).  Blank lines and lines starting with
`#` are skipped.  A bad line is refused with `file:line: what is wrong` (exit 2) before any
engine starts: not JSON, a missing or empty field, an unknown grader, an answer its
grader cannot grade against (not a number, not a letter, a pattern that does not
compile, tests that do not compile), a repeated id.

Published task files are read as they are (`Layout`): a file ending `.csv` or `.parquet` is
read by pandas (a row where JSONL has a line; errors say `file: row N:`), any other as JSONL;
`--preset` names the layout of a benchmark and `--fields prompt=COLUMN,answer=COLUMN,...`
maps the file's columns to an item's (over a preset's); other columns are kept for the
prompt template (`--prompt-template`: `{prompt}` is the mapped prompt, `{COLUMN}` any
column of the row; a brace after a LaTeX command, `^` or `_`, as in `\\boxed{}`, stays as
written; a `{NAME}` that is no column, or names the answer's or a solution's column, is
refused in one line, as is a `--fields` column the file lacks).  Column names match
exactly, else ignoring case (AIME 2024 spells them `Problem`, `Answer`).  The presets
(`PRESETS`), with each benchmark's own field names:

- `math` (also `math500`, `aime`): MATH-500 (`problem`, `solution`, `answer`, `subject`,
  `level`, `unique_id`), AIME (`id`, `problem`, `solution`, `answer`, `url`; AIME 2024:
  `ID`, `Problem`, `Solution`, `Answer`; AIME 2025: `question`, `answer`): the prompt is
  `problem` (else `question`) and a request for a
  `\\boxed{}` answer, graded by `math` (math-verify) against `answer`; the id from
  `unique_id`, else `id`;
- `gsm8k`: GSM8K (`question`, `answer`, the answer's last line `#### 72`): the prompt is
  `question` and a request for a `\\boxed{}` number, graded by `math` (what a box holds is
  LaTeX: `3{,}600`, `\\frac{9}{2}`) against what follows `####`;
- `humaneval`: HumanEval (`task_id`, `prompt`, `canonical_solution`, `test`,
  `entry_point`): the prompt asks for the function `prompt` begins, graded by `python`
  running `test` and then `check(ENTRY_POINT)` (the benchmark's `check(candidate)`
  convention) after the whole prompt (its helpers, as the benchmark's harness runs prompt +
  completion); the id from `task_id`.

`hf:ORG/NAME[/CONFIG][:SPLIT]` (split `test` by default) reads a dataset of the Hugging Face
hub: its snapshot from the Hugging Face cache, else downloaded into it where a network allows
(`hub_dataset`, models' rule and line), read by `datasets`; with `HF_HUB_OFFLINE=1`, or no
network, one line names the dataset, the cache and why.  Nothing else is ever
downloaded: a file stays the user's.

The built-in set (`builtin`, or `builtin:arith`, `builtin:mc`) is generated from
`--task-seed`, so the same seed gives the same items everywhere:

- `arith`: two-digit addition and subtraction ("What is 47 + 38?"), graded as numbers;
- `mc`: short general-knowledge questions with four lettered options in an order drawn
  from the seed, graded by the letter (or the one option the response names).

It is sized for the embedded 135M model, which solves part of it: enough to tell
methods apart when they differ by much, not a benchmark of knowledge or reasoning.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from presto_tui.errors import InputError
from presto_tui.eval.graders import DEFAULT_GRADER, GRADERS, MathGrader, NumberGrader, grader
from presto_tui.files import readable_file
from presto_tui.safetext import visible

MAX_ITEMS = 100_000
MAX_FIELD = 1_000_000  # characters of one prompt or answer


@dataclass(frozen=True)
class Item:
    id: str
    prompt: str
    answer: str
    grader: str


BUILTIN = "builtin"
BUILTIN_SETS = ("arith", "mc")
ARITH_ITEMS = 30
HUB = "hf:"
ITEM_FIELDS = ("prompt", "answer", "id", "grader")  # what --fields maps


# -- layouts: how a published file's columns make an item -------------------------------------

def _gsm8k_answer(row: Mapping, answer: str) -> str:
    """GSM8K's answer is the worked solution; the number is what follows its last '####'."""
    if "####" not in answer:
        raise ValueError("the answer has no '#### <number>' line (GSM8K's layout)")
    return answer.rpartition("####")[2].strip().replace(",", "")


def _humaneval_tests(row: Mapping, test: str) -> str:
    """HumanEval's `test` defines check(candidate); the tests call it on the function `entry_point` names."""
    entry = _get(row, "entry_point")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError("\"entry_point\" must name the function the tests check (HumanEval's layout)")
    return f"{test.rstrip()}\n\n\ncheck({entry})\n"


BOXED_REQUEST = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class Layout:
    """Which columns make an item's fields, the prompt's template and the layout's grader."""

    name: str
    fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # item field -> columns, first present
    grader: str | None = None  # the layout's grader (--grader and a row's own `grader` column go first)
    template: str | None = None  # the prompt; None: the prompt column as it is
    answer_of: Callable[[Mapping, str], str] | None = None  # the reference from the answer column's text
    strict: bool = False  # the tool's own layout: an unknown column is a mistake
    mapped: tuple[str, ...] = ()  # the item fields --fields named: their columns must be in the file

    def columns(self, key: str) -> tuple[str, ...]:
        return self.fields.get(key, (key,))


OWN = Layout("own", strict=True)
_MATH = Layout("math", {"prompt": ("problem", "question"), "answer": ("answer",), "id": ("unique_id", "id")}, "math",
               "{prompt}\n\n" + BOXED_REQUEST)
PRESETS: dict[str, Layout] = {
    "math": _MATH, "math500": replace(_MATH, name="math500"), "aime": replace(_MATH, name="aime"),
    # asked for a \\boxed{} answer, so read by the math grader (3{,}600, \\frac{9}{2}); the reference is GSM8K's number
    "gsm8k": Layout("gsm8k", {"prompt": ("question",), "answer": ("answer",), "id": ("id",)}, "math",
                    "{prompt}\n\n" + BOXED_REQUEST, _gsm8k_answer),
    "humaneval": Layout("humaneval", {"prompt": ("prompt",), "answer": ("test",), "id": ("task_id",)}, "python",
                        "Complete the following Python function. Give the whole function, with its imports, in "
                        "one ```python block.\n\n```python\n{prompt}```", _humaneval_tests),
}


def layout(preset: str | None = None, fields: str | None = None, template: str | None = None) -> Layout:
    """The layout `--preset`, `--fields` and `--prompt-template` give (InputError, one line, on a bad one)."""
    if preset is not None and preset not in PRESETS:
        raise InputError(f"unknown --preset {preset!r}; choose one of {', '.join(PRESETS)}")
    base = PRESETS[preset] if preset is not None else OWN
    if fields is None and template is None:
        return base
    mapping = dict(base.fields)
    mapped = []
    for part in (fields or "").split(","):
        if not part.strip():
            continue
        key, eq, column = (x.strip() for x in part.partition("="))
        if not eq or not column:
            raise InputError(f"--fields takes FIELD=COLUMN pairs separated by commas, got {part.strip()!r}")
        if key not in ITEM_FIELDS:
            raise InputError(f"--fields: unknown item field {key!r}; map {', '.join(ITEM_FIELDS)}")
        mapping[key] = (column,)
        mapped.append(key)
    if template is not None and "{" not in template:
        raise InputError("--prompt-template names no field: write {prompt} (or {COLUMN}) where the prompt goes")
    return replace(base, name=base.name if preset else "fields", fields=mapping, strict=False,
                   mapped=tuple(mapped), template=template if template is not None else base.template)


def _get(row: Mapping, column: str):
    """A row's column: by its exact name, else ignoring case."""
    name = _has(row, column)
    return None if name is None else row[name]


def _first(row: Mapping, columns: tuple[str, ...]):
    return _named(row, columns)[1]


def _named(row: Mapping, columns: tuple[str, ...]) -> tuple[str, object]:
    """(the column as the row spells it, its value) of the first of `columns` the row has; (columns[0], None)."""
    for c in columns:
        name = _has(row, c)
        if name is not None and row[name] is not None:
            return name, row[name]
    return columns[0], None


# {name} right after a LaTeX command, ^ or _ is LaTeX's group, never a placeholder: \boxed{Answer}, x^{2}
# ({prompt} always is, and so is a {name} after a literal \n or \t, which no LaTeX answer format uses)
_PLACE = re.compile(r"(\\(?![nt]\b)[A-Za-z]+\s*|[\^_])?\{(\w+)\}")
_SOLUTIONS = ("solution", "canonical_solution")  # columns that hold the worked answer


def _columns(row: Mapping) -> str:
    return ", ".join(str(k) for k in row)


def _has(row: Mapping, column: str) -> str | None:
    """The column as the row spells it: by its exact name, else ignoring case (None: no such column)."""
    if column in row:
        return column
    folded = column.casefold()
    return next((k for k in row if isinstance(k, str) and k.casefold() == folded), None)


def fill(template: str, row: Mapping, prompt: str, answer_columns: tuple[str, ...] = ()) -> str:
    """`template` with {prompt} and {COLUMN} filled from the row; a brace after a LaTeX command as written.
    ValueError (one line) for a placeholder that names no column, or the answer's (it would give the answer away)."""
    secret = {c.casefold() for c in (*answer_columns, *_SOLUTIONS)}

    def sub(m: re.Match) -> str:
        name = m.group(2)
        if name == "prompt":
            return (m.group(1) or "") + prompt
        if m.group(1):
            return m.group(0)
        column = _has(row, name)
        if column is None:
            raise ValueError(f"--prompt-template: {{{name}}} is no column of the file (its columns: "
                             f"{_columns(row)}); {{prompt}} is the prompt")
        if column.casefold() in secret:
            raise ValueError(f"--prompt-template names {{{name}}}, which holds the answer: the prompt would give "
                             "it away")
        value = row[column]
        return "" if value is None else str(value)

    return _PLACE.sub(sub, template)


# -- reading ------------------------------------------------------------------------------------

def load_tasks(spec: str, *, default_grader: str | None = None, seed: int = 0,
               layout: Layout = OWN, limit: int | None = None) -> list[Item]:
    """The items `spec` names: `builtin`, `builtin:arith`, `builtin:mc`, `hf:ORG/NAME[/CONFIG][:SPLIT]`, or a
    task file's path (JSONL, CSV or Parquet), read with `layout`."""
    if spec == BUILTIN or spec.startswith(BUILTIN + ":"):
        name = spec.partition(":")[2]
        if name and name not in BUILTIN_SETS:
            raise InputError(f"unknown built-in task set {name!r}; choose builtin, "
                             + ", ".join(f"builtin:{s}" for s in BUILTIN_SETS) + " or a task file")
        if layout is not OWN:
            raise InputError("--preset, --fields and --prompt-template read a task file; the built-in set has its "
                             "own items")
        return builtin_tasks(name or None, seed)[:limit]
    if spec.startswith(HUB) and not Path(spec).exists():
        return read_hub_dataset(spec, default_grader, layout, limit)
    return read_task_file(Path(spec), default_grader, layout, limit)


TABLES = (".csv", ".parquet", ".pq")


def read_task_file(path: Path, default_grader: str | None = None, layout: Layout = OWN,
                   limit: int | None = None) -> list[Item]:
    readable_file(path, "task file", pipes=True)
    shown = visible(str(path), keep_newlines=False)
    if path.suffix.lower() in TABLES:
        rows = _table_rows(path, shown)
        return _items(rows, shown, "row ", default_grader, layout, limit)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{shown}: cannot read task file ({e.strerror})") from None
    return _items(_jsonl_rows(raw), shown, "", default_grader, layout, limit)


def _jsonl_rows(raw: bytes) -> Iterator[tuple[int, Mapping | ValueError]]:
    for n, line in enumerate(raw.split(b"\n"), start=1):
        text = line.strip()
        if n == 1:
            text = text.removeprefix(b"\xef\xbb\xbf")  # a BOM is not part of the first item
        if not text or text.startswith(b"#"):
            continue
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            yield n, ValueError(f"not valid JSON ({str(e).split(':')[0]})")
            continue
        if not isinstance(obj, dict):
            yield n, ValueError(f"an item is a JSON object with \"prompt\" and \"answer\", got {type(obj).__name__}")
            continue
        yield n, obj


def _table_rows(path: Path, shown: str) -> Iterator[tuple[int, Mapping | ValueError]]:
    import pandas as pd

    try:
        if path.suffix.lower() == ".csv":  # every cell as written: '007' and 'NA' are answers, not numbers
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        else:
            frame = pd.read_parquet(path)
    except ImportError as e:
        raise InputError(f"{shown}: reading {path.suffix} needs {e.name or 'pyarrow'} (pip install pyarrow)") from None
    except Exception as e:  # a file pandas cannot read: one line, its first
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise InputError(f"{shown}: not a {path.suffix.lstrip('.').upper()} table ({first})") from None
    _at_most(len(frame), shown)  # (counted before a row is made)
    for n, row in enumerate(frame.to_dict("records"), start=1):
        yield n, {str(k): _plain(v) for k, v in row.items()}


def _at_most(count: int, where: str) -> None:
    """A task set holds at most MAX_ITEMS items: a table's rows are counted before any is read, a JSONL file's
    as they are."""
    if count > MAX_ITEMS:
        raise InputError(f"{where}: more than {MAX_ITEMS} items")


def _plain(value):
    """A cell as JSON would hold it: numpy's numbers as Python's, a missing cell as None."""
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN: pandas' missing cell
        return None
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def read_hub_dataset(spec: str, default_grader: str | None = None, layout: Layout = OWN,
                     limit: int | None = None) -> list[Item]:
    """`hf:ORG/NAME[/CONFIG][:SPLIT]` through `datasets`: from its cache, else downloaded where a network allows."""
    from presto_tui.api.engine import hub_dataset, is_hub_id
    from presto_tui.errors import EngineError

    name, _, split = spec.removeprefix(HUB).partition(":")
    parts = name.split("/")
    repo, config = "/".join(parts[:2]), (parts[2] if len(parts) == 3 else None)
    shown = visible(spec, keep_newlines=False)
    if not is_hub_id(repo) or len(parts) > 3 or (config is not None and not config):
        raise InputError(f"{shown}: a hub dataset is hf:ORG/NAME[/CONFIG][:SPLIT], as hf:openai/gsm8k/main:test")
    try:
        import datasets
    except ImportError:
        raise InputError(f"{shown}: reading a hub dataset needs datasets (pip install datasets)") from None
    try:  # the snapshot in the hub cache, as models are found (datasets itself would retry for half a minute)
        folder = hub_dataset(repo, shown)
    except EngineError as e:
        raise InputError(str(e)) from None
    try:
        data = datasets.load_dataset(str(folder), config, split=split or "test")
    except Exception as e:  # no such config or split, files datasets cannot read: one line says which
        why = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
        raise InputError(f"{shown}: not read from {folder} ({why})") from None
    _at_most(len(data), shown)
    return _items(((n, dict(row)) for n, row in enumerate(data, start=1)), shown, "row ", default_grader, layout,
                  limit)


def _items(rows, shown: str, where: str, default_grader: str | None, layout: Layout,
           limit: int | None = None) -> list[Item]:
    """The items of `rows` up to `limit` (--limit: the rows after it are not read, their answers not parsed)."""
    items: list[Item] = []
    ids: dict[str, int] = {}
    for n, row in rows:
        if limit is not None and len(items) >= limit:
            break
        at = f"{shown}:{' ' if where else ''}{where}{n}"  # file:LINE or file: row N
        try:
            if isinstance(row, ValueError):
                raise row
            item = _item(row, n, default_grader, layout)
        except ValueError as e:
            raise InputError(f"{at}: {visible(str(e), keep_newlines=False)}") from None
        if item.id in ids:
            again = visible(item.id, keep_newlines=False)
            raise InputError(f"{at}: id {again!r} repeats {where or 'line '}{ids[item.id]}")
        ids[item.id] = n
        items.append(item)
        _at_most(len(items), at)
    if not items:
        raise InputError(f"{shown}: no items (one JSON object a line with \"prompt\" and \"answer\")" if not where
                         else f"{shown}: no rows")
    return items


NUMERIC_ANSWERS = (NumberGrader.name, MathGrader.name)  # graders whose reference may be a number


def _item(obj: Mapping, n: int, default_grader: str | None, layout: Layout = OWN) -> Item:
    if layout.strict:
        unknown = sorted(set(obj) - set(ITEM_FIELDS))
        if unknown:
            folded = {str(u).casefold() for u in unknown}  # AIME's Problem, Answer as well
            hint = next((f"; a {preset} file? --preset {preset}" for preset, cols in _HINTS if folded & set(cols)), "")
            raise ValueError(f"unknown field {unknown[0]!r}; an item has prompt, answer, grader and id (map a file's "
                             f"own columns with --fields){hint}")
    for key in layout.mapped:
        column = layout.columns(key)[0]
        if _has(obj, column) is None:
            also = f"; to grade every item with one grader use --grader {column}" if key == "grader" else ""
            raise ValueError(f"--fields {key}={column}: no column {column!r} (its columns: {_columns(obj)}){also}")
    name = _first(obj, layout.columns("grader")) or default_grader or layout.grader or DEFAULT_GRADER
    fields = {}
    for key in ("prompt", "answer"):
        column, value = _named(obj, layout.columns(key))
        if value is None:
            why = "empty" if _has(obj, column) is not None else "missing"
            raise ValueError(f"{why} \"{column}\" (its columns: {_columns(obj)})")
        if key == "answer" and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and (name in NUMERIC_ANSWERS or not layout.strict):
            value = str(value)  # a number graded as a number: 4, 0.5, 1e+30 (the grader reads it exactly)
        if not isinstance(value, str):
            takes = " (a number only with grader number or math)" if type(value) in (int, float) else ""
            raise ValueError(f"\"{column}\" must be a string{takes}, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"\"{column}\" is empty")
        if len(value) > MAX_FIELD:
            raise ValueError(f"\"{column}\" is longer than {MAX_FIELD} characters")
        fields[key] = value
    if not isinstance(name, str) or name not in GRADERS:
        raise ValueError(f"unknown grader {str(name)[:40]!r}; choose one of {', '.join(GRADERS)}")
    if layout.answer_of is not None:
        fields["answer"] = layout.answer_of(obj, fields["answer"])
    if layout.template is not None:
        fields["prompt"] = fill(layout.template, obj, fields["prompt"], layout.columns("answer"))
    grader(name).check(fields["answer"])
    ident = _first(obj, layout.columns("id"))
    ident = n if ident is None else ident
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or (isinstance(ident, str) and not ident.strip()):
        raise ValueError("\"id\" must be a non-empty string or a whole number")
    return Item(str(ident), fields["prompt"], fields["answer"], name)


# the columns that give a published layout away, for the one line that refuses them in the tool's own
_HINTS = (("math", ("problem", "solution", "unique_id")), ("gsm8k", ("question",)),
          ("humaneval", ("entry_point", "test", "task_id", "canonical_solution")))


# -- the built-in set --------------------------------------------------------------------------

# (question, the right option, three wrong ones): facts a small instruction-tuned model often knows
MC_BANK: tuple[tuple[str, str, tuple[str, str, str]], ...] = (
    ("Which planet is known as the Red Planet?", "Mars", ("Venus", "Jupiter", "Saturn")),
    ("What is the capital of France?", "Paris", ("Berlin", "Madrid", "Rome")),
    ("How many legs does a spider have?", "Eight", ("Six", "Four", "Ten")),
    ("What do bees make?", "Honey", ("Milk", "Silk", "Cotton")),
    ("Which animal is the largest mammal?", "Blue whale", ("Elephant", "Giraffe", "Hippopotamus")),
    ("What is frozen water called?", "Ice", ("Steam", "Sand", "Glass")),
    ("Which gas do plants take in from the air?", "Carbon dioxide", ("Helium", "Neon", "Argon")),
    ("What color is the sky on a clear day?", "Blue", ("Green", "Red", "Purple")),
    ("How many days are in a week?", "Seven", ("Five", "Ten", "Twelve")),
    ("Which is the largest ocean on Earth?", "Pacific Ocean", ("Atlantic Ocean", "Indian Ocean", "Arctic Ocean")),
    ("At how many degrees Celsius does water boil at sea level?", "100", ("50", "0", "200")),
    ("Which organ pumps blood through the body?", "Heart", ("Lungs", "Liver", "Stomach")),
    ("Who wrote Romeo and Juliet?", "William Shakespeare", ("Charles Dickens", "Mark Twain", "Jane Austen")),
    ("What is the chemical symbol for gold?", "Au", ("Ag", "Fe", "Gd")),
    ("On which continent is Egypt?", "Africa", ("Asia", "Europe", "South America")),
    ("How many sides does a triangle have?", "Three", ("Four", "Five", "Six")),
    ("What is the opposite of hot?", "Cold", ("Warm", "Loud", "Tall")),
    ("Which planet is closest to the Sun?", "Mercury", ("Earth", "Mars", "Neptune")),
    ("What does a caterpillar turn into?", "A butterfly", ("A spider", "A frog", "A bird")),
    ("Which language is mainly spoken in Brazil?", "Portuguese", ("Spanish", "French", "English")),
)


def arith_items(seed: int, count: int = ARITH_ITEMS) -> list[Item]:
    rng = random.Random(f"arith-{seed}")
    items = []
    for i in range(count):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if rng.random() < 0.5:
            op, result = "+", a + b
        else:
            a, b = max(a, b), min(a, b)
            op, result = "-", a - b
        items.append(Item(f"arith-{i:02d}", f"What is {a} {op} {b}? Answer with the number.", str(result), "number"))
    return items


def mc_items(seed: int) -> list[Item]:
    rng = random.Random(f"mc-{seed}")
    items = []
    for i, (question, right, wrong) in enumerate(MC_BANK):
        options = [right, *wrong]
        rng.shuffle(options)
        lines = "\n".join(f"{letter}) {text}" for letter, text in zip("ABCD", options))
        letter = "ABCD"[options.index(right)]
        items.append(Item(f"mc-{i:02d}", f"{question}\n{lines}\nAnswer with the letter of the correct option.",
                          letter, "mc"))
    return items


def builtin_tasks(name: str | None = None, seed: int = 0) -> list[Item]:
    """The built-in set: both parts interleaved (so the first items hold both kinds), or one part."""
    if name == "arith":
        return arith_items(seed)
    if name == "mc":
        return mc_items(seed)
    arith, mc = arith_items(seed), mc_items(seed)
    out: list[Item] = []
    for i in range(max(len(arith), len(mc))):
        out += arith[i:i + 1] + mc[i:i + 1]
    return out
