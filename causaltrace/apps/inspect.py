"""``causaltrace-inspect``: look at one episode of a dataset.

    causaltrace-inspect data/ads_test test-000012 --plot kpi.png
    causaltrace-inspect data/ads_test test-000012 --show-label

Prints the agent-visible tables with their row counts and the prompt; ``--plot`` writes a PNG
of the alerted KPI over time against its counterfactual (rebuilt from the private spec); the
label is printed only with ``--show-label``. User errors (no such dataset or episode, a damaged
file) print one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from causaltrace.apps.errors import run_cli
from causaltrace.datasets.reading import (
    dataset_domain,
    load_index,
    load_labels,
    open_episode,
    rebuild_episode,
)
from causaltrace.datasets.storage import PROMPT_FILE, DatasetLayout, read_episode_tables
from causaltrace.errors import CausalTraceError
from causaltrace.plotting import pyplot


def plot_kpi(out_dir: str, episode: str, path: str) -> str:
    """The alerted KPI per day, factual against counterfactual, with the onset marked."""

    domain = dataset_domain(out_dir)
    monitor = domain.monitor
    if monitor is None:
        raise NotImplementedError(f"domain {domain.name!r} has no monitor (no alerted KPI)")
    built = rebuild_episode(out_dir, episode)
    kpi = monitor.alert_kpi(built.tables)
    days = domain.scm.panel.time.values
    factual = monitor.kpi_daily(built.worlds.factual, kpi)
    counterfactual = monitor.kpi_daily(built.worlds.counterfactual, kpi)
    plt = pyplot()
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


def check_episode(dataset: str, episode: str) -> None:
    """Refuse, naming the culprit, a directory that is no dataset or an id it does not hold."""
    layout = DatasetLayout(dataset)
    if not layout.root.is_dir():
        raise CausalTraceError(f"{dataset}: no such dataset directory")
    if not (layout.root / "public" / "index").is_dir():
        raise CausalTraceError(f"{dataset} is not a dataset directory (no public/index)")
    ids = [row["episode_id"] for row in load_index(dataset)]
    if episode not in ids:
        shown = f"{ids[0]} ... {ids[-1]}" if len(ids) > 1 else ", ".join(ids) or "none"
        raise CausalTraceError(
            f"dataset {dataset} has no episode {episode!r} ({len(ids)} episodes: {shown})"
        )


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli("causaltrace-inspect", _main, argv)


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="causaltrace-inspect", description=__doc__.splitlines()[0]
    )
    parser.add_argument("dataset", help="dataset directory")
    parser.add_argument("episode", help="episode id, e.g. test-000012")
    parser.add_argument("--plot", metavar="PNG", help="write the alerted KPI plot here")
    parser.add_argument("--show-label", action="store_true", help="print the oracle label")
    parser.add_argument("--rows", type=int, default=3, help="rows to show per table")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    args = parser.parse_args(argv)
    check_episode(args.dataset, args.episode)
    directory = open_episode(args.dataset, args.episode)
    tables = read_episode_tables(directory)
    print(f"episode {args.episode} ({directory})")
    for name, frame in tables.items():
        print(f"\n== {name}: {len(frame)} rows x {frame.shape[1]} columns")
        print(frame.head(args.rows).to_string())
    print("\n== prompt\n" + (directory / PROMPT_FILE).read_text(encoding="utf-8"))
    if args.plot:
        try:
            print(f"plot: {plot_kpi(args.dataset, args.episode, args.plot)}")
        except NotImplementedError as exc:  # a domain without an alerted KPI
            raise CausalTraceError(f"--plot is not available here: {exc}") from None
    if args.show_label:
        label = load_labels(args.dataset).get(args.episode)
        if label is None:
            raise CausalTraceError(f"dataset {args.dataset} has no label for {args.episode!r}")
        print("\n== label (secret)\n" + json.dumps(label, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    np.set_printoptions(linewidth=120)
    sys.exit(main())
