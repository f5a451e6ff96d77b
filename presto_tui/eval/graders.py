"""Graders: how the answer is read from a response, and whether it is right.

Each grader is an object with one name (an item's `grader` field) and three methods:

- `check(answer)`: refuse, when the task file is read, a reference answer it cannot
  grade against (a regular expression that does not compile, a letter that is not one);
- `extract(response, prompt)`: the answer the response gives, as text, or None when it
  gives none (pure and cheap, so other commands can group answers by it);
- `grade(response, answer, prompt)`: a `Grade`, whether it is right and what was read;
- `key(response, prompt)`: what `--vote` groups responses by (the extracted answer, in a
  canonical form where several spellings mean one answer).

The text graded is what a person reads: an MH chain's state cut at its first EOS.
Python unit tests never run in this process: `sandbox.run_tests` runs the code in a program
host (in bubblewrap where it works) and the tests in a runner the code cannot reach.
The `math` grader reads LaTeX answers as the math benchmarks grade them, with math-verify
(the `eval` extra): `\\frac{1}{2}`, `0.5` and `1/2` are one answer, `x=3` is `3`.
"""

from __future__ import annotations

import ast
import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from presto_tui.eval.sandbox import CodeLimits, run_tests


@dataclass(frozen=True)
class Grade:
    correct: bool
    extracted: str | None  # what the grader read from the response (None: no answer found)
    detail: str = ""  # why it is wrong, where that is more than a different answer (a failing test)


class Grader:
    name: ClassVar[str]
    help: ClassVar[str]

    def check(self, answer: str) -> None:
        """Raise ValueError (one line) if `answer` cannot be graded against."""

    def extract(self, response: str, prompt: str = "") -> str | None:
        raise NotImplementedError

    def grade(self, response: str, answer: str, prompt: str = "") -> Grade:
        got = self.extract(response, prompt)
        return Grade(got is not None and self.same(got, answer), got)

    def same(self, got: str, answer: str) -> bool:
        raise NotImplementedError

    def key(self, response: str, prompt: str = "") -> str | None:
        return self.extract(response, prompt)

    def grouper(self, prompt: str = "") -> Callable[[str], str | None]:
        """The label of each response's answer group, called on one item's responses in chain order (what
        `--vote` and maj@k group by): here its key; a grader whose equality is no string's groups by it."""
        return lambda response: self.key(response, prompt)


def normalise_text(s: str) -> str:
    """Case, runs of white space and the punctuation around a sentence do not count."""
    return " ".join(s.casefold().split()).strip(" .!?;:\"'`")


class ExactGrader(Grader):
    name = "exact"
    help = "the whole response equals the answer, ignoring case, spacing and the punctuation around it"

    def extract(self, response: str, prompt: str = "") -> str | None:
        text = normalise_text(response)
        return text or None

    def same(self, got: str, answer: str) -> bool:
        return got == normalise_text(answer)


# A number as people write it: a sign, thousands separators, decimals, an exponent, or a fraction a/b.
# Exponents have at most 3 digits: Fraction("1e999999999") would compute 10**999999999 here.
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,3}(?!\d))?(?:/\d+)?"
                     r"|(?<![\w.])[-+\u2212]?\.\d+")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_MARK = re.compile(r"answer\s*(?:is|:|=)?", re.IGNORECASE)
_HUGE_EXPONENT = re.compile(r"[eE][-+]?\d{4}")


