"""Graded tasks: a JSONL task file, or the built-in set generated from a seed.

A task file holds one JSON object a line: `prompt` and `answer` (strings; the `number`
grader's answer may also be a JSON number, `"answer": 4`), and optionally `grader` (one of
`graders.GRADERS`; default: `--grader`, else `exact`) and `id` (a string or a whole number;
default: the line number).  Blank lines and lines starting with `#`
are skipped.  A bad line is refused with `file:line: what is wrong` (exit 2) before any
engine starts: not JSON, a missing or empty field, an unknown grader, an answer its
grader cannot grade against (not a number, not a letter, a pattern that does not
compile, tests that do not compile), a repeated id.

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
from dataclasses import dataclass
from pathlib import Path

import orjson

from presto_tui.errors import InputError
from presto_tui.eval.graders import DEFAULT_GRADER, GRADERS, NumberGrader, grader
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


def load_tasks(spec: str, *, default_grader: str | None = None, seed: int = 0) -> list[Item]:
    """The items `spec` names: `builtin`, `builtin:arith`, `builtin:mc`, or a task file's path."""
    if spec == BUILTIN or spec.startswith(BUILTIN + ":"):
        name = spec.partition(":")[2]
        if name and name not in BUILTIN_SETS:
            raise InputError(f"unknown built-in task set {name!r}; choose builtin, "
                             + ", ".join(f"builtin:{s}" for s in BUILTIN_SETS) + " or a task file")
        return builtin_tasks(name or None, seed)
    return read_task_file(Path(spec), default_grader)


def read_task_file(path: Path, default_grader: str | None = None) -> list[Item]:
    readable_file(path, "task file", pipes=True)
    shown = visible(str(path), keep_newlines=False)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{shown}: cannot read task file ({e.strerror})") from None
    items: list[Item] = []
    ids: dict[str, int] = {}
    for n, line in enumerate(raw.split(b"\n"), start=1):
        text = line.strip()
        if n == 1:
            text = text.removeprefix(b"\xef\xbb\xbf")  # a BOM is not part of the first item
        if not text or text.startswith(b"#"):
            continue
        try:
            item = _item(text, n, default_grader)
        except ValueError as e:
            raise InputError(f"{shown}:{n}: {visible(str(e), keep_newlines=False)}") from None
        if item.id in ids:
            raise InputError(f"{shown}:{n}: id {visible(item.id, keep_newlines=False)!r} repeats line {ids[item.id]}")
        ids[item.id] = n
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise InputError(f"{shown}:{n}: more than {MAX_ITEMS} items")
    if not items:
        raise InputError(f"{shown}: no items (one JSON object a line with \"prompt\" and \"answer\")")
    return items


def _item(text: bytes, n: int, default_grader: str | None) -> Item:
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({str(e).split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"an item is a JSON object with \"prompt\" and \"answer\", got {type(obj).__name__}")
    unknown = sorted(set(obj) - {"prompt", "answer", "grader", "id"})
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}; an item has prompt, answer, grader and id")
    name = obj.get("grader", default_grader or DEFAULT_GRADER)
    fields = {}
    for key in ("prompt", "answer"):
        value = obj.get(key)
        if value is None:
            raise ValueError(f"missing \"{key}\"")
        if key == "answer" and name == NumberGrader.name and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            value = str(value)  # a number graded as a number: 4, 0.5, 1e+30 (the grader reads it exactly)
        if not isinstance(value, str):
            takes = " (a number only with grader number)" if type(value) in (int, float) else ""
            raise ValueError(f"\"{key}\" must be a string{takes}, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"\"{key}\" is empty")
        if len(value) > MAX_FIELD:
            raise ValueError(f"\"{key}\" is longer than {MAX_FIELD} characters")
        fields[key] = value
    if not isinstance(name, str) or name not in GRADERS:
        raise ValueError(f"unknown grader {str(name)[:40]!r}; choose one of {', '.join(GRADERS)}")
    grader(name).check(fields["answer"])
    ident = obj.get("id", n)
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or (isinstance(ident, str) and not ident.strip()):
        raise ValueError("\"id\" must be a non-empty string or a whole number")
    return Item(str(ident), fields["prompt"], fields["answer"], name)


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
