"""The learned probe: does a learner trained on many episodes name causes without a metric?

A policy trained with RL is a learner, not a depth-2 rule. The rule probe
(:mod:`causaltrace.audit.rules`) trains and tests within one split; an outside review trained a
random forest (500 trees) on the agent-visible non-metric features of the pooled committed ads
splits and tested it on a fresh split: cause accuracy 0.430 [0.371, 0.491] against a majority
rate of 0.117, and TARGETING_EXPANSION named at precision 0.85-0.86, recall 0.65-0.69. This
probe measures that, for any domain:

- features per episode, in five sets: **non-metric** (the record tables' features of
  :mod:`~causaltrace.audit.records` and the edit attributes of
  :mod:`~causaltrace.audit.attributes`: what an edit targets, its size, its timing against the
  alert window, where it appears in the table; the alert lines' words), **change log** (the
  record tables with a time column alone, nothing the alert names), **metrics**
  (:func:`~causaltrace.audit.features.summary_features`: every dated table's numeric columns,
  after against before the alert onset), **everything** (non-metric and metrics) and the
  **alert line** alone (its words: the page's own prior over causes, which no change log can
  remove; what non-metric adds beyond it is what the tables tell). Never a stored size or
  anything else the agent's tools do not show;
- a random forest, multi-class (the label's cause), trained on the training episodes (the
  pooled committed splits of a domain) and tested on a held-out split (a fresh split of the
  domain's prior, with a seed nobody tuned on). Without a held-out split: stratified k-fold
  cross-validation over the training episodes (folds drawn as the rule probe draws them), which
  shares the training splits' quirks and so is optimistic for the question asked;
- cause accuracy: the forest's answer is one of the episode's true causes (a concurrent episode
  has two), with its Wilson 95% interval, against the majority rate (the accuracy of always
  answering the cause most held-out episodes have);
- per cause, one against the rest, two readings: **top** (the forest's answer is the cause) and
  **scored** (the forest's probability of the cause at least a threshold, chosen on the training
  episodes' out-of-bag probabilities as the rule probe chooses its operating point: the highest
  precision at recall >= the floor). Precision and recall with Wilson 95% intervals; verdict
  **shortcut** when either reading has precision >= ``min_precision`` and recall >=
  ``min_recall`` (the rule probe's bar), **near the bar** when neither does but the bar is inside
  one's precision interval at a recall over the floor;
- the features that decide (non-metric set): permutation importance on the held-out episodes,
  the rise of each cause's Brier score (one against the rest) when one feature's values are
  shuffled among them, over ``repeats`` shuffles. Candidates (the forest's most used features and, per cause, the
  features that rank its episodes best on the training data) are permuted; one prediction per
  shuffle serves every cause.

Every random draw (forests, folds, shuffles) comes from the numpy Generator passed in.
Limits: features that carry the same information share their importance (shuffling one leaves
the others), so a deciding attribute may show as several features each with a modest rise of the score; a
cause can be decided by something these features do not encode (a formula over several
tables), which this probe cannot find.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from causaltrace.audit.attributes import PAIR_LEVELS, attribute_features, first_alert_features
from causaltrace.audit.features import summary_features
from causaltrace.audit.records import (
    alert_features,
    alert_match_features,
    fill_value,
    read_records,
    record_frame,
    table_features,
)
from causaltrace.audit.rules import best_threshold, usable_features
from causaltrace.audit.stats import wilson

NON_METRIC, CHANGE_LOG, METRICS, EVERYTHING = "non-metric", "change log", "metrics", "everything"
ALERT_LINE = "alert line"
# The alert line alone comes last, so that adding it left the other sets' draws as they were.
SETS = (NON_METRIC, CHANGE_LOG, METRICS, EVERYTHING, ALERT_LINE)
SET_TITLES = {
    NON_METRIC: "non-metric (record tables, edit attributes, alert lines)",
    CHANGE_LOG: "change log alone (record tables with a time column)",
    METRICS: "metrics alone (after/before changes of the dated tables)",
    EVERYTHING: "everything (non-metric and metrics)",
    ALERT_LINE: "alert line alone (the page's words: what non-metric adds beyond it is the tables')",
}


@dataclass(frozen=True)
class ProbeEpisode:
    """One episode as the probe reads it: its features per set (:data:`SETS` but everything,
    which joins two of them), the label's cause and every true cause."""

    features: Mapping[str, Mapping[str, float]]
    cause: str
    truths: frozenset[str]


