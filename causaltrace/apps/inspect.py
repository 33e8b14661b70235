"""``causaltrace-inspect``: look at one episode of a dataset.

    causaltrace-inspect data/ads_test test-000012 --plot kpi.png
    causaltrace-inspect data/ads_test test-000012 --show-label

Prints the agent-visible tables with their row counts and the prompt; ``--plot`` writes a PNG
with one panel per alert of the prompt's page: the alerted KPI over the alerted scope per time
step, factual against counterfactual (the worlds rebuilt from the private spec), the alert's
window and the cause's window shaded; the label is printed only with ``--show-label``. User
errors (no such dataset or episode, a damaged file) print one line; ``--debug`` shows the
traceback.
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
from causaltrace.episodes.alerts import scope_slice
from causaltrace.episodes.domain import Domain
from causaltrace.episodes.sampling import Episode
from causaltrace.errors import CausalTraceError
from causaltrace.model.panel import Panel
from causaltrace.model.simulate import World
from causaltrace.model.slices import Slice
from causaltrace.plotting import KpiSeries, draw_kpi_series


def scope_world(world: World, cells: Slice) -> World:
    """``world`` restricted to the cells of ``cells`` (a world over the sub-panel), so a
    monitor's panel-wide ``kpi_daily`` reads the scope alone: sums over its cells, ratios as
    ratios of those sums."""
    panel = world.panel
    if cells.is_whole_panel:
        return world
    mask = cells.mask(panel)
    sub = Panel(panel.dimensions, panel.time, panel.cells[mask])
    arrays = {
        name: (values[mask] if np.ndim(values) and len(values) == panel.n_cells else values)
        for name, values in world.items()
    }
    return World(arrays, sub)


def alert_kpi_series(domain: Domain, episode: Episode) -> list[KpiSeries]:
    """The KPI of each alert the episode's prompt pages, over that alert's scope, per time step,
    in the factual world (the agent's tables) and the counterfactual one.

    The alerts are the domain's :meth:`~causaltrace.Domain.shown_alerts` of its readings on the
    episode's tables (with none fired, the reading of the largest adverse move, as prompts show
    it). A scope is placed on the panel by
    :func:`~causaltrace.episodes.alerts.scope_slice`, and the monitor's ``kpi_daily`` reads the
    world restricted to its cells; a scope that cannot be placed falls back to the whole panel,
    and ``where`` says so. The windows: the alert's (:meth:`~causaltrace.Domain.alert_onset` to
    the end) and each cause's (its draw's onset to its end), leaving out causes that inject
    nothing.

    Raises:
        NotImplementedError: The domain has no monitor (no alerted KPI).
    """
    monitor = domain.monitor
    if monitor is None:
        raise NotImplementedError(f"domain {domain.name!r} has no monitor (no alerted KPI)")
    panel = domain.scm.panel
    readings = list(monitor.alert_readings(episode.tables))
    if not readings:
        raise NotImplementedError(f"domain {domain.name!r}: the monitor gave no reading")
    alerts = domain.shown_alerts(readings) or [max(readings, key=lambda r: r.severity)]
    n_time = panel.n_time
    causes = tuple(
        (d.window.onset, n_time if d.window.end is None else min(d.window.end, n_time))
        for d in episode.draws
        if not domain.scm.point(d.point).info.no_signal
    )
    alert_window = (min(max(domain.alert_onset(), 0), n_time), n_time)
    worlds = episode.worlds
    out = []
    for alert in alerts:
        cells = scope_slice(alert.scope, panel)
        if cells is None:
            where = f"whole panel: scope {alert.scope!r} is no slice of the panel"
            cells = Slice()
        elif cells.is_whole_panel:
            where = "whole panel"
        else:
            where = cells.canonical()

        def daily(world: World | None, kpi: str = alert.kpi, cells: Slice = cells):
            if world is None:
                return None
            return np.asarray(monitor.kpi_daily(scope_world(world, cells), kpi), np.float64)

        out.append(
            KpiSeries(
                kpi=alert.kpi,
                scope=alert.scope,
                where=where,
                times=panel.time.values,
                factual=daily(worlds.factual),
                counterfactual=daily(worlds.counterfactual),
                alert_window=alert_window,
                interventions=causes,
            )
        )
    return out


def plot_kpi(out_dir: str, episode: str, path: str) -> str:
    """Each paged alert's KPI over its scope per time step, factual against counterfactual,
    with the alert's window and the causes' windows shaded (rebuilds the episode's worlds from
    its private spec)."""

    domain = dataset_domain(out_dir)
    if domain.monitor is None:
        raise NotImplementedError(f"domain {domain.name!r} has no monitor (no alerted KPI)")
    series = alert_kpi_series(domain, rebuild_episode(out_dir, episode))
    return draw_kpi_series(series, path, title=episode)


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
    parser.add_argument(
        "--plot", metavar="PNG", help="write the plot of the alerted KPIs (over their scopes) here"
    )
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
