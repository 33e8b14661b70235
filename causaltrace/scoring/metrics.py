"""Metrics over a set of scored episodes, with percentile-bootstrap confidence intervals.

Each episode becomes an :class:`EpisodeOutcome` (what the agent answered, what was true, how many
tool calls and turns it took). :func:`compute_metrics` then reports, overall, per cause group and
per cause:

- ``full_attr_at_1``: right cause and, where the cause takes a slice, exactly the right slice;
- ``cause_accuracy``;
- ``slice_exact_1d`` / ``slice_exact_2d``: over episodes whose true slice is 1D (2D), the share
  whose predicted slice is exactly the true one (whatever cause was predicted);
- ``slice_jaccard``: mean leaf-cell Jaccard of predicted and true slices;
- ``no_signal_accuracy``: cause accuracy on episodes whose group is the no-signal group;
- ``parse_rate``; ``mean_tool_calls``; ``mean_turns``; ``mean_reward`` (when rewards are given);
- ``ac@k`` (RCAEval): the true cause is among the first ``k`` of the agent's ranked causes
  (a single answer is a ranking of length one); ``avg@k``: the mean of ``ac@1..k``.

Confidence intervals are percentile bootstraps over episodes, vectorized and seeded. A cause
confusion matrix comes as a pandas DataFrame (pandas is imported only when it is built).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causaltrace.episodes.answers import NO_SIGNAL_GROUP
from causaltrace.episodes.labels import OracleLabel
from causaltrace.plotting import pyplot
from causaltrace.scoring.parsing import ParsedAnswer
from causaltrace.scoring.rewards import CompositeReward, RewardResult, same_causes, true_causes

NO_ANSWER = "(no answer)"


@dataclass(frozen=True)
class EpisodeOutcome:
    """One scored episode: the truth, the agent's (parsed) answer and its trajectory counts."""

    episode_id: str
    cause: str
    group: str
    true_slice: str | None
    takes_slice: bool
    parse_ok: bool
    pred_cause: str | None
    pred_slice: str | None
    ranked_causes: tuple[str, ...] = ()
    tool_calls: int = 0
    turns: int = 0
    slice_jaccard: float = 0.0
    reward: float | None = None
    terms: Mapping[str, float] = field(default_factory=dict)
    # A concurrent episode (several true causes): whether the answered set of (cause, slice)
    # pairs is exactly the true set; None for a single-cause episode.
    set_exact: bool | None = None

    @classmethod
    def from_parsed(
        cls, parsed: ParsedAnswer, label: OracleLabel, reward: RewardResult | None = None
    ) -> EpisodeOutcome:
        space = parsed.space
        true_slice = space.canonical_slice(label.slice) if label.slice else None
        answer = parsed.answer
        ranked = tuple(dict.fromkeys(c.root_cause for c in answer.ranked)) if answer else ()
        return cls(
            episode_id=label.episode_id,
            cause=label.cause,
            group=label.group,
            true_slice=true_slice,
            takes_slice=space.takes_slice(label.cause),
            parse_ok=parsed.ok,
            pred_cause=answer.root_cause if answer else None,
            pred_slice=answer.slice if answer else None,
            ranked_causes=ranked,
            tool_calls=parsed.tool_calls,
            turns=parsed.turns,
            slice_jaccard=space.jaccard(answer.slice, true_slice) if answer else 0.0,
            reward=None if reward is None else float(reward.score),
            terms={} if reward is None else dict(reward.terms),
            # Exact sets wherever either side names several causes: an answer that adds a
            # second cause to a single-cause episode is not a full attribution.
            set_exact=(
                _set_exact(answer, label, space)
                if label.concurrent or (answer is not None and answer.also)
                else None
            ),
        )

    @property
    def slice_order(self) -> int:
        return 0 if not self.true_slice else self.true_slice.count("&") + 1

    @property
    def cause_correct(self) -> bool:
        return self.parse_ok and self.pred_cause == self.cause

    @property
    def slice_exact(self) -> bool:
        return self.parse_ok and self.pred_slice == self.true_slice

    @property
    def full_attribution(self) -> bool:
        """Right cause and, where it takes a slice, exactly the right slice; for a concurrent
        episode, or an answer naming several causes, exactly the right set of causes, each
        with its slice."""
        if self.set_exact is not None:
            return self.parse_ok and self.set_exact
        return self.cause_correct and (not self.takes_slice or self.slice_exact)

    def rank(self) -> int | None:
        """1-based rank of the true cause in the agent's ranking, or ``None``."""
        try:
            return self.ranked_causes.index(self.cause) + 1
        except ValueError:
            return None


@dataclass(frozen=True)
class MetricValue:
    """A metric's point estimate, its bootstrap interval and the episodes it is computed on."""

    value: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.n})"


