"""The per-cause rule probe: can a shallow rule on the record tables and the alert line alone
(no metric read) name a cause with high precision?

One accuracy over all causes hides such shortcuts: a rule that decides one cause out of twelve
moves the overall accuracy of a multi-class probe by a few points. So each cause is probed on
its own (one against the rest) on :mod:`causaltrace.audit.records` features:

- candidates: decision trees of depth 1..3 and a random forest, all with balanced class
  weights, each read as a score (the probability of the cause) with a threshold;
- operating point, chosen on the training data only: inner stratified cross-validation gives
  every candidate out-of-fold scores there; the (candidate, threshold) with the highest
  precision subject to recall >= ``min_recall`` wins (ties: higher recall, then the simpler
  candidate); the candidate is then refitted on the whole training data;
- estimate: outer stratified k-fold (as many folds as the smaller class allows), repeated with
  ``repeats`` independent fold draws; the rule chosen on each training fold labels its held-out
  fold, and the held-out predictions of every repeat are pooled into out-of-fold precision and
  recall. With ~20 positives per cause one fold draw moves the precision by +-0.1 (a single draw
  flagged a cause at 10 of 11 that other draws put at 0.47-0.82), so a verdict read off one draw is
  a coin toss near the bar; the pooled rate averages that out. Its Wilson 95% interval is
  computed on one repeat's worth of counts (the pooled counts divided by ``repeats``): the
  repeats reuse the same episodes, so they add no independent evidence;
- rule: the same selection on all episodes, as readable text (a tree's positive leaves as
  conditions on named features; a forest's threshold and its most used features).

Verdict **shortcut** when the out-of-fold precision is at least ``min_precision`` and the recall
at least ``min_recall``. Every random draw (splits, trees, forests) comes from the numpy
Generator passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace.audit.records import fill_value
from causaltrace.audit.stats import wilson

DEPTHS = (1, 2, 3)
FOREST = 0  # the candidate "depth" that stands for the random forest


@dataclass(frozen=True)
class CauseRule:
    """The probe's reading of one cause (out-of-fold counts, the rule fitted on everything)."""

    cause: str
    n: int  # episodes with this cause among their true causes
    predicted: int  # episodes the out-of-fold rules named this cause
    hits: int  # ... of which have it
    folds: int
    rule: str
    verdict: str
    repeats: int = 1  # predicted and hits are summed over this many fold draws
    spread: tuple[float, ...] = ()  # each repeat's own out-of-fold precision (nan: none named)

    @property
    def precision(self) -> tuple[float, float, float]:
        """Pooled out-of-fold precision with its Wilson 95% interval (one repeat's counts)."""
        return _pooled(self.hits, self.predicted, self.repeats)

    @property
    def recall(self) -> tuple[float, float, float]:
        """Pooled out-of-fold recall with its Wilson 95% interval (one repeat's counts)."""
        return _pooled(self.hits, self.n * self.repeats, self.repeats)


def _pooled(hits: int, trials: int, repeats: int) -> tuple[float, float, float]:
    """The pooled rate with the interval of one repeat's worth of trials (module docstring)."""
    rate = hits / trials if trials else float("nan")
    _, low, high = wilson(hits / repeats, round(trials / repeats))
    return rate, low, high


@dataclass(frozen=True)
class RuleProbe:
    """Every cause's :class:`CauseRule`, with what the probe read."""

    rules: list[CauseRule]
    episodes: int
    features: int
    min_precision: float
    min_recall: float

    @property
    def shortcuts(self) -> list[CauseRule]:
        return [r for r in self.rules if r.verdict == "shortcut"]


@dataclass(frozen=True)
class _Chosen:
    depth: int  # 1..3: a tree; FOREST: the forest
    threshold: float
    precision: float
    recall: float


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def _model(depth: int, rng: np.random.Generator, trees: int):
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.ensemble import RandomForestClassifier

    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.tree import DecisionTreeClassifier

    if depth == FOREST:
        return RandomForestClassifier(
            n_estimators=trees, class_weight="balanced", random_state=_seed(rng), n_jobs=1
        )
    return DecisionTreeClassifier(max_depth=depth, class_weight="balanced", random_state=_seed(rng))