def episode_features(
    tables: Mapping[str, pd.DataFrame],
    prompt: str,
    record_tables: Sequence[str],
    alert_day: np.datetime64,
    pair_levels: int = PAIR_LEVELS,
) -> dict[str, dict[str, float]]:
    """An episode's non-metric, change-log and metric features (module docstring)."""
    episode = read_records(tables, prompt, record_tables)
    alert_line = alert_features(episode) | first_alert_features(episode)
    non_metric = dict(alert_line)
    logs: dict[str, float] = {}
    for table in episode.tables.values():
        own = table_features(table, episode) | attribute_features(table, episode, pair_levels)
        non_metric |= own | alert_match_features(table, set(episode.words))
        if table.times is not None:
            logs |= own
    return {
        NON_METRIC: non_metric,
        CHANGE_LOG: logs,
        METRICS: summary_features(tables, alert_day),
        ALERT_LINE: alert_line,
    }


@dataclass(frozen=True)
class Reading:
    """Held-out episodes a reading named, how many of them have the cause, and how many have it."""

    named: int
    hits: int
    n: int

    @property
    def precision(self) -> tuple[float, float, float]:
        return wilson(self.hits, self.named)

    @property
    def recall(self) -> tuple[float, float, float]:
        return wilson(self.hits, self.n)

    def meets(self, min_precision: float, min_recall: float) -> bool:
        """Precision and recall at least the bar (as the rule probe compares them)."""
        return self._floor(min_recall) and self.hits / self.named >= min_precision

    def near(self, min_precision: float, min_recall: float) -> bool:
        """The bar inside the precision's Wilson interval, at a recall over the floor."""
        return self._floor(min_recall) and self.precision[2] >= min_precision

    def _floor(self, min_recall: float) -> bool:
        return bool(self.named) and bool(self.n) and self.hits / self.n >= min_recall

    def __add__(self, other: Reading) -> Reading:
        return Reading(self.named + other.named, self.hits + other.hits, self.n + other.n)


@dataclass(frozen=True)
class Importance:
    """A feature's mean rise of a cause's Brier score when shuffled, and its sd over the
    shuffles."""

    feature: str
    rise: float
    sd: float


@dataclass(frozen=True)
class CauseResult:
    """One cause, one against the rest, on the held-out episodes (module docstring)."""

    cause: str
    n: int  # held-out episodes with the cause among their true causes
    top: Reading  # the forest's answer is the cause
    scored: Reading  # P(cause) >= the operating point chosen on the training episodes
    verdict: str
    deciding: tuple[Importance, ...] = ()


@dataclass(frozen=True)
class SetResult:
    """One feature set: cause accuracy on the held-out episodes and the per-cause readings."""

    name: str
    features: int
    hits: int
    n: int
    causes: tuple[CauseResult, ...] = ()

    @property
    def accuracy(self) -> tuple[float, float, float]:
        return wilson(self.hits, self.n)


@dataclass(frozen=True)
class LearnedProbe:
    """Every set's result, with how the probe was trained and tested."""

    mode: str  # "held-out" or "cross-validation"
    folds: int  # cross-validation folds (0: a held-out split)
    train: int  # training episodes (cross-validation: all pooled episodes)
    test: int  # episodes the accuracy is read on
    majority: str
    majority_rate: float
    sets: tuple[SetResult, ...]
    min_precision: float
    min_recall: float
    trees: int

    def result(self, name: str) -> SetResult:
        return next(s for s in self.sets if s.name == name)

    @property
    def shortcuts(self) -> list[CauseResult]:
        """The causes the non-metric features decide."""
        return [c for c in self.result(NON_METRIC).causes if c.verdict == "shortcut"]


def majority_rate(truths: Sequence[Collection[str]]) -> tuple[str, float]:
    """The cause most episodes have among their true causes, and its share: the accuracy of
    always answering it (ties: the first in sorted order)."""
    counts: dict[str, int] = {}
    for causes in truths:
        for cause in causes:
            counts[cause] = counts.get(cause, 0) + 1
    if not counts:
        return "", float("nan")
    best = min(counts, key=lambda c: (-counts[c], c))
    return best, counts[best] / len(truths)


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def _forest(trees: int, rng: np.random.Generator):
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(
        n_estimators=trees, oob_score=True, random_state=_seed(rng), n_jobs=1
    )


