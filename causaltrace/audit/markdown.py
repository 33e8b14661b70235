"""The audit's Markdown report and its figures (matplotlib, Agg backend), and the learned
probe's section (it reads no dataset, only the probe's result)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from causaltrace.audit.learned import (
    NON_METRIC,
    SET_TITLES,
    CauseResult,
    LearnedProbe,
)
from causaltrace.audit.stats import fmt_rate
from causaltrace.plotting import pyplot


def heatmap(frame: pd.DataFrame, path: Path, title: str, fmt: str = "d", cmap="Blues") -> str:
    """A labelled heatmap of a matrix (rows x columns), values written in the cells."""

    plt = pyplot()
    n_rows, n_cols = frame.shape
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * n_cols + 3), max(4, 0.45 * n_rows + 2)))
    values = frame.to_numpy(dtype=float)
    ax.imshow(values, cmap=cmap, aspect="auto")
    ax.set_xticks(
        range(n_cols), [str(c) for c in frame.columns], rotation=60, ha="right", fontsize=7
    )
    ax.set_yticks(range(n_rows), [str(r) for r in frame.index], fontsize=7)
    top = np.nanmax(values) if values.size else 0
    for i in range(n_rows):
        for j in range(n_cols):
            v = values[i, j]
            if np.isfinite(v) and v != 0:
                text = format(int(v), fmt) if fmt == "d" else format(v, fmt)
                color = "white" if top and v > 0.6 * top else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color=color)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def md_table(frame: pd.DataFrame, index_name: str = "") -> str:
    """A pandas frame as a GitHub Markdown table (no extra dependency)."""
    cols = [index_name or (frame.index.name or ""), *map(str, frame.columns)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join([" --- "] * len(cols)) + "|"]
    for idx, row in frame.iterrows():
        cells = [str(idx), *(_cell(v) for v in row.tolist())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:.3f}"
    return str(value).replace("|", "\\|")


def rate_table(rows: pd.DataFrame, by: str, columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Per value of ``by``: each 0/1 column as ``rate [low, high] (n)``."""
    out = {}
    for key, part in rows.groupby(by, sort=False):
        out[key] = {
            title: fmt_rate(float(part[col].sum()), int(part[col].notna().sum()))
            for col, title in columns
        }
    return pd.DataFrame.from_dict(out, orient="index")


class Report:
    """Markdown text built section by section."""

    def __init__(self, title: str):
        self.lines: list[str] = [f"# {title}", ""]

    def h(self, text: str, level: int = 2) -> None:
        self.lines += ["#" * level + " " + text, ""]

    def p(self, text: str) -> None:
        self.lines += [text, ""]

    def code(self, text: str, lang: str = "") -> None:
        self.lines += [f"```{lang}", text.rstrip(), "```", ""]

    def table(self, frame: pd.DataFrame, index_name: str = "") -> None:
        self.lines += [md_table(frame, index_name), ""]

    def image(self, name: str, alt: str) -> None:
        self.lines += [f"![{alt}]({name})", ""]

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


# -- the learned probe (causaltrace/audit/learned.py) -------------------------------------------
def _rate(rate: tuple[float, float, float], hits: int, n: int) -> str:
    p, lo, hi = rate
    return "n/a (none)" if not n else f"{p:.2f} [{lo:.2f}, {hi:.2f}] ({hits}/{n})"


