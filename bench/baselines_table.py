"""Print the baselines' metrics on a split side by side (markdown), from finished eval runs.

for a in random localizer teacher; do causaltrace-eval agent=$a domain=ads dataset=ads_test; done
python bench/baselines_table.py runs/random-ads_test runs/localizer-ads_test runs/teacher-ads_test

On a split with concurrent episodes it also splits FullAttr@1 by episode type (single cause,
concurrent: the exact set of causes, each with its slice).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def fmt(metric: dict | None) -> str:
    if not metric or metric.get("value") is None:
        return "–"
    return f"{metric['value']:.3f} [{metric['low']:.2f}, {metric['high']:.2f}]"


def main(runs: list[str]) -> None:
    loaded = [json.loads((Path(r) / "metrics.json").read_text()) for r in runs]
    names = [m["run"]["agent"]["name"] for m in loaded]
    keys = [
        ("FullAttr@1", "full_attr_at_1"),
        ("cause accuracy", "cause_accuracy"),
        ("exact 1D slice", "slice_exact_1d"),
        ("exact 2D slice", "slice_exact_2d"),
        ("no-signal accuracy", "no_signal_accuracy"),
        ("parse rate", "parse_rate"),
        ("mean tool calls", "mean_tool_calls"),
        ("mean reward (TRACE)", "mean_reward"),
    ]
    print("| metric | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    for label, key in keys:
        print(
            f"| {label} | "
            + " | ".join(fmt(m["metrics"]["overall"].get(key)) for m in loaded)
            + " |"
        )
    # by episode type: single-cause against concurrent episodes (the exact set of causes)
    for scope in ("by_episode_type", "by_group", "by_cause"):
        items = sorted(set().union(*(m["metrics"].get(scope, {}) for m in loaded)))
        if scope == "by_episode_type" and len(items) < 2:
            continue  # a split without concurrent episodes: the overall table says it all
        print(f"\nFullAttr@1 {scope.replace('_', ' ')}:\n")
        print("| | n | " + " | ".join(names) + " |")
        print("| --- | ---: |" + " ---: |" * len(names))
        for item in items:
            cells = [
                m["metrics"].get(scope, {}).get(item, {}).get("full_attr_at_1") for m in loaded
            ]
            n = next((c["n"] for c in cells if c), 0)
            print(f"| {item} | {n} | " + " | ".join(fmt(c) for c in cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