def parse_number(text: str) -> Fraction | None:
    """An exact value of a number as written ('1,000', '-3.50', '2e3', '3/4', '$12'), or None."""
    s = text.strip().replace("\u2212", "-").replace(",", "").lstrip("$").rstrip("%").strip()
    if _HUGE_EXPONENT.search(s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


class NumberGrader(Grader):
    name = "number"
    help = ("the number the response gives (in \\boxed{}, else after 'answer', else its last number) equals the "
            "answer's, however written: 1,000 = 1000 = 1e3, 0.5 = 1/2; relative tolerance 1e-6")
    rel_tol = 1e-6

    def check(self, answer: str) -> None:
        if parse_number(answer) is None:
            raise ValueError(f"answer {answer[:40]!r} is not a number (grader number)")

    def extract(self, response: str, prompt: str = "") -> str | None:
        boxed = _BOXED.findall(response)
        for place in ([boxed[-1]] if boxed else []):
            if m := _NUMBER.search(place):
                return m.group(0)
        marks = list(_ANSWER_MARK.finditer(response))
        if marks and (m := _NUMBER.search(response, marks[-1].end())):
            return m.group(0)
        found = _NUMBER.findall(response)
        return found[-1] if found else None

    def same(self, got: str, answer: str) -> bool:
        a, b = parse_number(got), parse_number(answer)
        if a is None or b is None:
            return False
        # in exact arithmetic: float() of 1e400 overflows
        return abs(a - b) <= max(Fraction(self.rel_tol) * max(abs(a), abs(b)), Fraction(1, 10**12))

    def key(self, response: str, prompt: str = "") -> str | None:
        got = self.extract(response, prompt)
        value = parse_number(got) if got is not None else None
        return str(value) if value is not None else got  # 1,000 and 1000, 0.5 and 1/2: one answer


LETTERS = "ABCDEFGHIJ"
# a capital letter, or a small one standing alone ('Answer: b', '(c)'): 'the answer is a butterfly' names no option
_MC_MARK = re.compile(r"answer\s*(?:is|:)?\s*(?:option\s*)?[(\[*\s]*"
                      r"(?:((?-i:[A-J]))\b(?![a-z])|([a-j])(?=[)\].:*]|\s*$))", re.IGNORECASE)
_MC_LEAD = re.compile(r"^[\s(\[*]*([A-J])(?:[)\].:*]|\s*$)")  # 'B) Mars', '(B)', 'B.', 'B' alone; not 'A planet'
_MC_PAREN = re.compile(r"\(([A-J])\)")
_MC_OPTION = re.compile(r"^\s*\(?([A-J])[).:]\s+(.+?)\s*$", re.MULTILINE)


def options_of(prompt: str) -> dict[str, str]:
    """The lettered options a prompt lists, one a line ('A) Mars', 'B. Venus', '(C) Earth')."""
    return {m.group(1): m.group(2) for m in _MC_OPTION.finditer(prompt)}


class ChoiceGrader(Grader):
    name = "mc"
    help = ("the option letter the response gives ('answer is B', a leading 'B)', '(B)'; else the one option "
            "whose text it names, from the prompt's lettered lines) equals the answer letter")

    def check(self, answer: str) -> None:
        letter = answer.strip().upper()
        if len(letter) != 1 or letter not in LETTERS:
            raise ValueError(f"answer {answer[:40]!r} is not an option letter A-J (grader mc)")

    def extract(self, response: str, prompt: str = "") -> str | None:
        for pattern in (_MC_MARK, _MC_LEAD, _MC_PAREN):
            if m := pattern.search(response):
                return next(x for x in m.groups() if x).upper()
        named = [letter for letter, text in options_of(prompt).items()
                 if re.search(rf"(?<!\w){re.escape(text)}(?!\w)", response, re.IGNORECASE)]
        return named[0] if len(named) == 1 else None

    def same(self, got: str, answer: str) -> bool:
        return got == answer.strip().upper()


class RegexGrader(Grader):
    name = "regex"
    help = "the answer is a Python regular expression that must match somewhere in the response"

    def check(self, answer: str) -> None:
        try:
            re.compile(answer)
        except re.error as e:
            raise ValueError(f"answer is not a valid regular expression ({e})") from None

    def extract(self, response: str, prompt: str = "") -> str | None:
        # what the pattern reads depends on the answer, which extract does not see: the response is the
        # answer (--vote groups by its text; `grade` reports the match)
        return normalise_text(response) or None

    def grade(self, response: str, answer: str, prompt: str = "") -> Grade:
        m = re.search(answer, response)
        return Grade(m is not None, m.group(0) if m is not None else None)


_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def code_of(response: str) -> str:
    """The program a response gives: its fenced code blocks (```python ... ```), else all of it."""
    blocks = [b.strip("\n") for b in _FENCE.findall(response)]
    return "\n\n".join(b for b in blocks if b.strip()) if blocks else response


_IMPORT_LINE = re.compile(r"^(?:from [\w.]+ import [\w., ()*]+"
                          r"|import [\w.]+(?: as \w+)?(?:, [\w.]+(?: as \w+)?)*)[ \t]*$", re.MULTILINE)


def prompt_imports(prompt: str) -> str:
    """The import lines a prompt's code starts from (a HumanEval prompt imports what its signature uses,
    `from typing import List`; the function a response gives often leaves them out), each one tried: a module
    the prompt names but the sandbox lacks fails only the code that uses it."""
    lines = []
    for m in _IMPORT_LINE.finditer(prompt):
        try:
            compile(m.group(0).strip(), "<prompt>", "exec")
        except SyntaxError:  # prose that happens to start with 'from ... import'
            continue
        lines.append(m.group(0).strip())
    return "\n".join(_tried(line) for line in dict.fromkeys(lines))


def _tried(line: str) -> str:
    return f"try:\n    {line}\nexcept ImportError:\n    pass"


_DEFINES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
            ast.AnnAssign)


