"""Print how agents and the oracle do on difficulty tiers, side by side (markdown).

For each tier dataset: the oracle's FullAttr@1 as generation recorded it in each label
(``extra["difficulty"]["measured"]["oracle_answer"]``; on a concurrent episode it is credited
when it names one of the true causes with its slice), and each agent's FullAttr@1 from its
``causaltrace-eval`` run, over all episodes, over single-cause ones and over concurrent ones.
Rates with 95% Wilson intervals.

    python bench/tier_table.py --tiers easy medium hard expert --agents teacher localizer
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from causaltrace.audit.stats import wilson
from causaltrace.datasets.reading import load_labels


def rate(values: list[float]) -> str:
    if not values:
        return "–"
    p, lo, hi = wilson(sum(values), len(values))
    return f"{p:.3f} [{lo:.2f}, {hi:.2f}] (n={len(values)})"


def oracle_hit(label: dict) -> float:
    answer = label["extra"]["difficulty"]["measured"]["oracle_answer"]
    truths = {(label["cause"], label.get("slice"))}
    truths |= {(a["cause"], a.get("slice")) for a in label.get("also") or ()}
    return float((answer["cause"], answer["slice"]) in truths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiers", nargs="+", default=["easy", "medium", "hard", "expert"])
    parser.add_argument("--agents", nargs="+", default=["teacher", "localizer"])
    parser.add_argument("--prefix", default="ads")
    args = parser.parse_args()
    header = ["tier", "episodes (two causes)", "oracle"]
    for agent in args.agents:
        header += [f"{agent}", f"{agent}, one cause", f"{agent}, two causes"]
    print("| " + " | ".join(header) + " |")
    print("| --- |" + " ---: |" * (len(header) - 1))
    for tier in args.tiers:
        labels = load_labels(f"data/{args.prefix}_{tier}")
        two = {e for e, lab in labels.items() if lab.get("also")}
        row = [tier, f"{len(labels)} ({len(two)})", rate([oracle_hit(x) for x in labels.values()])]
        for agent in args.agents:
            path = Path(f"runs/{agent}-{args.prefix}_{tier}/results.jsonl")
            results = [json.loads(line) for line in path.read_text().splitlines() if line]
            hits = {r["episode_id"]: float(r["full_attribution"]) for r in results}
            row += [
                rate(list(hits.values())),
                rate([v for e, v in hits.items() if e not in two]),
                rate([v for e, v in hits.items() if e in two]),
            ]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
