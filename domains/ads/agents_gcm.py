"""``gcm``: a DoWhy gcm distribution-change baseline for the ads domain.

What a causal-inference toolkit gets without an analyst's playbook. The agent

1. reads, through the python tool only, the daily sums of the report columns for the alert's
   scope (the account, or the campaign the alert names) and for each of its 1D slices, over the
   last 7 days and the 4 weeks before (the monitor's windows);
2. takes its gcm model from the engine's export of the ads SCM,
   ``to_gcm(scm, mode="fit", nodes=<the visible columns>, coordinates=False)``
   (:mod:`causaltrace.interop.dowhy_gcm`): the graph is the latent projection of the declared
   graph onto impressions, clicks, invalid clicks, cost, conversions, conversion value and,
   where the site report has the dimension, backend orders and sessions (an edge u -> v when a
   directed path from u reaches v through unobserved nodes only), the same for every episode;
   every visible column has an unobserved parent in the SCM, so the export gives each one a
   learned mechanism (additive noise with a linear regressor, here on log1p daily sums, so
   that a rate change is a shift of one node's noise) and each parentless one an empirical
   distribution: the fast fixed assignment (``auto`` quality GOOD is too slow);
3. per candidate slice, fits that model on the baseline weeks and attributes the change of the
   alerted KPI's mean between the two windows to the nodes whose mechanisms changed
   (``gcm.distribution_change``, Shapley over mechanisms);
4. ranks (slice, node) by the attribution in units of the KPI's baseline noise (its daily sd
   times sqrt(1/28 + 1/7)), and maps the top one to a cause by the node and the slice's
   dimension (the domain's cause descriptions: volume by creative is a disapproval, CTR down is
   fatigue, backend orders are the landing page, conversions given backend orders are
   tracking...), or submits NO_ANOMALY when nothing reaches 3 noise units.

No oracle access: it sees the prompt and tool outputs only. gcm's samplers use numpy's global
state; each episode seeds it from its own ``rng``, runs its attribution without yielding to the
event loop, keeps gcm's Shapley evaluation in-process (``n_jobs=1``) and builds its graphs in
sorted node order (not in string-hash order, nor the export's), so answers do not depend on concurrency, joblib
workers or the process.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import networkx as nx
import numpy as np

from causaltrace.agents import Agent
from causaltrace_domains.ads.agents import _alerted_kpi, _Tools

DIMS = ("campaign", "creative", "placement", "device", "browser_os", "geo", "audience")
SITE_DIMS = ("campaign", "device", "browser_os", "geo")  # the site report's grain
PERF_COLUMNS = ("impressions", "clicks", "invalid_clicks", "cost", "conversions")
PERF_COLUMNS += ("conversion_value",)
# Visible column -> SCM node.
SITE_COLUMNS = {"backend_orders": "real_conversions", "sessions": "sessions"}
BASELINE_DAYS, RECENT_DAYS = 28, 7
# The alerted KPI -> the node whose mean change is attributed (ratios: their moving count).
TARGET = {
    "conversions": "conversions",
    "conversion_value": "conversion_value",
    "clicks": "clicks",
    "cost": "cost",
    "cost_per_conversion": "conversions",
    "roas": "conversion_value",
}
Z_MIN = 3.0  # attributions below 3 baseline-noise units are noise: NO_ANOMALY


@lru_cache(maxsize=1)
def _ads_scm():
    from causaltrace import load_domain

    return load_domain("ads").scm


@lru_cache(maxsize=4)
def projected_graph(visible: frozenset[str]) -> nx.DiGraph:
    """The ads SCM's declared graph projected onto ``visible`` nodes (directed part: an edge
    u -> v when a directed path from u to v passes through unobserved nodes only), as the
    export draws it (:func:`causaltrace.interop.dowhy_gcm.projected_edges`)."""
    from causaltrace.interop.dowhy_gcm import projected_edges

    out = nx.DiGraph()
    # Sorted: a frozenset's order follows string hashing, which changes from process to
    # process, and gcm's node order decides which random draws go where.
    out.add_nodes_from(sorted(visible))
    out.add_edges_from(projected_edges(_ads_scm(), visible))
    return out


def exported_model(nodes: frozenset[str]):
    """The gcm model of ``nodes`` from the engine's export of the ads SCM (fresh: ``gcm``
    fits its mechanisms in place): the latent projection, learned linear additive-noise
    mechanisms, empirical roots, no panel coordinates (a row is a day of a slice's sums)."""
    from dowhy import gcm

    from causaltrace.interop.dowhy_gcm import to_gcm

    model = to_gcm(
        _ads_scm(),
        mode="fit",
        nodes=nodes,
        coordinates=False,
        learner=gcm.ml.create_linear_regressor,
    )
    # The graph in sorted order (the export's is the SCM's): gcm's node order decides which
    # random draws go where, and the agent's answers are kept those of its sorted graph.
    graph = nx.DiGraph()
    graph.add_nodes_from(sorted(model.graph.nodes))
    graph.add_edges_from(sorted(model.graph.edges))
    ordered = gcm.InvertibleStructuralCausalModel(graph)
    for node in graph.nodes:
        ordered.set_causal_mechanism(node, model.causal_mechanism(node))
    return ordered


def _series_code(scope: str | None, dim: str | None) -> str:
    """Python for the sandbox: per level of ``dim`` (or the scope as one level), the daily
    sums of the columns over the last 35 days as log1p rounded to 3 decimals (compact JSON)."""
    perf_filter = "" if scope is None else f"p = p[p['campaign'] == {scope!r}]\n"
    site_filter = "" if scope is None else f"s = s[s['utm_campaign'] == {scope!r}]\n"
    site_dim = "utm_campaign" if dim == "campaign" else dim
    with_site = dim is None or dim in SITE_DIMS
    return (
        "import json, numpy as np, pandas as pd\n"
        "p = perf_daily.assign(date=pd.to_datetime(perf_daily['date']))\n"
        "s = site_analytics_daily.assign(date=pd.to_datetime(site_analytics_daily['date']))\n"
        f"{perf_filter}{site_filter}"
        "last = p['date'].max()\n"
        "days = pd.date_range(last - pd.Timedelta(days=34), last)\n"
        f"pc, sc = {list(PERF_COLUMNS)!r}, {list(SITE_COLUMNS)!r}\n"
        "def daily(frame, cols):\n"
        "    d = frame.groupby('date')[cols].sum().reindex(days, fill_value=0)\n"
        "    return {c: np.round(np.log1p(d[c].to_numpy(float)), 3).tolist() for c in cols}\n"
        "out = {}\n"
        + (
            "out['*'] = daily(p, pc)\n" + ("out['*'].update(daily(s, sc))\n" if with_site else "")
            if dim is None
            else (
                f"for level, part in p.groupby({dim!r}, observed=True):\n"
                "    out[str(level)] = daily(part, pc)\n"
                + (
                    f"for level, part in s.groupby({site_dim!r}, observed=True):\n"
                    "    if str(level) in out: out[str(level)].update(daily(part, sc))\n"
                    if with_site
                    else ""
                )
            )
        )
        + "print(json.dumps(out, separators=(',', ':')))\n"
    )


def attribute(data: dict[str, list[float]], target: str) -> dict[str, float]:
    """gcm distribution change of ``target``'s mean, recent week against the 4 weeks before,
    over the projected graph of the columns in ``data`` (log1p daily sums)."""
    import pandas as pd
    from dowhy import gcm

    frame = pd.DataFrame({SITE_COLUMNS.get(c, c): v for c, v in data.items()})
    graph = projected_graph(frozenset(frame.columns))
    keep = nx.ancestors(graph, target) | {target}
    model = exported_model(frozenset(keep))
    graph = model.graph
    frame = frame[list(graph.nodes)]
    old, new = frame.iloc[:BASELINE_DAYS], frame.iloc[BASELINE_DAYS:]
    return gcm.distribution_change(
        model,
        old,
        new,
        target,
        num_samples=500,
        difference_estimation_func=lambda a, b: float(np.mean(b) - np.mean(a)),
        # In-process Shapley: gcm's default (n_jobs=-1) evaluates set functions in joblib
        # workers whose random state is not seeded, so answers would change from run to run
        # (and it would spawn processes on a shared machine).
        shapley_config=gcm.shapley.ShapleyConfig(n_jobs=1),
    )


def noise_unit(values: list[float]) -> float:
    """The baseline noise of a difference of window means: daily sd x sqrt(1/28 + 1/7)."""
    base = np.asarray(values[:BASELINE_DAYS], dtype=float)
    return float(base.std(ddof=1) * np.sqrt(1 / BASELINE_DAYS + 1 / RECENT_DAYS)) + 1e-3


def cause_of(node: str, dim: str | None, sign: float, cost_z: float) -> str:
    """The cause a changed mechanism at ``node`` on a slice of ``dim`` (None: the whole scope)
    points to, read off the domain's cause descriptions."""
    if dim is None or dim == "campaign":  # the whole account or campaign: campaign-wide
        if node == "cost" or cost_z >= Z_MIN:
            return "COMPETITIVE_PRESSURE"
        return "DEMAND_SHIFT" if node == "impressions" else "BUDGET_CAP"
    if node == "impressions":
        return {
            "creative": "AD_DISAPPROVAL",
            "placement": "PLACEMENT_SHIFT",
            "audience": "TARGETING_EXPANSION",
        }.get(dim, "BID_MODIFIER_CHANGE")
    if node in ("clicks", "sessions"):
        return "INVALID_TRAFFIC" if sign > 0 or dim == "placement" else "CREATIVE_FATIGUE"
    if node == "invalid_clicks":
        return "INVALID_TRAFFIC"
    if node == "cost":
        return "BID_MODIFIER_CHANGE"
    if node == "real_conversions":
        return "TARGETING_EXPANSION" if dim == "audience" else "LANDING_PAGE_BREAK"
    # conversions / conversion value: tracking where backend orders are in the graph.
    if dim in SITE_DIMS:
        return "TRACKING_OUTAGE"
    return {"audience": "TARGETING_EXPANSION", "placement": "INVALID_TRAFFIC"}.get(
        dim, "LANDING_PAGE_BREAK"
    )


NO_SLICE = {"BUDGET_CAP", "COMPETITIVE_PRESSURE", "DEMAND_SHIFT", "NO_ANOMALY"}


def rank(data: dict[str | None, dict[str, Any]], target: str) -> tuple[tuple | None, float]:
    """The (z, dim, level, node, attribution) of the largest attribution in noise units over
    every slice (``dim`` None: the whole scope), and the scope's cost change in noise units."""
    best: tuple | None = None
    cost_z = 0.0
    for dim, levels in data.items():
        for level, series in levels.items():
            if target not in series or max(series[target][:BASELINE_DAYS]) <= 0:
                continue
            unit = noise_unit(series[target])
            for node, value in attribute(series, target).items():
                z = abs(value) / unit
                if best is None or z > best[0]:
                    best = (z, dim, level, node, value)
            if dim is None:
                cost = series["cost"]
                change = np.mean(cost[BASELINE_DAYS:]) - np.mean(cost[:BASELINE_DAYS])
                cost_z = float(change / noise_unit(cost))
    return best, cost_z


class GcmAttributionAgent(Agent):
    """DoWhy gcm distribution change per slice over the visible graph (module docstring)."""

    name = "gcm"

    async def run(self, session, rng: np.random.Generator) -> None:
        from dowhy.gcm.util.general import set_random_seed

        tools = _Tools(session)
        kpi, campaign = _alerted_kpi(session.prompt)
        target = TARGET.get(kpi, "conversions")
        where = "the account" if campaign is None else f"campaign {campaign}"
        data: dict[str | None, dict[str, Any]] = {}
        for dim in (None, *DIMS):
            if dim == "campaign" and campaign is not None:
                continue  # one campaign in scope: no campaign slices
            if session.done:
                return
            data[dim] = await tools.python_json(
                _series_code(campaign, dim),
                f"Daily totals of every report column for {where}"
                + ("" if dim is None else f", by {dim}")
                + ": the last 7 days and the 4 weeks before.",
            )
        if session.done:
            return
        set_random_seed(int(rng.integers(2**31 - 1)))
        best, cost_z = rank(data, target)
        if best is None or best[0] < Z_MIN:
            await tools.submit(
                "NO_ANOMALY",
                "",
                "No mechanism change explains the alerted KPI beyond "
                f"{Z_MIN} noise units in any slice.",
            )
            return
        z, dim, level, node, value = best
        cause = cause_of(node, dim, value, cost_z)
        slice_text = "" if cause in NO_SLICE else f"{dim}={level}"
        await tools.submit(
            cause,
            slice_text,
            f"gcm distribution change of {target}: the largest attribution ({value:+.3f} in "
            f"log1p, {z:.1f} noise units) is {node}'s mechanism on "
            f"{slice_text or where}; {node} there points to {cause}.",
        )
