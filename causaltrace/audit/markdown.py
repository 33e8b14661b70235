"""The audit's Markdown report and its figures (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

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
