"""``causaltrace-inspect``: look at one episode of a dataset.

    causaltrace-inspect data/ads_test test-000012 --plot kpi.png
    causaltrace-inspect data/ads_test test-000012 --show-label

Prints the agent-visible tables with their row counts and the prompt; ``--plot`` writes a PNG
of the alerted KPI over time against its counterfactual (rebuilt from the private spec); the
label is printed only with ``--show-label``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from causaltrace.generation import dataset_domain, load_labels, open_episode, rebuild_episode
from causaltrace.storage import PROMPT_FILE, read_episode_tables


def plot_kpi(out_dir: str, episode: str, path: str) -> str:
    """The alerted KPI per day, factual against counterfactual, with the onset marked."""
    from causaltrace.plotting import _pyplot

    domain = dataset_domain(out_dir)
    built = rebuild_episode(out_dir, episode)
    kpi = domain.alert_kpi(built.tables)
    days = domain.scm.panel.time.values
    factual = domain.kpi_daily(built.worlds.factual, kpi)
    counterfactual = domain.kpi_daily(built.worlds.counterfactual, kpi)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(days, counterfactual, label="counterfactual (no cause)", color="#888888", ls="--")
    ax.plot(days, factual, label="factual (what the agent sees)", color="#1d3557")
    ax.axvline(days[built.draw.window.onset], color="#e63946", lw=1, label="onset")
    ax.set_title(f"{episode}: {kpi}")
    ax.legend(loc="best", fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="causaltrace-inspect", description=__doc__.splitlines()[0]
    )
    parser.add_argument("dataset", help="dataset directory")
    parser.add_argument("episode", help="episode id, e.g. test-000012")
    parser.add_argument("--plot", metavar="PNG", help="write the alerted KPI plot here")
    parser.add_argument("--show-label", action="store_true", help="print the oracle label")
    parser.add_argument("--rows", type=int, default=3, help="rows to show per table")
    args = parser.parse_args(argv)
    directory = open_episode(args.dataset, args.episode)
    tables = read_episode_tables(directory)
    print(f"episode {args.episode} ({directory})")
    for name, frame in tables.items():
        print(f"\n== {name}: {len(frame)} rows x {frame.shape[1]} columns")
        print(frame.head(args.rows).to_string())
    print("\n== prompt\n" + (directory / PROMPT_FILE).read_text(encoding="utf-8"))
    if args.plot:
        print(f"plot: {plot_kpi(args.dataset, args.episode, args.plot)}")
    if args.show_label:
        print(
            "\n== label (secret)\n"
            + json.dumps(load_labels(args.dataset)[args.episode], indent=2, sort_keys=True)
        )
    return 0


if __name__ == "__main__":
    np.set_printoptions(linewidth=120)
    sys.exit(main())
