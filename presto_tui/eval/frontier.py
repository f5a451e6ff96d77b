"""`eval --frontier`: each method over a range of its budget, and which sampler wins at equal time.

A frontier spec lists entries `METHOD[@B1,B2,...]`, separated by `;` or spaces: METHOD is
a method of `--methods` (lowtemp, bon, smc, sps, powermh, powermh+stream, ...), and the
list the values of its budget, one point each: K (MH transitions) for an MH sampler with
or without a PreSTO rule, N samples for best-of-N, P particles for PowerSMC, M rollouts
per candidate for Scalable Power Sampling; low temperature is one point.  Without `@`
the entry is one point at the flags' value.  `default` is `DEFAULT_SPEC`.

Every point answers every prompt with the same seeds (eval's item seeds; with S seeds
per prompt the items are repeated S times, each copy an item of its own), the prompts in
turn and the points of a prompt one after another, on one engine, so that drift hits
every method alike.  Per point: the time per prompt (the engine's clock: wall time on a
real model, the cost model on the synthetic one) and the tokens generated per prompt, and
the quality:

- on a model whose every response can be enumerated (the synthetic engine with
  `--synthetic-vocab`), the total variation between the law of the answers, from the S
  seeds of each prompt, and pi_alpha computed exactly (`tv`, averaged over the prompts):
  the empirical law's distance less its bias read off a bootstrap (sessions resampled
  within each prompt), with a 95% basic bootstrap interval (`distance` says why), and the
  floor: the estimate S exact draws from pi_alpha would get, the level an exact sampler
  would sit at;
- on any other model, the answers' mean log-likelihood and confidence under p0 (eqs.
  21-22, over each answer up to and excluding EOS) with 95% normal intervals, and the
  accuracy with its 95% Wilson interval.

Then per quality measure the Pareto front of each method (its points that no other of its
points beats in both time and quality), the joint front of all points, and a sentence
that walks the joint front from fast to slow naming the method that holds each stretch.
At equal quality (the primary measure: tv, else loglik) the time each PreSTO method needs
against its sequential sampler, interpolated along their fronts (log time linear in the
quality between two points), and where every other method lands against both.

The cost the fronts are read at is one `Cost` axis (`--frontier-axis`): the time per prompt (the
default), the tokens decoded per prompt (what the papers report methods at: equal tokens) or the
engine steps per prompt (the sequential depth, whatever each step decodes).  Every point carries
all three; the fronts, sentences and equal-quality readings are those of the axis chosen (their
JSON fields `sequential_s`, `presto_s`, `time_s` are in its unit).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from presto_tui.api.params import MethodSpec, ParamError, describe, parse_method
from presto_tui.errors import InputError
from presto_tui.eval.tasks import Item
from presto_tui.testing import distance, exact_floor

DEFAULT_SPEC = "lowtemp; bon@2,4,8; smc@2,4,8; sps@2,4,8; powermh@2,4,8,16; powermh+stream@2,4,8,16"
FLAG = "--frontier"
GRAMMAR = "entries METHOD[@B1,B2,...] separated by ';' (METHOD as in --methods, B its budgets), or default"
MAX_POINTS = 200
Z95 = 1.959963984540054


# -- the cost axis -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Cost:
    """What a point's cost is read in: its field, and its words."""

    name: str  # time, tokens, steps: what --frontier-axis takes
    key: str  # the point's field
    words: str  # "time": "at equal time", "dominated at every time measured"
    less: str  # "less time": "needs 2x less time than"
    unit: str  # after a number: " s", " tokens", " steps"
    every: str  # "time": "dominated at every time measured"

    def fmt(self, x: float) -> str:
        return f"{x:.3g}{self.unit}" if self.name == "time" else f"{x:.0f}{self.unit}"


COSTS = {c.name: c for c in (
    Cost("time", "time_per_prompt_s", "time", "less time", " s", "time"),
    Cost("tokens", "tokens_per_prompt", "decoded tokens", "fewer decoded tokens", " tokens", "token count"),
    Cost("steps", "steps_per_prompt", "engine steps", "fewer engine steps", " steps", "step count"),
)}
TIME = COSTS["time"]