def prompt_code(prompt: str) -> str:
    """What of the prompt runs before a response's code: the prompt's code whole where it only defines (a
    HumanEval prompt: its imports, helper functions such as is_palindrome or encode_shift, the stub), as
    HumanEval's own harness runs prompt + completion; its imports each tried.  A prompt that is not such code
    (prose, a statement that does something): its import lines only."""
    code = code_of(prompt)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return prompt_imports(prompt)
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if not body or not all(isinstance(n, _DEFINES) for n in body) \
            or not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in body):
        return prompt_imports(prompt)
    lines = code.splitlines()
    parts = []
    for n in body:  # a definition from its first decorator
        first = min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))])
        text = "\n".join(lines[first - 1:n.end_lineno])
        parts.append(_tried(text.strip()) if isinstance(n, (ast.Import, ast.ImportFrom)) else text)
    return "\n".join(parts)


class PythonGrader(Grader):
    name = "python"
    help = ("the answer is Python test code (asserts or unittest tests) run against the response's code (its "
            "```python blocks, else all of it), the code in a sandbox where bubblewrap works; right iff every test "
            "passes; a prompt that is Python definitions (HumanEval's: imports, helpers, the stub) runs before the "
            "code, else the prompt's import lines; "
            "HumanEval's tests end with check(ENTRY_POINT), the check(candidate) convention")

    def __init__(self, limits: CodeLimits | None = None):
        self.limits = limits or CodeLimits()

    def check(self, answer: str) -> None:
        try:
            compile(answer, "<tests>", "exec")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as e:  # the last two: nesting too deep
            raise ValueError(f"the tests do not compile as Python ({type(e).__name__}: {e})") from None

    def extract(self, response: str, prompt: str = "") -> str | None:
        code = code_of(response).strip()
        return code or None

    def grade(self, response: str, answer: str, prompt: str = "") -> Grade:
        code = self.extract(response, prompt)
        if code is None:
            return Grade(False, None, "no code")
        before = prompt_code(prompt)
        result = run_tests(f"{before}\n\n{code}" if before else code, answer, self.limits)
        return Grade(result.passed, code, result.detail)


# -- math: LaTeX answers, read by math-verify -----------------------------------------------------

MATH_TIMEOUT_S = 5  # math-verify's own limit on one parse or comparison (whole seconds: signal.alarm)
MAX_MATH_ANSWER = 2_000  # characters of a reference answer or of what is read from a response
MAX_GOLDS = 100_000  # references a math grader keeps read (a task file's items at most)
MAX_READS = 4096  # responses it keeps read: an item's chains are graded, then grouped, one item after another


@functools.cache
def need_math_verify():
    """math-verify's parse and verify, or one line saying how to install it."""
    try:
        import math_verify
    except ImportError:
        from presto_tui.errors import InputError

        raise InputError("the math grader needs math-verify: pip install 'presto-tui[eval]' (or math-verify)") \
            from None
    # its warnings (a timeout, a parse that failed) are per response: they are the grade's, not stderr's
    logging.getLogger("math_verify").addHandler(logging.NullHandler())
    logging.getLogger("math_verify").propagate = False
    return math_verify