@dataclass(frozen=True)
class MetricsReport:
    """Metrics overall, per cause group and per cause; a confusion matrix; the settings."""

    overall: Mapping[str, MetricValue]
    by_group: Mapping[str, Mapping[str, MetricValue]]
    by_cause: Mapping[str, Mapping[str, MetricValue]]
    confusion: Any
    n_episodes: int
    confidence: float
    n_boot: int
    seed: int

    def to_frame(self):
        """A tidy DataFrame: scope, key, metric, value, ci_low, ci_high, n."""
        # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
        import pandas as pd

        rows = []
        scopes = [
            ("overall", {"all": self.overall}),
            ("group", self.by_group),
            ("cause", self.by_cause),
        ]
        for scope, blocks in scopes:
            for key, metrics in blocks.items():
                for name, mv in metrics.items():
                    rows.append((scope, key, name, mv.value, mv.low, mv.high, mv.n))
        return pd.DataFrame(
            rows, columns=["scope", "key", "metric", "value", "ci_low", "ci_high", "n"]
        )

    def to_dict(self) -> dict[str, Any]:
        def block(metrics: Mapping[str, MetricValue]) -> dict[str, dict[str, float]]:
            return {
                k: {"value": v.value, "low": v.low, "high": v.high, "n": v.n}
                for k, v in metrics.items()
            }

        return {
            "n_episodes": self.n_episodes,
            "confidence": self.confidence,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "overall": block(self.overall),
            "by_group": {g: block(m) for g, m in self.by_group.items()},
            "by_cause": {c: block(m) for c, m in self.by_cause.items()},
        }


# -- per-episode values ---------------------------------------------------------------------
def metric_names(ks: Sequence[int] = (1, 3, 5), with_reward: bool = False) -> list[str]:
    names = [
        "full_attr_at_1",
        "cause_accuracy",
        "slice_exact_1d",
        "slice_exact_2d",
        "slice_jaccard",
        "no_signal_accuracy",
        "parse_rate",
        "mean_tool_calls",
        "mean_turns",
    ]
    if with_reward:
        names.append("mean_reward")
    names += [f"ac@{k}" for k in ks] + [f"avg@{k}" for k in ks]
    return names


def episode_values(
    outcomes: Sequence[EpisodeOutcome],
    *,
    ks: Sequence[int] = (1, 3, 5),
    no_signal_group: str = NO_SIGNAL_GROUP,
    with_reward: bool | None = None,
) -> tuple[list[str], np.ndarray]:
    """Per-episode metric values, shape ``(n_episodes, n_metrics)``; NaN where not applicable.

    Args:
        outcomes: The scored episodes.
        ks: The ``k`` of the AC@k and Avg@k columns; 1, 3 and 5 by default.
        no_signal_group: The group whose episodes count for ``no_signal_accuracy``;
            :data:`NO_SIGNAL_GROUP` by default.
        with_reward: Add a ``mean_reward`` column; by default when some outcome has a reward.

    Returns:
        The metric names and the values, one row per outcome.
    """
    if with_reward is None:
        with_reward = any(o.reward is not None for o in outcomes)
    names = metric_names(ks, with_reward)
    nan = math.nan
    rows = []
    for o in outcomes:
        order = o.slice_order
        rank = o.rank()
        row = [
            float(o.full_attribution),
            float(o.cause_correct),
            float(o.slice_exact) if o.takes_slice and order == 1 else nan,
            float(o.slice_exact) if o.takes_slice and order == 2 else nan,
            float(o.slice_jaccard),
            float(o.cause_correct) if o.group == no_signal_group else nan,
            float(o.parse_ok),
            float(o.tool_calls),
            float(o.turns),
        ]
        if with_reward:
            row.append(nan if o.reward is None else float(o.reward))
        row += [float(rank is not None and rank <= k) for k in ks]
        row += [(k - rank + 1) / k if rank is not None and rank <= k else 0.0 for k in ks]
        rows.append(row)
    values = np.asarray(rows, dtype=np.float64).reshape(len(outcomes), len(names))
    return names, values


