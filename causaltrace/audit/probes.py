"""Leakage and shortcut probes: cross-validated classifiers that predict the cause from
features of the visible files (:mod:`causaltrace.audit.features`).

- The leakage probe (a random forest) reads features that must carry no information about the
  cause; its out-of-fold accuracy is compared with chance, the majority-class rate. Verdict
  ``leak`` when the lower end of the accuracy's Wilson 95% interval is above chance.
- The shortcut probe (a depth-2 decision tree by default: at most 3 statistics) reads
  at-a-glance summaries of the tables; a high accuracy says the cause is visible without any
  diagnosis. Its rule is the tree fitted on all episodes, as text.

Both use stratified k-fold cross-validation (every episode predicted once, by a model that did
not see it) with ``random_state`` drawn from an explicit numpy Generator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causaltrace.audit.stats import wilson


@dataclass(frozen=True)
class ProbeResult:
    """Out-of-fold accuracy with its Wilson interval, against the majority-class rate."""

    name: str
    accuracy: float
    low: float
    high: float
    n: int
    chance: float
    folds: int
    n_features: int
    top_features: list[tuple[str, float]] = field(default_factory=list)
    rule: str | None = None

    @property
    def above_chance(self) -> bool:
        return self.n > 0 and self.low > self.chance

    @property
    def verdict(self) -> str:
        return "leak" if self.above_chance else "no leak detected"


def _folds(y: np.ndarray, wanted: int) -> int:
    """As many folds as wanted, but no more than the rarest class has members (>= 2)."""
    smallest = min(Counter(y.tolist()).values())
    return max(2, min(wanted, smallest))


def _cross_validatable(X: pd.DataFrame, y: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows a stratified cross-validation can hold out: those of classes with at least
    two members (a class seen once can be neither trained on and tested nor stratified)."""
    counts = Counter(y.tolist())
    keep = np.array([counts[v] >= 2 for v in y.tolist()], dtype=bool)
    return X.loc[keep] if not keep.all() else X, y[keep]


def _runnable(X: pd.DataFrame, y: np.ndarray) -> bool:
    return len(y) >= 4 and len(set(y.tolist())) >= 2 and X.shape[1] > 0


def _empty(name: str, y: np.ndarray) -> ProbeResult:
    chance = max(Counter(y.tolist()).values()) / len(y) if len(y) else float("nan")
    return ProbeResult(name, float("nan"), 0.0, 1.0, 0, chance, 0, 0)


def _cross_validate(model, X: pd.DataFrame, y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return cross_val_predict(model, X.to_numpy(), y, cv=splitter)


def _fit_and_score(model, X: pd.DataFrame, y: np.ndarray, folds: int, rng: np.random.Generator):
    """Out-of-fold accuracy (Wilson interval), n, chance and the folds used; then ``model`` is
    fitted on everything (for its feature importances or its rule)."""
    k = _folds(y, folds)
    pred = _cross_validate(model, X, y, k, _seed(rng))
    acc, lo, hi = wilson(int((pred == y).sum()), len(y))
    chance = max(Counter(y.tolist()).values()) / len(y)
    model.fit(X.to_numpy(), y)
    return acc, lo, hi, len(y), chance, k


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def leakage_probe(
    X: pd.DataFrame,
    y: Sequence[str],
    rng: np.random.Generator,
    *,
    folds: int = 5,
    trees: int = 200,
    name: str = "leakage",
) -> ProbeResult:
    """A random forest on ``X``; out-of-fold accuracy against chance (module docstring)."""
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.ensemble import RandomForestClassifier

    y = np.asarray(y)
    X, y = _cross_validatable(X, y)
    if not _runnable(X, y):
        return _empty(name, y)
    model = RandomForestClassifier(n_estimators=trees, random_state=_seed(rng), n_jobs=1)
    scores = _fit_and_score(model, X, y, folds, rng)
    order = np.argsort(-model.feature_importances_)[:8]
    top = [(str(X.columns[i]), float(model.feature_importances_[i])) for i in order]
    return ProbeResult(name, *scores, X.shape[1], top)


def shortcut_probe(
    X: pd.DataFrame,
    y: Sequence[str],
    rng: np.random.Generator,
    *,
    depth: int = 2,
    folds: int = 5,
    name: str = "shortcut",
) -> ProbeResult:
    """A depth-``depth`` decision tree on ``X``; out-of-fold accuracy and the fitted rule."""
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.tree import DecisionTreeClassifier, export_text

    y = np.asarray(y)
    X, y = _cross_validatable(X, y)
    if not _runnable(X, y):
        return _empty(name, y)
    model = DecisionTreeClassifier(max_depth=depth, random_state=_seed(rng))
    scores = _fit_and_score(model, X, y, folds, rng)
    used = np.flatnonzero(model.feature_importances_ > 0)
    top = sorted(
        ((str(X.columns[i]), float(model.feature_importances_[i])) for i in used),
        key=lambda kv: -kv[1],
    )
    rule = export_text(model, feature_names=[str(c) for c in X.columns], decimals=3)
    return ProbeResult(name, *scores, X.shape[1], top, rule)
