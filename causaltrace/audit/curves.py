"""Difficulty curves: accuracy per bin of each difficulty knob, per dataset and per agent.

Knobs come from the label's ``extra["difficulty"]`` (``tier``, ``knobs``, ``measured``) when
the generator recorded it; otherwise (and in addition) from what every label has: the slice
order, the onset profile, the strength relative to the cause's prior range, the share of the
alert the cause explains, and the verifier's measured SNR (private stats).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from causaltrace.audit.stats import wilson
from causaltrace.episodes.domain import Domain
from causaltrace.plotting import pyplot

QUANTILE_BINS = 4
MAX_LEVELS = 6  # a numeric knob with at most this many values is binned by value


def knobs_of(domain: Domain, label: Mapping[str, Any], stats: Mapping[str, Any]) -> dict:
    """Every difficulty knob of one episode (secret side: for binning, never for features)."""
    extra = label.get("extra") or {}
    difficulty = extra.get("difficulty") or {}
    out: dict[str, Any] = {}
    if difficulty.get("tier") is not None:
        out["tier"] = difficulty["tier"]
    for group in ("knobs", "draw", "measured"):
        for key, value in (difficulty.get(group) or {}).items():
            if isinstance(value, Mapping):
                continue  # a record (the oracle's answer, a second cause's reading), not a knob
            out[f"{group}:{key}"] = value if _scalar(value) else str(value)
    text = label.get("slice")
    out["slice_order"] = 0 if not text else str(text).count("&") + 1
    out["profile"] = label.get("profile")
    point = domain.scm.intervention_points.get(str(label.get("cause")))
    if point is not None and not point.info.no_signal:
        lo, hi = point.prior.strength
        strength = float(label.get("strength", np.nan))
        out["strength_rel"] = (strength - lo) / (hi - lo) if hi > lo else np.nan
    alert = extra.get("alert") or {}
    if alert.get("explained_share") is not None:
        out["explained_share"] = float(alert["explained_share"])
    snr = (stats.get("accepted_stats") or {}).get("snr")
    if "measured:snr" not in out and snr is not None:
        out["snr"] = float(snr)
    return out


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | numbers.Number)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values)


def bin_labels(values: Sequence[Any]) -> list[str | None]:
    """Each value's bin: its own text for categorical or few-valued knobs; else a quantile bin
    of the pooled values (``[lo, hi)``); None for a missing value."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    if not present:
        return [None] * len(values)
    if not _numeric(present) or len(set(present)) <= MAX_LEVELS:
        return [None if v not in present else str(v) for v in values]
    edges = np.unique(np.quantile(np.asarray(present, float), np.linspace(0, 1, QUANTILE_BINS + 1)))
    out: list[str | None] = []
    for v in values:
        if v not in present:
            out.append(None)
            continue
        i = int(np.clip(np.searchsorted(edges, float(v), side="right") - 1, 0, len(edges) - 2))
        out.append(f"[{edges[i]:.3g}, {edges[i + 1]:.3g}{']' if i == len(edges) - 2 else ')'}")
    return out


@dataclass(frozen=True)
class Curve:
    """One line: a solver's accuracy per bin of one knob."""

    knob: str
    series: str  # "oracle @ <dataset>" or "<agent> @ <dataset>"
    bins: list[str]
    accuracy: list[float]
    low: list[float]
    high: list[float]
    n: list[int]


def curves(rows: pd.DataFrame, solvers: Sequence[str]) -> dict[str, list[Curve]]:
    """Per knob, a curve per (solver column, dataset). ``rows``: one row per episode with
    ``dataset``, knob columns (``knob:<name>``) and 0/1 solver columns (NaN: not run)."""
    out: dict[str, list[Curve]] = {}
    for column in [c for c in rows.columns if c.startswith("knob:")]:
        knob = column.removeprefix("knob:")
        labels = pd.Series(bin_labels(rows[column].tolist()), index=rows.index)
        if labels.dropna().nunique() < 2:
            continue  # a constant knob draws no curve
        order = _bin_order(labels.dropna().unique().tolist())
        lines = []
        for solver in solvers:
            for dataset, part in rows.groupby("dataset", sort=False):
                scored = part[solver].notna() & labels[part.index].notna()
                if not scored.any():
                    continue
                acc, lo, hi, n = [], [], [], []
                for b in order:
                    hits = part[solver][scored & (labels[part.index] == b)]
                    p, low, high = wilson(float(hits.sum()), len(hits))
                    acc.append(p)
                    lo.append(low)
                    hi.append(high)
                    n.append(len(hits))
                lines.append(Curve(knob, f"{solver} @ {dataset}", order, acc, lo, hi, n))
        if lines:
            out[knob] = lines
    return out


def _bin_order(bins: list[str]) -> list[str]:
    """Quantile bins by their lower edge, tiers in difficulty order, other levels sorted."""
    tiers = ["easy", "medium", "hard", "expert"]

    def key(b: str):
        if b in tiers:
            return (0, tiers.index(b), b)
        try:
            return (1, float(b.strip("[(").split(",")[0]), b)
        except ValueError:
            return (2, 0.0, b)

    return sorted(bins, key=key)


def plot_curves(lines: Sequence[Curve], path: str) -> str:
    """Accuracy per bin, one line per solver and dataset, with Wilson intervals."""

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, line in enumerate(lines):
        x = np.arange(len(line.bins)) + (i - (len(lines) - 1) / 2) * 0.04
        y = np.asarray(line.accuracy, float)
        err = np.clip(np.array([y - np.asarray(line.low), np.asarray(line.high) - y]), 0, 1)
        style = "-" if line.series.startswith("oracle") else "--"
        ax.errorbar(
            x, y, yerr=np.nan_to_num(err), ls=style, marker="o", capsize=3, label=line.series
        )
    ax.set_xticks(np.arange(len(lines[0].bins)), lines[0].bins, rotation=20, fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("FullAttr@1")
    ax.set_xlabel(lines[0].knob)
    ax.set_title(f"accuracy by {lines[0].knob} (95% Wilson intervals)")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