# -- the spec ----------------------------------------------------------------------------------

def budget_axis(method: MethodSpec) -> tuple[str, str] | None:
    """(the parameter a method's budget sets, its symbol): its method's axis (`Method.axis`), or None
    (low temperature: one point)."""
    axis = method.method.axis
    return None if axis is None else (axis.param, axis.symbol)


@dataclass(frozen=True)
class Point:
    """One point of the frontier: a method at one budget."""

    group: str  # the method as the spec names it: every budget of an entry shares it
    axis: str | None  # K, N, P or M (None: low temperature)
    budget: int | None
    method: MethodSpec  # label: `group@budget` (the group alone without a budget axis)

    @property
    def label(self) -> str:
        return self.method.label


_BUDGETS = re.compile(r"^[0-9]+(,[0-9]+)*$")


def parse_spec(text: str, base, *, budget_given: bool = True) -> list[Point]:
    """The points `text` names, on top of `base` (the command's sampler flags; `budget_given`: whether
    its budget is the command's -N, as `parse_method` reads it); InputError (one line) on anything it
    cannot read."""
    text = text.strip()
    if text.lower() == "default":
        text = DEFAULT_SPEC
    entries = [e for e in re.split(r"[;\s]+", text) if e]
    if not entries:
        raise InputError(f"{FLAG} needs at least one method: {GRAMMAR}")
    points: list[Point] = []
    groups: list[str] = []
    for entry in entries:
        spec, at, budgets = entry.partition("@")
        method = parse_method(spec, base, FLAG, budget_given=budget_given)
        group = method.label
        if group in groups:
            raise InputError(f"{FLAG}: {group} is listed twice; give its budgets in one list ({group}@B1,B2,...)")
        groups.append(group)
        axis = budget_axis(method)
        if not at:
            value = None if axis is None else getattr(method.params, axis[0])
            points.append(Point(group, None if axis is None else axis[1], value, method))
            continue
        if axis is None:
            raise InputError(f"{FLAG}: {entry}: {group} draws one sample and has no budget; write {group} alone")
        field, symbol = axis
        sets_axis = re.search(rf":({re.escape(symbol.lower())}|{field})=", spec.lower())
        if sets_axis or (not method.method.chain and re.search(r":[0-9]+(:|$)", spec)):  # a one-shot's :N is its budget
            raise InputError(f"{FLAG}: {entry}: {group} sets {symbol} already; give it once, after @")
        if not _BUDGETS.match(budgets):
            raise InputError(f"{FLAG}: {entry}: after @ come the values of {symbol}, whole numbers separated by "
                             f"commas (as in {group}@2,4,8)")
        values = [int(b) for b in budgets.split(",")]
        if len(set(values)) != len(values):
            raise InputError(f"{FLAG}: {entry}: a value of {symbol} is listed twice")
        for b in values:
            try:
                params = method.params.with_(**{field: b}).validate()
            except ParamError as e:
                raise InputError(f"{FLAG}: {entry}: {e.line}") from None
            points.append(Point(group, symbol, b, MethodSpec(f"{group}@{b}", params, (*method.given, field))))
        if len(points) > MAX_POINTS:
            raise InputError(f"{FLAG}: more than {MAX_POINTS} points")
    for i, p in enumerate(points):  # bon@4 and bestofn@4 are one point under two names
        same = next((q for q in points[:i] if q.method.params == p.method.params), None)
        if same is not None:
            raise InputError(f"{FLAG}: {p.label} and {same.label} are the same settings")
    return points


def replicas(items: Sequence[Item], seeds: int) -> list[Item]:
    """Each item `seeds` times, each copy an item of its own id (so of its own seed), copies in turn."""
    if seeds == 1:
        return list(items)
    return [Item(f"{it.id}#{s}", it.prompt, it.answer, it.grader) for it in items for s in range(seeds)]


# -- statistics --------------------------------------------------------------------------------