def _folds(y: np.ndarray, wanted: int) -> int:
    """As many folds as wanted, but no more than the smaller class has members (>= 2)."""
    return max(2, min(wanted, int(y.sum()), int((~y).sum())))


def _split(y: np.ndarray, folds: int, rng: np.random.Generator):
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.model_selection import StratifiedKFold

    splitter = StratifiedKFold(n_splits=_folds(y, folds), shuffle=True, random_state=_seed(rng))
    return list(splitter.split(np.zeros(len(y)), y))


def _score(model, X: np.ndarray) -> np.ndarray:
    proba = model.predict_proba(X)
    classes = list(model.classes_)
    return proba[:, classes.index(True)] if True in classes else np.zeros(len(X))


def best_threshold(
    score: np.ndarray, y: np.ndarray, min_recall: float
) -> tuple[float, float, float]:
    """(threshold, precision, recall) of ``score >= threshold`` with the highest precision
    subject to recall >= ``min_recall`` (ties: higher recall). Some threshold always qualifies
    (the lowest names every episode: recall 1)."""
    best = (-np.inf, -1.0, -1.0)
    positives = max(int(y.sum()), 1)
    for t in np.unique(score):
        named = score >= t
        hits = int((named & y).sum())
        precision, recall = hits / max(int(named.sum()), 1), hits / positives
        if recall + 1e-12 >= min_recall and (precision, recall) > (best[1], best[2]):
            best = (float(t), precision, recall)
    return best


def _candidates(
    X: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    *,
    min_recall: float,
    inner_folds: int,
    trees: int,
) -> list[_Chosen]:
    """Every candidate's best operating point on inner out-of-fold scores of (X, y), best
    first (highest precision, then recall; ties keep the simpler candidate first)."""
    found = []
    splits = _split(y, inner_folds, rng)
    for depth in (*DEPTHS, FOREST):
        score = np.zeros(len(y))
        for train, test in splits:
            model = _model(depth, rng, trees).fit(X[train], y[train])
            score[test] = _score(model, X[test])
        found.append(_Chosen(depth, *best_threshold(score, y, min_recall)))
    return sorted(found, key=lambda c: (-c.precision, -c.recall))  # stable: simpler first


def _choose(X: np.ndarray, y: np.ndarray, rng: np.random.Generator, **how):
    """The operating point chosen on (X, y) alone (module docstring), refitted on all of it."""
    best = _candidates(X, y, rng, **how)[0]
    return _model(best.depth, rng, how["trees"]).fit(X, y), best


def usable_features(X: pd.DataFrame, min_support: int) -> pd.DataFrame:
    """Features that differ from "nothing there" in at least ``min_support`` episodes and are not
    constant, one per group of identical columns (the shortest name kept)."""
    keep = []
    for col in X.columns:
        values = X[col].to_numpy()
        if (values != fill_value(col)).sum() >= min_support and np.ptp(values) > 0:
            keep.append(col)
    frame = X[sorted(keep, key=lambda c: (len(c), c))]
    frame = frame.loc[:, ~frame.T.duplicated()]
    return frame[sorted(frame.columns)]


def rule_probe(
    X: pd.DataFrame,
    truths: Sequence[Collection[str]],
    causes: Sequence[str],
    rng: np.random.Generator,
    *,
    folds: int = 5,
    inner_folds: int = 3,
    min_precision: float = 0.85,
    min_recall: float = 0.3,
    trees: int = 100,
    min_support: int = 3,
    repeats: int = 3,
) -> RuleProbe:
    """Probe every cause of ``causes`` (module docstring). ``truths``: each episode's true causes
    (a concurrent episode counts as a positive of each of them)."""
    X = usable_features(X, min_support)
    matrix = X.to_numpy(dtype=np.float64)
    rules = []
    for cause in causes:
        y = np.array([cause in t for t in truths], dtype=bool)
        n = int(y.sum())
        if n < 2 or len(y) - n < 2 or not X.shape[1]:
            rules.append(CauseRule(cause, n, 0, 0, 0, "", "not run (too few episodes)"))
            continue
        how = {"min_recall": min_recall, "inner_folds": inner_folds, "trees": trees}
        draws = [_out_of_fold(matrix, y, folds, rng, how) for _ in range(max(1, repeats))]
        rule = _final_rule(X, y, cause, rng, **how)
        predicted = sum(int(named.sum()) for named, _ in draws)
        hits = sum(int((named & y).sum()) for named, _ in draws)
        spread = tuple(
            float((named & y).sum() / named.sum()) if named.any() else float("nan")
            for named, _ in draws
        )
        precision = hits / predicted if predicted else 0.0
        recall = hits / (n * len(draws))
        shortcut = predicted and precision >= min_precision and recall >= min_recall
        rules.append(
            CauseRule(
                cause,
                n,
                predicted,
                hits,
                draws[0][1],
                rule,
                "shortcut" if shortcut else "no shortcut",
                len(draws),
                spread,
            )
        )
    return RuleProbe(rules, len(X), X.shape[1], min_precision, min_recall)