def _math_timeout() -> int | None:
    """math-verify times out with signal.alarm, which only the main thread may set: elsewhere (a server's
    thread) it runs without its timer, on inputs cut to MAX_MATH_ANSWER characters."""
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def _unwrap_text(latex: str) -> str:
    """A text answer as a person reads it: '\\text{Evelyn}' -> 'Evelyn', '\\textbf{(C)}' -> '(C)'."""
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", latex)
    return s.replace("$", "").replace("\\boxed", "").strip("{} ")


class MathGrader(Grader):
    name = "math"
    help = ("the last \\boxed{} of the response (else its final answer line, else its last expression) against the "
            "answer (LaTeX, as MATH-500 and AIME write it), read and compared by math-verify: equivalent forms are "
            "equal (\\frac{1}{2} = 0.5 = 1/2, \\sqrt{8} = 2\\sqrt{2}, x=3 = 3, {3, 5} = {5, 3}, intervals by their "
            "ends); text answers by their words")

    def __init__(self) -> None:
        self.mv = need_math_verify()
        self._golds: dict[str, list] = {}  # a reference read once: every chain and method of its item is graded on it
        # a response read once: grading it, --vote's and maj@k's grouping and the table's extraction read it again
        self._reads: dict[str, tuple[list, str | None]] = {}

    def _gold(self, answer: str) -> list:
        if answer not in self._golds:
            if len(self._golds) >= MAX_GOLDS:
                self._golds.clear()
            self._golds[answer] = self._parse(answer, gold=True)
        return self._golds[answer]

    def _parse(self, text: str, *, gold: bool = False) -> list:
        mv = self.mv
        timeout = _math_timeout()
        if gold:  # a reference is the answer itself: read it whole, as math-verify's own examples do
            text = text if "\\boxed" in text else f"\\boxed{{{text}}}"
            configs = [mv.LatexExtractionConfig(), mv.ExprExtractionConfig()]
        else:
            configs = [mv.LatexExtractionConfig(boxed_match_priority=0), mv.ExprExtractionConfig()]
        try:
            return mv.parse(text, extraction_config=configs, parsing_timeout=timeout)
        except Exception:  # a response math-verify cannot read has no answer, it does not end the evaluation
            return []

    def check(self, answer: str) -> None:
        if len(answer) > MAX_MATH_ANSWER:
            raise ValueError(f"answer is longer than {MAX_MATH_ANSWER} characters (grader math)")
        if len(self._gold(answer)) < 2:  # _read's rule: math-verify read nothing it could compare
            raise ValueError(f"answer {answer[:40]!r} is not an expression math-verify reads (grader math)")

    def _read(self, response: str) -> tuple[list, str | None]:
        """(math-verify's reading, the answer as the response writes it: its last \\boxed{} whole, as
        math-verify reads a decimal as a fraction and shows it so)."""
        if response not in self._reads:
            if len(self._reads) >= MAX_READS:
                self._reads.clear()
            self._reads[response] = self._read_once(response)
        return self._reads[response]

    def _read_once(self, response: str) -> tuple[list, str | None]:
        boxed = last_boxed(response)
        if boxed:  # the last box alone: math-verify would read every box of the response as one set
            found = self._parse(f"\\boxed{{{_tidy(boxed)}}}")
        else:  # no box: the final answer line ('The final answer is $10$'), else the last expression
            found = self._parse(response[-50 * MAX_MATH_ANSWER:])
        if len(found) < 2 or not isinstance(found[-1], str) or len(found[-1]) > MAX_MATH_ANSWER:
            return [], None
        return found, boxed or found[-1]

    def extract(self, response: str, prompt: str = "") -> str | None:
        return self._read(response)[1]

    def grade(self, response: str, answer: str, prompt: str = "") -> Grade:
        found, shown = self._read(response)
        if shown is None:
            return Grade(False, None)
        gold = self._gold(answer)
        try:
            right = bool(self.mv.verify(gold, found, timeout_seconds=_math_timeout()))
        except Exception:
            right = False
        # a text answer ('Evelyn', '\\text{(C)}'): math-verify reads letters as symbols; the words decide
        # (only for a text reference: '3!' is no spelling of 3)
        words = normalise_text(_unwrap_text(shown)) == normalise_text(_unwrap_text(answer))
        right = right or (words and _is_text(answer))
        return Grade(right, shown)

    def key(self, response: str, prompt: str = "") -> str | None:
        """The canonical form --vote groups by: sympy's, numbers as exact rationals where they are ('0.5',
        '1/2' and '\\frac{1}{2}' are '1/2'), 'x = 3' as '3'."""
        found, shown = self._read(response)
        if shown is None:
            return None
        return canonical(found[0], shown)

    def grouper(self, prompt: str = "") -> Callable[[str], str | None]:
        """Group by what math-verify counts equal, as it grades (25 and 25\\%, \\frac13 and 0.3333333, (x+1)^2
        and x^2+2x+1 are one answer, which no canonical string makes them): a response joins the first group
        whose first member it verifies equal to, or whose key it shares; else it starts a group, labelled by its
        key.  At most M^2/2 comparisons for M responses."""
        groups: list[tuple[list, str]] = []  # (the first member's reading, the group's label)

        def label(response: str) -> str | None:
            found, shown = self._read(response)
            if shown is None:
                return None
            key = canonical(found[0], shown)
            for first, name in groups:
                if name == key or self._equal(first, found):
                    return name
            name = key if all(key != n for _, n in groups) else f"{key} ({len(groups) + 1})"
            groups.append((found, name))
            return name

        return label

    def _equal(self, a: list, b: list) -> bool:
        try:
            return bool(self.mv.verify(a, b, timeout_seconds=_math_timeout()))
        except Exception:
            return False