def _frame(rows: Sequence[Mapping[str, float]], columns: pd.Index | None = None) -> pd.DataFrame:
    """Feature dicts as a matrix; on ``columns`` when given (a test set read like its training
    set: a feature it lacks is "nothing there", one the training set lacks is dropped)."""
    frame = record_frame(rows) if rows and any(rows) else pd.DataFrame(index=range(len(rows)))
    if columns is None:
        return frame
    frame = frame.reindex(columns=columns)
    return frame.fillna({c: fill_value(c) for c in columns}).astype(np.float64)


def _set_rows(episodes: Sequence[ProbeEpisode], name: str) -> list[dict[str, float]]:
    if name == EVERYTHING:
        return [{**e.features[NON_METRIC], **e.features[METRICS]} for e in episodes]
    return [dict(e.features[name]) for e in episodes]


@dataclass(frozen=True)
class _Fold:
    """One fit: the training and test rows (indices into the episodes) and their matrices."""

    train: np.ndarray
    test: np.ndarray


@dataclass(frozen=True)
class _Fitted:
    classes: list[str]  # the forest's classes, the columns of proba
    proba: np.ndarray  # test rows x classes
    thresholds: dict[str, float]
    importance: dict[str, list[tuple[str, np.ndarray]]]  # cause -> (feature, rises per shuffle)


