"""The services domain: the SCM, its causes, and what the SRE on call sees."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from causaltrace import SCM, Background, Domain, InterventionDraw, World
from causaltrace_domains.services import changes, render
from causaltrace_domains.services.alert import (
    WINDOW,
    monitor_readings,
    page,
    page_text,
    raised_page,
    shown_alert,
    task_prompt,
)
from causaltrace_domains.services.background import sample_background
from causaltrace_domains.services.causes import CAUSES, cause_change, intervention_points
from causaltrace_domains.services.config import KNOBS, ServicesConfig
from causaltrace_domains.services.dictionary import DATA_DICTIONARY
from causaltrace_domains.services.evidence import ServicesEvidence
from causaltrace_domains.services.scm import build_nodes, build_panel

LABEL_KPIS = ("requests", "errors", "hits", "queue_depth")
ONSET_FROM_END = (12, 5)  # causes start 3 hours to 75 minutes before the panel ends


class ServicesDomain(Domain):
    """A shop's backend: 11 services x 3 regions x 15-minute buckets, 9 root causes."""

    name = "services"
    record_tables = ("change_log",)  # deploys and config edits (Domain.record_tables)
    difficulty_knobs: ClassVar[Mapping[str, str]] = KNOBS

    def __init__(self, config: Mapping | None = None):
        super().__init__(config)
        self.settings = ServicesConfig.from_mapping(self.config)

    def build_scm(self) -> SCM:
        cfg = self.settings
        panel = build_panel(cfg.start, cfg.days)
        n = panel.n_time
        points = intervention_points((n - ONSET_FROM_END[0], n - ONSET_FROM_END[1]))
        return SCM(build_nodes(panel, cfg.noise), panel, points, name="services")

    def background(
        self, rng: np.random.Generator, draws: Sequence[InterventionDraw] = ()
    ) -> Background:
        """Independent of the draws: the harmless changes in the alerted cells
        (``alert_decoys``) are written with the change log, whichever the cause is."""
        return sample_background(self.scm.panel, self.settings, rng)

    def change_onsets(self) -> tuple[int, int]:
        """The buckets where a cause's change can land (its prior's onset range, after any
        difficulty tier narrowed it): where the alerted cells' harmless changes go too."""
        n = self.scm.panel.n_time
        ranges = [
            self.scm.point(c).prior.onset_range(n) for c in CAUSES if cause_change(c) is not None
        ]
        return min(r[0] for r in ranges), max(r[1] for r in ranges)

    def render(
        self,
        world: World,
        draw: InterventionDraw,
        background: Background,
        rng: np.random.Generator,
        *,
        also: Sequence[InterventionDraw] = (),
    ) -> dict[str, pd.DataFrame]:
        panel = self.scm.panel
        cause_rng, alerted_rng = rng.spawn(2)
        tables = {
            "service_metrics": render.service_metrics(panel, world),
            "saturation": render.saturation(panel, world),
            "cache_metrics": render.cache_metrics(panel, world),
            "queue_metrics": render.queue_metrics(panel, world),
            "call_graph": render.call_graph(),
        }
        tables["change_log"] = self._change_log(
            world, tables, (draw, *also), background, cause_rng, alerted_rng
        )
        tables["data_dictionary"] = pd.DataFrame(
            [(t, c, d) for t, cols in DATA_DICTIONARY.items() for c, d in cols.items()],
            columns=["table_name", "column_name", "description"],
        )
        return tables

    def _change_log(
        self,
        world: World,
        tables: Mapping[str, pd.DataFrame],
        draws: Sequence[InterventionDraw],
        background: Background,
        cause_rng: np.random.Generator,
        alerted_rng: np.random.Generator,
    ) -> pd.DataFrame:
        """The causes' own changes, harmless changes in every alerted cell (and random others,
        ``decoy_cells`` in all) at the times a cause's change would be (one of them replaced by
        a cause's change of that kind in its cell), and the background's scattered ones,
        resolved against ``world``."""
        panel = self.scm.panel
        own = [s for d in draws for s in changes.cause_slots(d, cause_change(d.point), cause_rng)]
        taken = Counter((s.service, s.region, s.kind) for s in own)
        alerted = [tuple(a.scope.split("@")) for a in page(monitor_readings(tables))]
        cells = changes.decoy_cells(alerted, self.settings.decoy_cells, alerted_rng)
        means = {k: getattr(self.settings.alert_decoys, k) for k in changes.KINDS}
        alerted = changes.alerted_slots(cells, self.change_onsets(), means, taken, alerted_rng)
        slots = [*own, *alerted, *background.notes["changes"]]
        rows = changes.resolve(slots, panel, world)
        return changes.change_log(panel, rows, self.settings.change_rows)

    def data_dictionary(self) -> dict[str, dict[str, str]]:
        return DATA_DICTIONARY

    def task_prompt(self, tables: Mapping[str, pd.DataFrame]) -> str:
        alerts = page(self.alert_readings(tables))
        text = page_text(alerts, self.scm.panel.time.values.astype("datetime64[m]"))
        sizes = {k: len(v) for k, v in tables.items()}
        return task_prompt(text, len(alerts), sizes, self.concurrent)

    def alert_readings(self, tables: Mapping[str, pd.DataFrame]):
        return monitor_readings(tables)

    def shown_alerts(self, readings) -> list:
        """The page: the fired alerts, at most one per service, at most three, most severe
        first (the engine checks each cause of a concurrent episode against these)."""
        return raised_page(readings)

    def monitor_tables(self, world: World) -> dict[str, pd.DataFrame]:
        panel = self.scm.panel
        return {
            "service_metrics": render.service_metrics(panel, world),
            "queue_metrics": render.queue_metrics(panel, world),
        }

    def alert_onset(self) -> int:
        return self.scm.panel.n_time - WINDOW

    def evidence(self, tables: Mapping[str, pd.DataFrame]) -> ServicesEvidence:
        return ServicesEvidence(self.scm.panel, tables)

    def alert_kpi(self, tables: Mapping[str, pd.DataFrame]) -> str:
        return shown_alert(self.alert_readings(tables)).kpi

    def kpi_daily(self, world: World, kpi: str) -> np.ndarray:
        """The system-level value of ``kpi`` per bucket (for plots), in the alert's units (the
        error rate in percent, as the page states it)."""
        if kpi == "error_rate":
            errors, requests = world["errors"].sum(axis=0), world["requests"].sum(axis=0)
            return 100.0 * errors / np.maximum(requests, 1)
        if kpi in ("latency_p99_ms", "queue_depth"):
            return world[kpi].max(axis=0)
        return world[kpi].sum(axis=0).astype(np.float64)

    def kpi_totals(self, world: World, mask: np.ndarray, onset: int) -> dict[str, float]:
        out = {k: float(world[k][mask][:, onset:].sum()) for k in LABEL_KPIS}
        out["latency_p99_ms"] = float(world["latency_p99_ms"][mask][:, onset:].mean())
        out["cpu_pct"] = float(world["cpu_pct"][mask][:, onset:].mean())
        return out
