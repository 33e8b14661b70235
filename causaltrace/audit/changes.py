"""Does each label hold every change that moved the page? Measured on any generated split.

For every episode the worlds are rebuilt from its spec and each shown alert's move is
attributed to every change (its causes and each background change, switched on and off with
the episode's noise: :mod:`causaltrace.episodes.change_shares`). A label the data supports has
no background change with a share of 0.25 or more of a shown alert (an analyst would name it),
none with 0.10 or more (a twin stays a twin only where it did little), and causes that make at
least half of the paged alert with the background counted. The report counts the episodes that
break each rule and names the background kinds that break them, so a split committed before
the generator enforced the rules can be judged by the same numbers as one made after.

Command line::

    python -m causaltrace.audit.changes data/ads_hard data/ads_expert [--episodes N] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from causaltrace.datasets.reading import dataset_domain, load_index, load_labels, rebuild_episode
from causaltrace.episodes.change_shares import attribute_changes

NAMED = 0.25  # a change with this share of a shown alert is one an analyst names
HARMLESS = 0.10  # an unlabelled change must stay below this share of every shown alert
EXPLAINED = 0.5  # the causes' share of the paged alert, with the background counted


@dataclass(frozen=True)
class EpisodeChanges:
    """One episode's attribution, reduced to what the rules read."""

    split: str
    episode_id: str
    causes: tuple[str, ...]
    signal: bool
    top_change: str | None  # the background change with the largest share of a shown alert
    top_kind: str | None
    top_alert: str | None
    top_rank: int | None  # its alert's place on the page (1: the paged alert)
    top_share: float  # signed: in the alert's direction
    top_cause_share: float  # the causes' share of that same alert
    paged_share: float  # the causes' share of the paged alert
    residual: float  # the largest |efficiency residual| of the estimate
    method: str


def episode_changes(split_dir: str | Path, episode_id: str, label: Mapping[str, Any]):
    """The attribution of one episode of ``split_dir``, or None if its tables raise no alert.

    Args:
        split_dir: The dataset directory.
        episode_id: The episode.
        label: Its label row (read for the causes and the group only).
    """
    domain = dataset_domain(split_dir)
    attribution = attribute_changes(domain, rebuild_episode(split_dir, episode_id))
    if attribution is None:
        return None
    causes = tuple(c["cause"] for c in (label, *(label.get("also") or ())))
    signal = label.get("group") != "no-signal"
    top = attribution.largest_background()
    paged = attribution.alerts[0]

    def causes_on(alert: str) -> float:
        return math.fsum(s[alert] for s in attribution.causes.values()) if signal else 0.0

    return EpisodeChanges(
        split=Path(split_dir).name,
        episode_id=episode_id,
        causes=causes,
        signal=signal,
        top_change=None if top is None else top[0],
        top_kind=None if top is None else attribution.kinds[top[0]],
        top_alert=None if top is None else top[1],
        top_rank=None if top is None else attribution.alerts.index(top[1]) + 1,
        top_share=0.0 if top is None else top[2],
        top_cause_share=0.0 if top is None else causes_on(top[1]),
        paged_share=causes_on(paged),
        residual=max((abs(r) for r in attribution.residual.values()), default=0.0),
        method=attribution.method,
    )


def _job(args: tuple[str, str, Mapping[str, Any]]) -> EpisodeChanges | None:
    return episode_changes(*args)


def measure(
    split_dirs: Sequence[str | Path], episodes: int | None = None, workers: int = 1
) -> list[EpisodeChanges]:
    """Every (or the first ``episodes``) episode of each split, attributed.

    Args:
        split_dirs: Dataset directories.
        episodes: The most episodes per split (index order); all by default.
        workers: Processes to spread the episodes over (the result does not depend on it).
    """
    jobs = []
    for split_dir in split_dirs:
        labels = load_labels(split_dir)
        ids = [row["episode_id"] for row in load_index(split_dir)][:episodes]
        jobs += [(str(split_dir), i, labels[i]) for i in ids]
    if workers <= 1:
        results = [_job(j) for j in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_job, jobs, chunksize=4))
    return [r for r in results if r is not None]


def summary(rows: Iterable[EpisodeChanges]) -> dict[str, Any]:
    """The counts the rules read, over signal episodes and over all of them."""
    rows = list(rows)
    signal = [r for r in rows if r.signal]
    named = [r for r in rows if r.top_share >= NAMED]
    return {
        "episodes": len(rows),
        "signal": len(signal),
        "background_named": len(named),
        "background_named_signal": sum(1 for r in named if r.signal),
        "background_not_harmless": sum(1 for r in rows if r.top_share >= HARMLESS),
        "background_beats_cause": sum(1 for r in signal if r.top_share > r.top_cause_share),
        "paged_below_half": sum(1 for r in signal if r.paged_share < EXPLAINED),
        "named_by_rank": dict(sorted(Counter(r.top_rank for r in named).items())),
        "named_by_kind": dict(Counter(r.top_kind for r in named).most_common()),
        "largest_residual": max((r.residual for r in rows), default=0.0),
    }


def to_markdown(by_split: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per split: how many labels break each rule."""
    lines = [
        "| split | episodes (signal) | background >= 0.25 of a shown alert | >= 0.10 | "
        "more than the causes (signal) | causes < 0.5 of the paged alert | kinds (>= 0.25) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for split, s in by_split.items():
        kinds = ", ".join(f"{k} {n}" for k, n in s["named_by_kind"].items()) or "-"
        lines.append(
            f"| {split} | {s['episodes']} ({s['signal']}) | {s['background_named']} | "
            f"{s['background_not_harmless']} | {s['background_beats_cause']} | "
            f"{s['paged_below_half']} | {kinds} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("splits", nargs="+", help="dataset directories")
    parser.add_argument("--episodes", type=int, default=None, help="first N episodes of each")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rows", help="write every episode's row here (JSON lines)")
    args = parser.parse_args(argv)
    rows = measure(args.splits, args.episodes, args.workers)
    by_split = {
        Path(s).name: summary(r for r in rows if r.split == Path(s).name) for s in args.splits
    }
    if args.rows:
        with open(args.rows, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(asdict(row), sort_keys=True) + "\n")
    print(to_markdown(by_split))
    print(json.dumps({"all": summary(rows)}, sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
