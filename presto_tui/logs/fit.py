"""Fit the predictive rule's epsilon-class model from traces (paper appendix E.7).

Examples are the scored decisions of recorded rounds: for node inputs every
expanded node (issued-but-unreachable ones are left out, as in E.7); for
decision inputs every (decision, state) pair that was scored.  Features are
those the rule can compute before generation (`classifier.FEATURES`); with
decision inputs a pair has no single path, so `accepts` is 1 for a state
reached by an accept and 0 for the root's.

Evaluation: 5-fold cross-validation with whole prompts (sessions) held out,
pooled out-of-fold accuracy and log loss against the constant baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from presto_tui.errors import InputError
from presto_tui.logs.reader import Trace
from presto_tui.runtime.core.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.core.mh import EPS_CLASSES
from presto_tui.runtime.prefetch.tree import RoundTree


class FitError(InputError):
    """Not enough or unsuitable data to fit; one line."""


@dataclass
class Examples:
    X: np.ndarray  # (n, features)
    y: np.ndarray  # class index into EPS_CLASSES
    groups: np.ndarray  # one id per session (prompt)
    features: tuple[str, ...]


def tree_examples(tree: RoundTree, features: tuple[str, ...]) -> list[tuple[list[float], int]]:
    out = []
    for pos, src, depth, accepts in tree.scored_nodes():
        f = node_features(tree.decisions[pos].cut, tree.cut_index(src), depth, accepts, tree.T)
        out.append(([f[n] for n in features], EPS_CLASSES.index(tree.scores[(pos, src)].eps_class)))
    return out


def collect(traces: list[Trace], features: tuple[str, ...]) -> Examples:
    X, y, g = [], [], []
    group = 0
    for t in traces:
        for sess in t.sessions:
            for rd in sess.rounds:
                for x, label in tree_examples(rd.tree, features):
                    X.append(x)
                    y.append(label)
                    g.append(group)
            group += 1
    if not X:
        raise FitError("the traces hold no scored decisions to learn from")
    return Examples(np.array(X, float), np.array(y), np.array(g), features)


def _model():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, max_iter=2000)  # lambda = 1 as in E.7


def _log_loss(P: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(np.log(np.clip(P[np.arange(len(y)), y], 1e-15, 1.0))))


def _proba(model, Xs: np.ndarray) -> np.ndarray:
    """Probabilities in EPS_CLASSES order, also when a fold lacked a class."""
    P = np.full((len(Xs), 3), 1e-15)
    P[:, model.classes_] = model.predict_proba(Xs)
    return P / P.sum(axis=1, keepdims=True)


def cross_validate(ex: Examples, folds: int = 5) -> dict | None:
    from sklearn.model_selection import GroupKFold

    n_groups = len(set(ex.groups.tolist()))
    if n_groups < 2:
        return None
    k = min(folds, n_groups)
    P = np.zeros((len(ex.y), 3))
    base = np.zeros((len(ex.y), 3))
    for train, test in GroupKFold(n_splits=k).split(ex.X, ex.y, ex.groups):
        mean, scale = _standardizer(ex.X[train])
        m = _model().fit((ex.X[train] - mean) / scale, ex.y[train])
        P[test] = _proba(m, (ex.X[test] - mean) / scale)
        freq = np.bincount(ex.y[train], minlength=3) / len(train)
        base[test] = np.clip(freq, 1e-15, 1)
    return {
        "folds": k,
        "grouped_by": "prompt (session)",
        "accuracy": float(np.mean(P.argmax(1) == ex.y)),
        "baseline_accuracy": float(np.mean(base.argmax(1) == ex.y)),
        "log_loss": _log_loss(P, ex.y),
        "baseline_log_loss": _log_loss(base, ex.y),
    }


def _standardizer(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def fit(traces: list[Trace], features: tuple[str, ...] = ("cut_fraction",)) -> CertaintyClassifier:
    ex = collect(traces, features)
    counts = np.bincount(ex.y, minlength=3)
    missing = [c for c, n in zip(EPS_CLASSES, counts) if n == 0]
    if missing:
        raise FitError(f"no examples of class '{missing[0]}' in {len(ex.y)} scored decisions; "
                       "record more sessions")
    mean, scale = _standardizer(ex.X)
    model = _model().fit((ex.X - mean) / scale, ex.y)
    cv = cross_validate(ex)
    return CertaintyClassifier(
        features=features,
        coef=tuple(tuple(float(v) for v in row) for row in model.coef_),
        intercept=tuple(float(v) for v in model.intercept_),
        mean=tuple(float(v) for v in mean), scale=tuple(float(v) for v in scale),
        meta={"examples": int(len(ex.y)), "class_counts": dict(zip(EPS_CLASSES, map(int, counts))),
              "sessions": int(len(set(ex.groups.tolist()))), "cross_validation": cv,
              "traces": [t.path.name for t in traces]},
    )