def _folds(
    episodes: Sequence[ProbeEpisode], n_train: int, folds: int, rng: np.random.Generator
) -> list[_Fold]:
    """The held-out split (the episodes after the first ``n_train``) or stratified folds of the
    pooled training episodes, drawn from ``rng``."""
    if n_train < len(episodes):
        return [_Fold(np.arange(n_train), np.arange(n_train, len(episodes)))]
    # lazy: scikit-learn takes ~1 s to import; only the probes use it
    from sklearn.model_selection import KFold, StratifiedKFold

    y = np.array([e.cause for e in episodes])
    largest = int(np.unique(y, return_counts=True)[1].max())
    # Stratified folds need a cause with at least as many episodes as folds (scikit-learn
    # refuses otherwise); with every cause once (a dozen episodes audited), plain folds.
    k = max(2, min(folds, len(y) // 2, largest))
    if largest < 2:
        splitter = KFold(n_splits=min(folds, len(y)), shuffle=True, random_state=_seed(rng))
    else:
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=_seed(rng))
    with warnings.catch_warnings():  # a cause with fewer episodes than folds: stratified anyway
        warnings.simplefilter("ignore", UserWarning)
        return [_Fold(a, b) for a, b in splitter.split(np.zeros(len(y)), y)]


def _candidates(
    model, X: np.ndarray, truths: Sequence[frozenset[str]], causes: Sequence[str], how: Mapping
) -> np.ndarray:
    """Features worth shuffling: the forest's most used ones, and per cause those whose values
    rank its training episodes best (|AUC - 0.5|), computed from ranks for every feature at once."""
    used = np.argsort(-model.feature_importances_, kind="stable")[: how["candidates"]]
    picked = [used[model.feature_importances_[used] > 0]]
    ranks = rankdata(X, axis=0)
    for cause in causes:
        y = np.array([cause in t for t in truths], dtype=bool)
        n1, n0 = int(y.sum()), int((~y).sum())
        if not n1 or not n0:
            continue
        auc = (ranks[y].sum(axis=0) - n1 * (n1 + 1) / 2) / (n1 * n0)
        picked.append(np.argsort(-np.abs(auc - 0.5), kind="stable")[: how["per_cause"]])
    return np.unique(np.concatenate(picked)) if picked else np.zeros(0, dtype=int)


def _brier(y: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Per column of ``score`` (a cause's probability), the Brier score of one against the rest."""
    return ((score - y) ** 2).mean(axis=0)


IMPORTANCE_BATCH_CELLS = 20_000_000  # shuffled matrix cells scored per forest call (160 MB)


def _importance(
    model,
    X_test: np.ndarray,
    test_truths: Sequence[frozenset[str]],
    candidates: np.ndarray,
    names: Sequence[str],
    rng: np.random.Generator,
    repeats: int,
) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Per cause of the model with held-out episodes: per candidate feature, the rise of its
    Brier score over ``repeats`` shuffles of that feature's column. The Brier score rather than
    a ranking score: a feature that shares its information with others moves the probabilities
    when shuffled without reordering the episodes, and a ranking score would read 0 for it."""
    classes = [str(c) for c in model.classes_]
    y = np.array([[c in t for c in classes] for t in test_truths], dtype=np.float64)
    before = _brier(y, model.predict_proba(X_test))
    n = len(X_test)
    # Every (candidate, shuffle) in order, the permutations drawn as one loop would draw them;
    # the shuffled copies are scored in batches: one forest call per batch, not per shuffle
    # (a call walks every tree in Python, which dominated the probe's time on small splits).
    jobs = [(k, r, j, rng.permutation(n)) for k, j in enumerate(candidates) for r in range(repeats)]
    per_batch = max(1, IMPORTANCE_BATCH_CELLS // max(n * X_test.shape[1], 1))
    rises = np.zeros((len(candidates), repeats, len(classes)))
    for start in range(0, len(jobs), per_batch):
        batch = jobs[start : start + per_batch]
        stacked = np.tile(X_test, (len(batch), 1))
        for b, (_, _, j, order) in enumerate(batch):
            stacked[b * n : (b + 1) * n, j] = X_test[order, j]
        proba = model.predict_proba(stacked).reshape(len(batch), n, -1)
        for b, (k, r, _, _) in enumerate(batch):
            rises[k, r] = _brier(y, proba[b]) - before
    return {
        c: [(names[j], rises[k, :, i]) for k, j in enumerate(candidates)]
        for i, c in enumerate(classes)
        if y[:, i].any()
    }


def _fit(
    X: np.ndarray,
    episodes: Sequence[ProbeEpisode],
    fold: _Fold,
    names: Sequence[str],
    rng: np.random.Generator,
    how: Mapping,
    explain: bool,
) -> _Fitted:
    """Fit on the fold's training rows; probabilities, thresholds (from the out-of-bag
    probabilities of the training rows) and, when ``explain``, permutation importance."""
    y = np.array([episodes[i].cause for i in fold.train])
    model = _forest(how["trees"], rng)
    with warnings.catch_warnings():  # few trees: some rows are never out of bag (NaN below)
        warnings.simplefilter("ignore", UserWarning)
        model.fit(X[fold.train], y)
    classes = [str(c) for c in model.classes_]
    oob = np.asarray(model.oob_decision_function_)
    seen = np.isfinite(oob).all(axis=1)
    train_truths = [episodes[i].truths for i in fold.train]
    thresholds = {}
    for k, cause in enumerate(classes):
        positive = np.array([cause in t for t in train_truths], dtype=bool)[seen]
        if positive.any():
            thresholds[cause] = best_threshold(oob[seen, k], positive, how["min_recall"])[0]
    importance: dict[str, list[tuple[str, np.ndarray]]] = {}
    if explain and len(names):
        candidates = _candidates(model, X[fold.train], train_truths, classes, how)
        test_truths = [episodes[i].truths for i in fold.test]
        importance = _importance(
            model, X[fold.test], test_truths, candidates, names, rng, how["repeats"]
        )
    return _Fitted(classes, model.predict_proba(X[fold.test]), thresholds, importance)


def _deciding(
    parts: Sequence[tuple[int, list[tuple[str, np.ndarray]]]], top: int
) -> tuple[Importance, ...]:
    """Each feature's rise averaged over the folds (weighted by their held-out episodes; a fold
    that did not shuffle it counts 0), the ``top`` largest positive ones."""
    total = sum(size for size, _ in parts)
    rises: dict[str, float] = {}
    spread: dict[str, float] = {}
    for size, found in parts:
        for name, values in found:
            rises[name] = rises.get(name, 0.0) + size * float(values.mean()) / total
            spread[name] = spread.get(name, 0.0) + size * float(values.std()) / total
    order = sorted((d, n) for n, d in rises.items() if d > 0)[::-1]
    return tuple(Importance(n, d, spread[n]) for d, n in order[:top])


def _probe_set(
    name: str,
    episodes: Sequence[ProbeEpisode],
    folds: Sequence[_Fold],
    causes: Sequence[str],
    rng: np.random.Generator,
    how: Mapping,
) -> SetResult:
    n_test = sum(len(f.test) for f in folds)
    rows = _set_rows(episodes, name)
    train_rows = sorted({int(i) for f in folds for i in f.train})
    X = usable_features(_frame([rows[i] for i in train_rows]), how["min_support"])
    if not X.shape[1]:
        return SetResult(name, 0, 0, 0)
    names = [str(c) for c in X.columns]
    matrix = _frame(rows, X.columns).to_numpy(dtype=np.float64)
    explain = name == NON_METRIC
    hits = 0
    readings = {c: (Reading(0, 0, 0), Reading(0, 0, 0)) for c in causes}
    parts: dict[str, list[tuple[int, list[tuple[str, np.ndarray]]]]] = {c: [] for c in causes}
    for fold in folds:
        fitted = _fit(matrix, episodes, fold, names, rng, how, explain)
        classes = fitted.classes
        answer = np.array(classes, dtype=object)[np.argmax(fitted.proba, axis=1)]
        truths = [episodes[i].truths for i in fold.test]
        hits += sum(a in t for a, t in zip(answer, truths))
        for cause in causes:
            y = np.array([cause in t for t in truths], dtype=bool)
            top = answer == cause
            if cause in fitted.thresholds:
                scored = fitted.proba[:, classes.index(cause)] >= fitted.thresholds[cause]
            else:
                scored = np.zeros(len(y), dtype=bool)
            a, b = readings[cause]
            readings[cause] = (a + _reading(top, y), b + _reading(scored, y))
            if cause in fitted.importance:
                parts[cause].append((len(fold.test), fitted.importance[cause]))
    results = []
    for cause in causes:
        top, scored = readings[cause]
        if not top.n:
            continue
        results.append(
            CauseResult(
                cause,
                top.n,
                top,
                scored,
                _verdict(top, scored, how),
                _deciding(parts[cause], how["top"]) if parts[cause] else (),
            )
        )
    return SetResult(name, len(names), int(hits), n_test, tuple(results))


def _reading(named: np.ndarray, y: np.ndarray) -> Reading:
    return Reading(int(named.sum()), int((named & y).sum()), int(y.sum()))


def _verdict(top: Reading, scored: Reading, how: Mapping) -> str:
    bar = (how["min_precision"], how["min_recall"])
    if top.meets(*bar) or scored.meets(*bar):
        return "shortcut"
    if top.near(*bar) or scored.near(*bar):
        return "near the bar"
    return "no shortcut"


def learned_probe(
    train: Sequence[ProbeEpisode],
    heldout: Sequence[ProbeEpisode],
    causes: Sequence[str],
    rng: np.random.Generator,
    *,
    folds: int = 5,
    trees: int = 500,
    min_precision: float = 0.85,
    min_recall: float = 0.3,
    repeats: int = 5,
    top: int = 10,
    candidates: int = 150,
    per_cause: int = 15,
    min_support: int = 3,
    sets: Sequence[str] = SETS,
) -> LearnedProbe:
    """Train on ``train``, test on ``heldout`` (without one: ``folds``-fold cross-validation over
    ``train``); every set of ``sets`` (module docstring).

    Args:
        train: The training episodes (the pooled committed splits of a domain).
        heldout: The held-out episodes (a fresh split); empty: cross-validation.
        causes: The causes to read one against the rest (those with held-out episodes are).
        rng: Every draw's source.
        trees: The forest's trees.
        repeats: Shuffles per feature (permutation importance).
        top: Deciding features kept per cause.
        candidates: The forest's most used features shuffled; ``per_cause``: and per cause the
            features that rank its training episodes best.
        min_support: A feature is read when at least this many training episodes have it.

    Raises:
        ValueError: No training episode, or fewer than two causes among them.
    """
    if not train or len({e.cause for e in train}) < 2:
        raise ValueError("the learned probe needs training episodes of at least two causes")
    episodes = [*train, *heldout]
    how = {
        "trees": trees,
        "min_precision": min_precision,
        "min_recall": min_recall,
        "repeats": repeats,
        "top": top,
        "candidates": candidates,
        "per_cause": per_cause,
        "min_support": min_support,
    }
    splits = _folds(episodes, len(train), folds, rng)
    results = tuple(_probe_set(s, episodes, splits, causes, rng, how) for s in sets)
    tested = heldout if heldout else train
    majority, rate = majority_rate([e.truths for e in tested])
    return LearnedProbe(
        "held-out" if heldout else "cross-validation",
        0 if heldout else len(splits),
        len(train),
        len(tested),
        majority,
        rate,
        results,
        min_precision,
        min_recall,
        trees,
    )