_BOX = re.compile(r"\\(?:boxed|fbox)(?:\s*\{|\s+([^\s{}$\\]+))")  # \\boxed{4}, \\boxed {4}, \\boxed 4


def last_boxed(text: str) -> str | None:
    """What the last \\boxed{...} (or \\fbox{...}, \\boxed {...}) of `text` holds, its braces balanced, or the
    word a braceless \\boxed 4 boxes; None without one."""
    found = None
    for found in _BOX.finditer(text):  # noqa: B007 (the last one)
        pass
    if found is None:
        return None
    if found.group(1) is not None:
        return found.group(1).rstrip(".,;:") or None
    i = found.end()
    depth = 1
    for j in range(i, min(len(text), i + MAX_MATH_ANSWER)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return None


def _is_text(answer: str) -> bool:
    """A reference in words ('\\text{Evelyn}', 'Tuesday', '(C)'), which math-verify would read as a product."""
    return "\\text" in answer or bool(_WORDS.fullmatch(_unwrap_text(answer)))


_DIGIT_SPACE = re.compile(r"(?<=\d)(?:\\[,!: ;]|\\thinspace|\s)\s*(?=\d{3}(?!\d))")


def _tidy(boxed: str) -> str:
    """A box as math-verify reads it: a thin space between digit groups dropped (1\\,000 and 1\\ 000 are 1000;
    it read 0), a degree sign as ^\\circ."""
    return _DIGIT_SPACE.sub("", boxed).replace("°", "^\\circ")


_WORDS = re.compile(r"[A-Za-z][A-Za-z\s.,'()-]*[A-Za-z.)]")


def canonical(expr, shown: str) -> str:
    import sympy

    words = _unwrap_text(shown)
    if _WORDS.fullmatch(words) and "\\" not in words:  # 'Evelyn', '(C)': math-verify reads them as products
        return normalise_text(words)
    try:
        if isinstance(expr, sympy.Eq) and isinstance(expr.lhs, sympy.Symbol):
            expr = expr.rhs
        if isinstance(expr, sympy.Basic):  # math-verify keeps the response's form: sqrt(12), 2**2 (evaluated here,
            expr = expr.doit()  # never by sympify: a \\text{} becomes a symbol of any name)
        if isinstance(expr, sympy.Expr) and expr.is_number:  # 25\\% is 1/4, 0.5 is 1/2
            expr = sympy.nsimplify(expr, rational=True)
        return str(expr)
    except Exception:
        return normalise_text(_unwrap_text(shown))


GRADERS: dict[str, type[Grader]] = {g.name: g for g in (ExactGrader, NumberGrader, ChoiceGrader, RegexGrader,
                                                        PythonGrader, MathGrader)}
DEFAULT_GRADER = ExactGrader.name


def grader(name: str, limits: CodeLimits | None = None) -> Grader:
    """The grader called `name` (KeyError if there is none)."""
    cls = GRADERS[name]
    return PythonGrader(limits) if cls is PythonGrader else cls()