def _out_of_fold(
    matrix: np.ndarray, y: np.ndarray, folds: int, rng: np.random.Generator, how
) -> tuple[np.ndarray, int]:
    """One fold draw: which episodes the rule chosen on their training folds names, and the
    number of folds."""
    named = np.zeros(len(y), dtype=bool)
    splits = _split(y, folds, rng)
    for train, test in splits:
        model, chosen = _choose(matrix[train], y[train], rng, **how)
        named[test] = _score(model, matrix[test]) >= chosen.threshold
    return named, len(splits)


def _final_rule(X: pd.DataFrame, y: np.ndarray, cause: str, rng: np.random.Generator, **how):
    """The selection on all episodes as text; when the forest wins, the best tree's rule too
    (a readable approximation, with its inner cross-validated precision and recall)."""
    matrix = X.to_numpy(dtype=np.float64)
    found = _candidates(matrix, y, rng, **how)
    best = found[0]
    text = describe(_model(best.depth, rng, how["trees"]).fit(matrix, y), best, X, y, cause)
    if best.depth == FOREST:
        tree = next(c for c in found if c.depth != FOREST)
        model = _model(tree.depth, rng, how["trees"]).fit(matrix, y)
        text += (
            f"\nbest tree (depth {tree.depth}; inner cross-validation: precision "
            f"{tree.precision:.2f}, recall {tree.recall:.2f}):\n"
            + describe(model, tree, X, y, cause)
        )
    return text


def describe(model, chosen: _Chosen, X: pd.DataFrame, y: np.ndarray, cause: str) -> str:
    """The rule as text: a tree's leaves that name the cause, as conditions on the named
    features, with how many of the episodes each leaf holds have the cause; or the forest's
    threshold and its most used features."""
    names = [str(c) for c in X.columns]
    if chosen.depth == FOREST:
        order = np.argsort(-model.feature_importances_)[:5]
        used = ", ".join(f"`{names[i]}` ({model.feature_importances_[i]:.2f})" for i in order)
        return f"random forest: P({cause}) >= {chosen.threshold:.2f}; most used: {used}"
    tree = model.tree_
    leaves = model.apply(X.to_numpy(dtype=np.float64))
    score = _score(model, X.to_numpy(dtype=np.float64))
    lines = []
    for path, leaf in _paths(tree, names):
        here = leaves == leaf
        if not here.any() or score[here][0] < chosen.threshold:
            continue
        condition = " AND ".join(path) or "always"
        lines.append(f"IF {condition} THEN {cause} ({int(y[here].sum())} of {int(here.sum())})")
    return "\n".join(lines) or f"(no leaf reaches P({cause}) >= {chosen.threshold:.2f})"


def _paths(tree, names: Sequence[str], node: int = 0, path: tuple[str, ...] = ()):
    """Every leaf of a fitted sklearn tree with the conditions that lead to it."""
    left, right = tree.children_left[node], tree.children_right[node]
    if left == right:  # a leaf
        yield list(path), node
        return
    name, cut = names[tree.feature[node]], tree.threshold[node]
    yield from _paths(tree, names, left, (*path, f"{name} <= {cut:.3g}"))
    yield from _paths(tree, names, right, (*path, f"{name} > {cut:.3g}"))
