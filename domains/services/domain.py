"""The services domain: the SCM, its causes, and what the SRE on call sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from causaltrace import SCM, Background, Domain, InterventionDraw, World
from causaltrace_domains.services import render
from causaltrace_domains.services.alert import (
    WINDOW,
    alert_text,
    monitor_readings,
    shown_alert,
    task_prompt,
)
from causaltrace_domains.services.causes import CAUSES, intervention_points
from causaltrace_domains.services.dictionary import DATA_DICTIONARY
from causaltrace_domains.services.evidence import ServicesEvidence
from causaltrace_domains.services.scm import build_nodes, build_panel, pool_sizes

LABEL_KPIS = ("requests", "errors", "hits", "queue_depth")
DEFAULTS = {"start": "2026-03-02T00:00", "days": 3}


class ServicesDomain(Domain):
    """A shop's backend: 11 services x 3 regions x 15-minute buckets, 9 root causes."""

    name = "services"

    def build_scm(self) -> SCM:
        cfg = {**DEFAULTS, **self.config}
        panel = build_panel(str(cfg["start"]), int(cfg["days"]))
        n = panel.n_time
        points = intervention_points((n - 12, n - 5))
        return SCM(build_nodes(panel), panel, points, name="services")

    def background(self, rng: np.random.Generator) -> Background:
        return render.sample_background(self.scm.panel, pool_sizes(), rng)

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
        changes = []
        for each in (draw, *also):
            changes += render.cause_changes(each, panel, world, CAUSES[each.point].change, rng)
        tables = {
            "service_metrics": render.service_metrics(panel, world),
            "saturation": render.saturation(panel, world),
            "cache_metrics": render.cache_metrics(panel, world),
            "queue_metrics": render.queue_metrics(panel, world),
            "call_graph": render.call_graph(),
            "change_log": render.change_log(panel, background, changes),
        }
        tables["data_dictionary"] = pd.DataFrame(
            [(t, c, d) for t, cols in DATA_DICTIONARY.items() for c, d in cols.items()],
            columns=["table_name", "column_name", "description"],
        )
        return tables

    def data_dictionary(self) -> dict[str, dict[str, str]]:
        return DATA_DICTIONARY

    def task_prompt(self, tables: Mapping[str, pd.DataFrame]) -> str:
        alert = shown_alert(self.alert_readings(tables))
        text = alert_text(alert, self.scm.panel.time.values.astype("datetime64[m]"))
        return task_prompt(text, {k: len(v) for k, v in tables.items()}, self.concurrent)

    def alert_readings(self, tables: Mapping[str, pd.DataFrame]):
        return monitor_readings(tables)

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
        """The system-level value of ``kpi`` per bucket (for plots)."""
        if kpi == "error_rate":
            return world["errors"].sum(axis=0) / np.maximum(world["requests"].sum(axis=0), 1)
        if kpi in ("latency_p99_ms", "queue_depth"):
            return world[kpi].max(axis=0)
        return world[kpi].sum(axis=0).astype(np.float64)

    def kpi_totals(self, world: World, mask: np.ndarray, onset: int) -> dict[str, float]:
        out = {k: float(world[k][mask][:, onset:].sum()) for k in LABEL_KPIS}
        out["latency_p99_ms"] = float(world["latency_p99_ms"][mask][:, onset:].mean())
        out["cpu_pct"] = float(world["cpu_pct"][mask][:, onset:].mean())
        return out
