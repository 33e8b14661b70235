"""Measure the accepted causes' edit attributes of generated ads splits and write the table
that ``AdsConfig.twin_attributes`` draws twins from (:mod:`causaltrace_domains.ads.twin_attributes`).
A module of its own, so that running it does not re-import the one the domain already loaded.

    python -m causaltrace_domains.ads.measure_twin_attributes data/ads_test ... --out T.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from causaltrace_domains.ads.twin_attributes import measure


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace_domains.ads.measure_twin_attributes",
        description="Measure the accepted causes' edit attributes of generated ads splits.",
    )
    parser.add_argument("datasets", nargs="+", help="dataset directories")
    parser.add_argument("--out", required=True, help="the JSON table to write")
    args = parser.parse_args(argv)
    table = measure(args.datasets)
    text = json.dumps(table.to_dict(), indent=1, sort_keys=True) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    counts = {c: len(r) for c, r in table.rows.items()}
    print(f"{args.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