# -- bootstrap -----------------------------------------------------------------------------
def bootstrap_means(
    values: np.ndarray,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    rng: np.random.Generator | int | None = 0,
    max_block: int = 4_000_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Percentile-bootstrap CIs of column means, ignoring NaN (not applicable) entries.

    ``values`` has shape ``(n, m)`` (or ``(n,)``). Each replicate resamples the ``n`` rows with
    replacement (as multiplicity counts, so a replicate is a matrix product); a column's
    replicate mean is over its non-NaN resampled entries. Returns ``(mean, low, high, n_valid)``
    per column. Vectorized in blocks of at most ``max_block`` counts.

    Args:
        values: The values, one row per episode; NaN where a metric does not apply.
        n_boot: The number of bootstrap replicates; 1000 by default (0: no intervals).
        confidence: The interval's coverage; 0.95 by default.
        rng: A generator, or the seed of one; seed 0 by default.
        max_block: The most resampling counts held in memory at once; 4,000,000 by default.
    """
    x = np.asarray(values, dtype=np.float64)
    squeeze = x.ndim == 1
    if squeeze:
        x = x[:, None]
    n, m = x.shape
    valid = ~np.isnan(x)
    n_valid = valid.sum(axis=0)
    filled = np.where(valid, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        point = filled.sum(axis=0) / n_valid
    low = np.full(m, np.nan)
    high = np.full(m, np.nan)
    if n > 0 and n_boot > 0:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        block = max(1, min(n_boot, max_block // n))
        means = np.empty((n_boot, m))
        validf = valid.astype(np.float64)
        for start in range(0, n_boot, block):
            b = min(block, n_boot - start)
            idx = gen.integers(0, n, size=(b, n))
            counts = np.bincount(
                (idx + n * np.arange(b)[:, None]).ravel(), minlength=b * n
            ).reshape(b, n)
            with np.errstate(invalid="ignore", divide="ignore"):
                means[start : start + b] = (counts @ filled) / (counts @ validf)
        alpha = (1.0 - confidence) / 2.0
        ok = n_valid > 0
        if ok.any():
            qs = np.nanpercentile(means[:, ok], [100 * alpha, 100 * (1 - alpha)], axis=0)
            low[ok], high[ok] = qs[0], qs[1]
    if squeeze:
        return point[:1], low[:1], high[:1], n_valid[:1]
    return point, low, high, n_valid


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> MetricValue:
    """Mean of ``values`` (NaN ignored) with its percentile-bootstrap interval.

    Args:
        values: The values; NaN entries are ignored.
        n_boot: The number of bootstrap replicates; 1000 by default.
        confidence: The interval's coverage; 0.95 by default.
        seed: The resampling seed; 0 by default.
    """
    point, low, high, n = bootstrap_means(
        np.asarray(values, dtype=np.float64), n_boot=n_boot, confidence=confidence, rng=seed
    )
    return MetricValue(float(point[0]), float(low[0]), float(high[0]), int(n[0]))


# -- the report ------------------------------------------------------------------------------
def compute_metrics(
    outcomes: Iterable[EpisodeOutcome],
    *,
    causes: Sequence[str] | None = None,
    ks: Sequence[int] = (1, 3, 5),
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    no_signal_group: str = NO_SIGNAL_GROUP,
) -> MetricsReport:
    """Metrics with bootstrap CIs overall, per group and per cause, and a confusion matrix.

    Each scope is resampled with its own generator, seeded from ``seed`` and the scope's name,
    so a scope's interval does not depend on which other scopes exist.

    Args:
        outcomes: The scored episodes.
        causes: The causes in the order the report and confusion matrix list them first (then
            any others, as met); the order met by default.
        ks: The ``k`` of the AC@k and Avg@k metrics; 1, 3 and 5 by default.
        n_boot: The number of bootstrap replicates; 1000 by default.
        confidence: The intervals' coverage; 0.95 by default.
        seed: The root seed of the resampling; 0 by default.
        no_signal_group: The group of episodes with no signal; :data:`NO_SIGNAL_GROUP` by default.
    """
    outs = list(outcomes)
    names, values = episode_values(outs, ks=ks, no_signal_group=no_signal_group)

    def scope(key: str, rows: np.ndarray) -> dict[str, MetricValue]:
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        point, low, high, n = bootstrap_means(
            values[rows], n_boot=n_boot, confidence=confidence, rng=rng
        )
        return {
            name: MetricValue(float(point[j]), float(low[j]), float(high[j]), int(n[j]))
            for j, name in enumerate(names)
            if n[j] > 0
        }

    every = np.arange(len(outs))
    groups = list(dict.fromkeys(o.group for o in outs))
    cause_order = list(causes or ()) + [o.cause for o in outs]
    cause_order = list(dict.fromkeys(cause_order))
    by_group = {g: scope(f"group:{g}", every[[o.group == g for o in outs]]) for g in groups}
    by_cause = {
        c: scope(f"cause:{c}", every[[o.cause == c for o in outs]])
        for c in cause_order
        if any(o.cause == c for o in outs)
    }
    return MetricsReport(
        overall=scope("overall", every),
        by_group=by_group,
        by_cause=by_cause,
        confusion=confusion_matrix(outs, causes=cause_order),
        n_episodes=len(outs),
        confidence=confidence,
        n_boot=n_boot,
        seed=seed,
    )


def score_episodes(
    items: Iterable[tuple[Any, OracleLabel]],
    space,
    reward=None,
) -> list[EpisodeOutcome]:
    """Parse and score ``(agent output, label)`` pairs into outcomes (default reward: TRACE).

    Args:
        items: ``(agent output, label)`` pairs.
        space (AnswerSpace): The answer space the outputs are parsed against.
        reward (CompositeReward | Mapping | None): The reward or its config; TRACE by default.
    """

    if not isinstance(reward, CompositeReward):
        reward = CompositeReward.from_config(reward)
    outs = []
    for output, label in items:
        parsed = reward.parse(output, space)
        outs.append(EpisodeOutcome.from_parsed(parsed, label, reward(parsed, label)))
    return outs


def _set_exact(answer, label: OracleLabel, space) -> bool:
    """Whether ``answer`` names exactly ``label``'s causes, each with its slice where it takes
    one (as multisets: a cause at work on two slices is named twice, once on each)."""
    if answer is None:
        return False
    answered = [
        (c.root_cause, space.canonical_slice(c.slice) if c.slice else None)
        if space.takes_slice(c.root_cause)
        else (c.root_cause, None)
        for c in answer.causes
    ]
    return same_causes(space, true_causes(space, label), answered, slices=True)


# -- AC@k ----------------------------------------------------------------------------------
def ac_at_k(rankings: Sequence[Sequence[str]], truths: Sequence[str], k: int) -> float:
    """RCAEval AC@k: share of cases whose true cause is among the first ``k`` ranked causes.

    Args:
        rankings: Each case's causes, best first.
        truths: Each case's true cause.
        k: How many ranked causes count.

    Returns:
        The share, or NaN when there are no cases.

    Raises:
        ValueError: ``rankings`` and ``truths`` differ in length.
    """
    if len(rankings) != len(truths):
        raise ValueError("rankings and truths differ in length")
    if not truths:
        return math.nan
    return float(np.mean([t in list(r)[:k] for r, t in zip(rankings, truths)]))


def avg_at_k(rankings: Sequence[Sequence[str]], truths: Sequence[str], k: int) -> float:
    """RCAEval Avg@k: the mean of AC@1 .. AC@k.

    Args:
        rankings: Each case's causes, best first.
        truths: Each case's true cause.
        k: The largest ``k`` averaged over.
    """
    return float(np.mean([ac_at_k(rankings, truths, j) for j in range(1, k + 1)]))


# -- confusion matrix ------------------------------------------------------------------------
def confusion_matrix(
    outcomes: Iterable[EpisodeOutcome],
    *,
    causes: Sequence[str] | None = None,
    normalize: bool = False,
):
    """Counts of (true cause, predicted cause) as a DataFrame; unparsed answers in a
    ``"(no answer)"`` column. ``normalize=True`` divides each row by its total.

    Args:
        outcomes: The scored episodes.
        causes: The causes to list first, in this order; the order met by default.
        normalize: Divide each row by its total; off (counts) by default.
    """
    # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
    import pandas as pd

    outs = list(outcomes)
    order = list(dict.fromkeys(list(causes or ()) + [o.cause for o in outs]))
    preds = list(dict.fromkeys(order + [o.pred_cause for o in outs if o.pred_cause]))
    cols = [*preds, NO_ANSWER]
    frame = pd.DataFrame(
        0, index=pd.Index(order, name="true"), columns=pd.Index(cols, name="predicted")
    )
    for o in outs:
        frame.loc[o.cause, o.pred_cause if o.parse_ok and o.pred_cause else NO_ANSWER] += 1
    if normalize:
        totals = frame.sum(axis=1).replace(0, 1)
        frame = frame.div(totals, axis=0)
    return frame


def plot_confusion(
    matrix, path: str | Path, *, normalize: bool = True, title: str = "cause confusion"
) -> str:
    """Save a confusion matrix (from :func:`confusion_matrix`) as a PNG; returns the path.

    Args:
        matrix (pandas.DataFrame): Counts from :func:`confusion_matrix`.
        path: The PNG file to write.
        normalize: Show each row's shares (on by default) rather than counts.
        title: The figure's title; ``"cause confusion"`` by default.
    """

    plt = pyplot()
    counts = matrix.to_numpy(dtype=np.float64)
    shown = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1) if normalize else counts
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * shown.shape[1], 1.0 + 0.6 * shown.shape[0]))
    im = ax.imshow(shown, cmap="Blues", vmin=0.0, vmax=1.0 if normalize else None)
    ax.set_xticks(range(shown.shape[1]), [str(c) for c in matrix.columns], rotation=45, ha="right")
    ax.set_yticks(range(shown.shape[0]), [str(c) for c in matrix.index])
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for i in range(shown.shape[0]):
        for j in range(shown.shape[1]):
            text = f"{shown[i, j]:.2f}" if normalize else f"{int(counts[i, j])}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=7,
                color="white" if shown[i, j] > 0.6 * (shown.max() or 1) else "black",
            )
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title)
    fig.tight_layout()
    path = str(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