def mean_interval(xs: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """The mean of the finite values and its 95% normal interval (None where it has too few values)."""
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    if not vals:
        return None, None, None
    m = statistics.fmean(vals)
    if len(vals) < 2:
        return m, None, None
    half = Z95 * statistics.stdev(vals) / math.sqrt(len(vals))
    return m, m - half, m + half


# -- fronts ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measure:
    key: str  # the point's field
    name: str  # in words
    higher: bool  # higher is better


MEASURES = {
    "tv": Measure("tv", "total variation to pi_alpha", False),
    "loglik": Measure("loglik", "log-likelihood (eq. 21)", True),
    "confidence": Measure("confidence", "confidence (eq. 22)", True),
    "accuracy": Measure("accuracy", "accuracy", True),
    # with S seeds a prompt (--frontier-seeds), its S answers are k = S samples (presto_tui/eval/passk.py)
    "pass@k": Measure("pass@k", "pass@k (k: the seeds a prompt)", True),
    "maj@k": Measure("maj@k", "maj@k (k: the seeds a prompt)", True),
}
SHARES = ("accuracy", "pass@k", "maj@k")  # measures shown as percentages


def pareto(points: Sequence[tuple[float, float]], higher: bool) -> list[int]:
    """The indices of the (time, quality) points no other point dominates (as fast or faster and as good
    or better, and strictly one of them), by time."""
    sign = 1.0 if higher else -1.0
    out = []
    for i, (t, q) in enumerate(points):
        g = sign * q
        if not any((t2 <= t and sign * q2 >= g) and (t2 < t or sign * q2 > g)
                   for j, (t2, q2) in enumerate(points) if j != i):
            out.append(i)
    return sorted(out, key=lambda i: (points[i][0], -sign * points[i][1]))


def time_at(front: Sequence[tuple[float, float]], q: float, higher: bool) -> tuple[float | None, str]:
    """The time a method needs for quality q along its front ((time, quality) by time, quality improving),
    and how it was read: (t, 'exact') at a point, (t, 'interpolated') between two, (the fastest point's
    time, 'at most') where the fastest point is better already, (None, 'not reached') where no point is."""
    if not front:
        return None, "not reached"
    sign = 1.0 if higher else -1.0
    g = [sign * y for _, y in front]
    target = sign * q
    if target <= g[0]:
        return front[0][0], ("exact" if target == g[0] else "at most")
    if target > g[-1]:
        return None, "not reached"
    for (t0, _), (t1, _), g0, g1 in zip(front, front[1:], g, g[1:]):
        if g0 < target <= g1:
            if target == g1:
                return t1, "exact"
            w = (target - g0) / (g1 - g0)  # log time linear in the quality between two points
            lo, hi = math.log(max(t0, 1e-12)), math.log(max(t1, 1e-12))
            return math.exp((1 - w) * lo + w * hi), "interpolated"
    return None, "not reached"  # pragma: no cover (a front improves along its points)


def fmt_quality(measure: Measure, q: float) -> str:
    return f"{100 * q:.0f}%" if measure.key in SHARES else f"{q:.3f}"


def dominance(rows: Sequence[dict], measure: Measure, cost: Cost = TIME) -> tuple[list[str], str]:
    """The joint front of every point (labels, by cost) and the sentence that walks it: which method
    holds each stretch of cost, and which never reach it."""
    pts = [(r[cost.key], r[measure.key]) for r in rows]
    front = pareto(pts, measure.higher)
    labels = [rows[i]["label"] for i in front]
    if not front:
        return labels, f"No point has both a cost in {cost.words} and a {measure.name}."
    runs: list[list[int]] = []
    for i in front:
        if runs and rows[runs[-1][-1]]["group"] == rows[i]["group"]:
            runs[-1].append(i)
        else:
            runs.append([i])
    parts = []
    for run in runs:
        a, b = rows[run[0]], rows[run[-1]]
        if len(run) == 1:
            parts.append(f"{a['group']} at {cost.fmt(a[cost.key])} ({fmt_quality(measure, a[measure.key])})")
        else:
            parts.append(f"{a['group']} from {cost.fmt(a[cost.key])} to {cost.fmt(b[cost.key])}"
                         f" ({fmt_quality(measure, a[measure.key])} to {fmt_quality(measure, b[measure.key])})")
    on = {rows[i]["group"] for i in front}
    off = [g for g in dict.fromkeys(r["group"] for r in rows) if g not in on]
    sentence = (f"{'Fastest' if cost is TIME else 'Cheapest'} to best on the joint front of {measure.name} against "
                f"{cost.words}: " + "; then ".join(parts) + ".")
    if off:
        sentence += f" {_and(off)} {'is' if len(off) == 1 else 'are'} dominated at every {cost.every} measured."
    return labels, sentence


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def method_fronts(rows: Sequence[dict], measure: Measure, cost: Cost = TIME) -> dict[str, list[int]]:
    """Per method (group), the indices into `rows` of its own front, by cost."""
    out: dict[str, list[int]] = {}
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [i for i, r in enumerate(rows) if r["group"] == group and _has(r, measure, cost)]
        front = pareto([(rows[i][cost.key], rows[i][measure.key]) for i in mine], measure.higher)
        out[group] = [mine[k] for k in front]
    return out


def _has(r: dict, measure: Measure, cost: Cost = TIME) -> bool:
    return r.get(cost.key) is not None and r.get(measure.key) is not None


# -- equal quality -----------------------------------------------------------------------------

def pairs(points: Sequence[Point]) -> list[tuple[str, str]]:
    """(sequential group, PreSTO group) of the same MH sampler and parameters but the rule, both listed."""
    firsts: dict[tuple, str] = {}
    for p in points:
        if p.method.sampler.chain and not p.method.presto:
            firsts.setdefault(_chain_key(p), p.group)
    out = []
    for p in points:
        if p.method.presto and _chain_key(p) in firsts and (firsts[_chain_key(p)], p.group) not in out:
            out.append((firsts[_chain_key(p)], p.group))
    return out


def _chain_key(p: Point) -> tuple:
    """What a sequential sampler and its PreSTO twin share: every parameter but the rule's and K."""
    same = p.method.params.with_(prefetch="none", inputs="decision", budget=1, steps=1).to_dict()
    return tuple(sorted((k, repr(v)) for k, v in same.items()))


def equal_quality(rows: Sequence[dict], points: Sequence[Point], measure: Measure,
                  cost: Cost = TIME) -> tuple[list[dict], list[dict]]:
    """The speedup of each PreSTO method over its sequential sampler at the qualities the sequential one
    reaches, and where every other method's front lands against both (in the cost's unit)."""
    fronts = method_fronts(rows, measure, cost)

    def curve(group: str) -> list[tuple[float, float]]:
        return [(rows[i][cost.key], rows[i][measure.key]) for i in fronts.get(group, [])]

    speedups = []
    chain_groups: list[str] = []
    for seq, presto in pairs(points):
        chain_groups += [g for g in (seq, presto) if g not in chain_groups]
        matched = []
        for i in fronts.get(seq, []):
            t_seq, q = rows[i][cost.key], rows[i][measure.key]
            t, how = time_at(curve(presto), q, measure.higher)
            matched.append({"quality": q, "at": rows[i]["label"], "sequential_s": t_seq, "presto_s": t, "how": how,
                            "speedup": None if t is None or t <= 0 else t_seq / t})
        exact = [m["speedup"] for m in matched if m["how"] in ("exact", "interpolated") and m["speedup"] is not None]
        speedups.append({"sequential": seq, "presto": presto, "measure": measure.key, "matched": matched,
                         "median": statistics.median(exact) if exact else None,
                         "low": min(exact) if exact else None, "high": max(exact) if exact else None})
    landing = []
    for group in dict.fromkeys(r["group"] for r in rows):
        if group in chain_groups or not chain_groups:
            continue
        for i in fronts.get(group, []):
            r = rows[i]
            against = {}
            for other in chain_groups:
                t, how = time_at(curve(other), r[measure.key], measure.higher)
                against[other] = {"time_s": t, "how": how,
                                  "ratio": None if t is None or not r[cost.key] else t / r[cost.key]}
            landing.append({"group": group, "sampler": r["sampler"], "label": r["label"], "quality": r[measure.key],
                            "time_s": r[cost.key], "against": against})
    return speedups, landing


def speedup_sentence(s: dict, measure: Measure, cost: Cost = TIME) -> str:
    if s["median"] is None:
        return (f"{s['presto']} against {s['sequential']}: no quality of {measure.name} that {s['sequential']} "
                f"reaches lies on {s['presto']}'s front, so no speedup is read off.")
    n = sum(m["how"] in ("exact", "interpolated") and m["speedup"] is not None for m in s["matched"])
    spread = "" if n == 1 else f" (median of {n} matched levels, {s['low']:.2f}x to {s['high']:.2f}x)"
    return (f"At equal {measure.name}, {s['presto']} needs {s['median']:.2f}x {cost.less} than "
            f"{s['sequential']}{spread}.")


def landing_sentence(rows: Sequence[dict], measure: Measure, sampler: str, cost: Cost = TIME) -> str | None:
    """Where a sampler's front lands against the MH samplers."""
    mine = [r for r in rows if r["sampler"] == sampler]
    if not mine:
        return None
    group = _and(list(dict.fromkeys(r["group"] for r in mine)))
    parts = []
    for r in mine:
        bits = []
        for other, a in r["against"].items():
            if a["how"] == "not reached":
                bits.append(f"{other} does not reach it")
            elif a["how"] == "at most":
                bits.append(f"{other}'s {'fastest' if cost is TIME else 'cheapest'} point ({cost.fmt(a['time_s'])}) "
                            "is already as good")
            else:
                bits.append(f"{other} needs {cost.fmt(a['time_s'])} ({a['ratio']:.2f}x)")
        parts.append(f"{r['label']} reaches {fmt_quality(measure, r['quality'])} in {cost.fmt(r['time_s'])}"
                     + (f": {', '.join(bits)}" if bits else ""))
    return f"Where {group} lands ({measure.name}): " + "; ".join(parts) + "."


# -- the points' rows ------------------------------------------------------------------------

def settings(point: Point) -> str:
    """Its settings in words: its method's, then an MH chain's K and blocks (as `run`'s header says them)."""
    p = point.method.params
    blocks = f", B={p.block}" if p.method.chain and p.block != p.max_new_tokens else ""
    return describe(p) + ("" if point.axis is None or point.axis in ("N", "P", "M") else f", K={point.budget}") + blocks


def point_rows(ev, points: Sequence[Point], seeds: int, laws: Sequence | None, seed: int) -> list[dict]:
    """Per point, its cost and quality over the sessions that finished (`ev`: eval's Evaluation over the
    items repeated `seeds` times; `laws`: per original item its exact `ResponseLaw`, or None)."""
    from presto_tui.logs.paired import accuracy

    floors: dict[tuple[int, int], float] = {}  # (item, S): an exact sampler's distance with S draws

    rows = []
    for j, p in enumerate(points):
        outs = ev.finished(j)
        done = [o for o in outs if o.status == "done"]
        right = sum(1 for o in done if o.verdict is not None and o.verdict.correct)
        acc = accuracy(right, len(done))
        loglik = mean_interval([o.summary.answer_loglik for o in done])
        conf = mean_interval([o.summary.answer_confidence for o in done])
        row = {"label": p.label, "group": p.group, "sampler": p.method.params.sampler, "axis": p.axis,
               "budget": p.budget, "settings": settings(p),
               "params": p.method.params.to_dict(), "sessions": len(outs), "done": len(done),
               "failed": len(outs) - len(done),
               "time_per_prompt_s": statistics.fmean([o.time_s for o in done]) if done else None,
               "tokens_per_prompt": statistics.fmean([float(o.summary.tokens_generated) for o in done])
               if done else None,
               "steps_per_prompt": statistics.fmean([float(o.summary.engine_steps) for o in done]) if done else None,
               "loglik": loglik[0], "loglik_low": loglik[1], "loglik_high": loglik[2],
               "confidence": conf[0], "confidence_low": conf[1], "confidence_high": conf[2],
               "correct": right, "graded": len(done), "accuracy": acc.rate, "accuracy_low": acc.low,
               "accuracy_high": acc.high}
        if seeds > 1:
            row.update(_samples(ev, done, seeds))
        if laws is not None:
            counts = [np.zeros(len(law.probs)) for law in laws]
            foreign = 0
            for o in done:
                k = o.item // seeds
                at = laws[k].index(o.summary.tokens)
                if at is None:
                    foreign += 1
                else:
                    counts[k][at] += 1
            used = [k for k, c in enumerate(counts) if c.sum() > 0]
            d, floor = None, None
            if used:
                # the replicates' randomness is keyed by the answers themselves: the same answers (a sampler
                # and PreSTO with decision inputs, at one K) get the same estimate and interval
                d = distance([(counts[k], laws[k].probs) for k in used], _keyed(seed, [counts[k] for k in used]))
                for k in used:
                    S = int(counts[k].sum())
                    if (k, S) not in floors:
                        floors[(k, S)] = exact_floor(laws[k].probs, S, _keyed(seed, [laws[k].probs, np.array([S])]))
                floor = statistics.fmean(floors[(k, int(counts[k].sum()))] for k in used)
            est = {} if d is None else {"tv": d.tv, "tv_low": d.low, "tv_high": d.high, "tv_plugin": d.plugin}
            row.update({k: est.get(k) for k in ("tv", "tv_low", "tv_high", "tv_plugin")}, tv_floor=floor,
                       prompts=len(used), not_responses=foreign)
        rows.append(row)
    return rows


def _samples(ev, done, seeds: int) -> dict:
    """pass@k and maj@k of a point, k = 1, 2, 4, ..., S: a prompt's S seeds are its samples."""
    from presto_tui.eval.passk import budgets, estimates
    from presto_tui.eval.report import chain_samples

    graders: dict = {}
    per_prompt: dict[int, list] = {}
    for o in sorted(done, key=lambda o: o.item):  # a prompt's copies in seed order
        per_prompt.setdefault(o.item // seeds, []).append(o)
    per_item = [chain_samples(ev, os[0], graders, [(o.summary.text, o.grade is not None and o.grade.correct)
                                                   for o in os]) for os in per_prompt.values()]
    est = estimates(per_item, budgets(seeds))
    top = str(seeds)
    return {"pass@k": est["pass"].get(top), "maj@k": est["maj"].get(top), "pass_at_k": est["pass"],
            "maj_at_k": est["maj"]}


def analyse(rows: list[dict], points: Sequence[Point], measures: Sequence[str], cost: Cost = TIME) -> dict:
    """The fronts, the joint front's sentence per measure, and the reading at equal quality of the
    first (primary) measure, all against `cost`."""
    out: dict = {"measures": list(measures), "primary": measures[0], "axis": cost.name, "fronts": {},
                 "joint_front": {}, "dominance": {}}
    for key in measures:
        m = MEASURES[key]
        have = [r for r in rows if _has(r, m, cost)]
        fronts = method_fronts(have, m, cost)
        out["fronts"][key] = {g: [have[i]["label"] for i in idx] for g, idx in fronts.items()}
        out["joint_front"][key], out["dominance"][key] = dominance(have, m, cost)
    primary = MEASURES[measures[0]]
    have = [r for r in rows if _has(r, primary, cost)]
    out["speedups"], out["landing"] = equal_quality(have, points, primary, cost)
    out["summary"] = [out["dominance"][primary.key], *(speedup_sentence(s, primary, cost) for s in out["speedups"])]
    for sampler in dict.fromkeys(r["sampler"] for r in out["landing"]):  # every method beside the MH pairs
        sentence = landing_sentence(out["landing"], primary, sampler, cost)
        if sentence is not None:
            out["summary"].append(sentence)
    return out


def _keyed(seed: int, arrays: Sequence[np.ndarray]) -> np.random.Generator:
    """A generator seeded by `seed` and the bytes of `arrays` (so equal inputs draw equal replicates)."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=float).tobytes())
    return np.random.default_rng([seed, *np.frombuffer(h.digest(), dtype=np.uint32).tolist()])