def _splits(splits: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ({n})" for name, n in splits) or "none"


def _how_tested(probe: LearnedProbe, train, heldout) -> str:
    if probe.mode == "held-out":
        return (
            f"trained on {probe.train} episodes ({_splits(train)}), tested on {probe.test} "
            f"held-out episodes ({_splits(heldout)})"
        )
    return (
        f"**no held-out split given**: {probe.folds}-fold stratified cross-validation over the "
        f"{probe.train} pooled training episodes ({_splits(train)}), folds drawn as the rule probe "
        f"draws them; a held-out split (`learned_heldout`) answers the question better, since "
        f"folds of the same splits share their quirks"
    )


def learned_summary(probe: LearnedProbe) -> list[str]:
    """The summary's lines: non-metric accuracy against the majority rate, and each cause the
    non-metric features decide."""
    result = probe.result(NON_METRIC)
    mode = "held-out split" if probe.mode == "held-out" else "cross-validation, no held-out split"
    lines = [
        f"- Learned probe (forest on non-metric features, {mode}, section 8): cause accuracy "
        f"{fmt_rate(result.hits, result.n)} against the majority rate "
        f"{probe.majority_rate:.3f}; {len(probe.shortcuts)} of {len(result.causes)} causes "
        f"decided without a metric"
    ]
    for cause in probe.shortcuts:
        lines.append(f"  - **shortcut**: {cause.cause}: {_cause_rates(cause)}")
    return lines


def _cause_rates(cause: CauseResult) -> str:
    parts = []
    for what, reading in (("top", cause.top), ("scored", cause.scored)):
        parts.append(
            f"{what}: precision {_rate(reading.precision, reading.hits, reading.named)}, "
            f"recall {_rate(reading.recall, reading.hits, reading.n)}"
        )
    return "; ".join(parts)


def learned_section(
    r: Report,
    probe: LearnedProbe,
    train: Sequence[tuple[str, int]],
    heldout: Sequence[tuple[str, int]],
) -> None:
    """Section 8: accuracy per feature set, per-cause readings of the non-metric set, and the
    features that decide each cause at or near the bar."""
    r.h("8. Learned probe (a forest trained on many episodes)")
    r.p(
        f"A random forest ({probe.trees} trees), multi-class, {_how_tested(probe, train, heldout)}. "
        f"Cause accuracy: the forest's answer is one of the episode's true causes; the majority "
        f"rate is the accuracy of always answering {probe.majority or 'the commonest cause'}. "
        f"Wilson 95% intervals. Feature sets: see docs/audit.md; no stored size, nothing the "
        f"agent's tools do not show."
    )
    table = pd.DataFrame(
        {
            "features": [s.features for s in probe.sets],
            "cause accuracy": [
                fmt_rate(s.hits, s.n) if s.n else "not run (no features)" for s in probe.sets
            ],
            "majority rate": [f"{probe.majority_rate:.3f}"] * len(probe.sets),
        },
        index=[SET_TITLES.get(s.name, s.name) for s in probe.sets],
    )
    r.table(table, "features read")
    result = probe.result(NON_METRIC)
    if not result.causes:
        r.p("Per cause: not run (no non-metric features).")
        return
    r.p(
        f"Per cause, one against the rest, from the non-metric features: **top** (the forest "
        f"answers the cause) and **scored** (its probability of the cause at least the operating "
        f"point chosen on the training episodes' out-of-bag probabilities: the highest precision "
        f"at recall >= {probe.min_recall:.2f}); precision and recall as rate [Wilson 95%] "
        f"(hits/named, hits/episodes with the cause). Verdict **shortcut** at precision >= "
        f"{probe.min_precision:.2f} and recall >= {probe.min_recall:.2f} in either reading; "
        f"**near the bar** when the bar is inside a precision interval at recall over the floor."
    )
    rows = {
        c.cause: {
            "n": c.n,
            "top precision": _rate(c.top.precision, c.top.hits, c.top.named),
            "top recall": _rate(c.top.recall, c.top.hits, c.top.n),
            "scored precision": _rate(c.scored.precision, c.scored.hits, c.scored.named),
            "scored recall": _rate(c.scored.recall, c.scored.hits, c.scored.n),
            "verdict": c.verdict,
        }
        for c in result.causes
    }
    r.table(pd.DataFrame.from_dict(rows, orient="index"), "cause")
    flagged = [c for c in result.causes if c.verdict != "no shortcut"]
    r.p(
        "The features that decide (permutation importance on the held-out episodes: the rise of "
        "the cause's Brier score, one against the rest, when the feature's values are shuffled "
        "among them, mean +- sd over the shuffles), for each cause at or near the bar"
        + ("." if flagged else ": none is.")
    )
    for cause in flagged:
        shown = "\n".join(f"{i.rise:+.4f} +- {i.sd:.4f}  {i.feature}" for i in cause.deciding)
        r.p(f"**{cause.cause}** ({cause.verdict}):")
        r.code(shown or "(no feature's shuffle raises its Brier score)")
