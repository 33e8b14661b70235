"""``services_gcm``: a DoWhy gcm baseline for the services domain, through the engine's export.

What a causal-inference toolkit gets without an SRE's playbook. The agent

1. reads, through the python tool only, every service's observed metrics (requests, errors,
   p50 and p99 latency, CPU and steal, memory, active and pending connections, a cache's hits,
   the queue's consumers and depth) in each region an alert names, at the monitor's buckets:
   the last 8, and the same times of day on the 2 days before (one call per region, log1p);
2. takes its gcm model from the engine's export of the services SCM,
   ``to_gcm(scm, mode="fit", nodes=<the observed metrics>, coordinates=("service", "region"))``
   (:mod:`causaltrace.interop.dowhy_gcm`): a row is one service in one region at one bucket;
   the graph is the latent projection of the declared graph onto the observed metrics (requests
   -> errors and hits, queue depth -> latency quantiles; every other dependence runs through
   unobserved nodes) plus the service and region as parents of every metric; every metric has
   an unobserved parent in the SCM, so each gets a learned additive-noise mechanism (gradient
   boosting over its parents and coordinates);
3. fits the model on the baseline buckets (``gcm.fit``) and reads each metric's mechanism
   noise (``estimate_noise``: what its parents and its service do not explain) in the last 8
   buckets against the baseline, per service and region: the shift of the mean noise in units
   of its standard error (the baseline noise's spread, times sqrt(1/16 + 1/8));
4. names the cause from the (metric, service) whose mechanism moved most, by a rule read off the
   cause descriptions (requests: a surge; hits: a cache; errors and memory: a deploy; pending or
   active connections: a pool; steal: a neighbour; CPU of a database: its replica; latency of a
   dependency: the dependency; the queue's depth and consumers: its consumers), or NO_ANOMALY
   when nothing moves beyond ``Z_MIN``.

No oracle access: it sees the prompt and tool outputs only. Its weakness is the export's: a row
is one service, so a fault that travels the call graph (a slow database makes its callers
slow) shows as a change of every caller's own mechanism, and the largest need not be the root.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from causaltrace.agents import Agent, last_json_object

SERVICES = (
    "frontend",
    "catalog",
    "cart",
    "checkout",
    "product_cache",
    "session_cache",
    "catalog_db",
    "orders_db",
    "search_index",
    "payments_api",
    "order_queue",
)
REGIONS = ("us_east", "us_west", "eu_west")
KIND = {
    **dict.fromkeys(("frontend", "catalog", "cart", "checkout"), "app"),
    **dict.fromkeys(("product_cache", "session_cache"), "cache"),
    **dict.fromkeys(("catalog_db", "orders_db"), "database"),
    "search_index": "search",
    "payments_api": "external",
    "order_queue": "queue",
}
# Observed SCM node -> (table, column); hits, consumers and depth are 0 where the table has no
# row (the SCM's value for a service that is not a cache or the queue).
COLUMNS = {
    "requests": ("service_metrics", "requests"),
    "errors": ("service_metrics", "errors"),
    "latency_p50_ms": ("service_metrics", "latency_p50_ms"),
    "latency_p99_ms": ("service_metrics", "latency_p99_ms"),
    "cpu_pct": ("saturation", "cpu_pct"),
    "cpu_steal_pct": ("saturation", "cpu_steal_pct"),
    "memory_pct": ("saturation", "memory_pct"),
    "connections_active": ("saturation", "connections_active"),
    "connections_pending": ("saturation", "connections_pending"),
    "hits": ("cache_metrics", "hits"),
    "consumers": ("queue_metrics", "consumers"),
    "queue_depth": ("queue_metrics", "depth"),
}
RECENT, DAYS_BACK = 8, 2  # the monitor's window and its baseline days
Z_MIN = 6.0  # a mechanism shift below 6 standard errors is noise: NO_ANOMALY
_ALERT = re.compile(
    r"ALERT: (request rate|error rate|p99 latency|queue depth) of (\w+) in (\w+) is"
)


def _rows_code(region: str) -> str:
    """Python for the sandbox: per service of ``region``, each metric at the 24 buckets (the
    last 8 after the same times 2 and 1 days before), as round(100 * log1p(value))."""
    return (
        "import json, numpy as np, pandas as pd\n"
        f"R = {region!r}\n"
        "tables = {'service_metrics': (service_metrics, 'service'),\n"
        "          'saturation': (saturation, 'service'),\n"
        "          'cache_metrics': (cache_metrics, 'cache'),\n"
        "          'queue_metrics': (queue_metrics, 'queue')}\n"
        "last = pd.to_datetime(service_metrics['ts']).max()\n"
        f"recent = [last - pd.Timedelta(minutes=15 * k) for k in range({RECENT - 1}, -1, -1)]\n"
        "stamps = [t - pd.Timedelta(days=d) for d in "
        f"range({DAYS_BACK}, 0, -1) for t in recent] + recent\n"
        "wide = {}\n"
        "for name, (t, key) in tables.items():\n"
        "    t = t[t['region'] == R].assign(ts=pd.to_datetime(t['ts']))\n"
        "    wide[name] = t.set_index([key, 'ts']).sort_index()\n"
        f"columns = {COLUMNS!r}\n"
        "out = {}\n"
        f"for s in {list(SERVICES)!r}:\n"
        "    row = {}\n"
        "    for node, (name, col) in columns.items():\n"
        "        w = wide[name]\n"
        "        if s in w.index.get_level_values(0):\n"
        "            v = w.loc[s][col].reindex(stamps).fillna(0).to_numpy(float)\n"
        "        else:\n"
        "            v = np.zeros(len(stamps))\n"
        "        row[node] = np.rint(100 * np.log1p(np.maximum(v, 0))).astype(int).tolist()\n"
        "    out[s] = row\n"
        "print(json.dumps(out, separators=(',', ':')))\n"
    )


@lru_cache(maxsize=1)
def _services_scm():
    from causaltrace import load_domain

    return load_domain("services").scm


def exported_model():
    """A fresh gcm model of the observed metrics from the engine's export of the services SCM
    (``gcm.fit`` fits its mechanisms in place): latent projection, service and region as
    coordinates, learned additive-noise mechanisms."""
    from dowhy import gcm

    from causaltrace.interop.dowhy_gcm import to_gcm

    return to_gcm(
        _services_scm(),
        mode="fit",
        nodes=tuple(COLUMNS),
        coordinates=("service", "region"),
        learner=lambda: gcm.ml.create_hist_gradient_boost_regressor(
            random_state=0, min_samples_leaf=5
        ),
    )


def frames(data: dict[str, dict[str, dict[str, list[int]]]]):
    """(baseline rows, recent rows) of ``data`` (region -> service -> metric -> 24 values) as
    the export's data: service and region codes, then the metrics in log1p."""
    import pandas as pd

    rows = []
    for region, services in data.items():
        for service, metrics in services.items():
            n = len(next(iter(metrics.values())))
            for i in range(n):
                row = {
                    "service": float(SERVICES.index(service)),
                    "region": float(REGIONS.index(region)),
                    "recent": i >= n - RECENT,
                }
                row.update({m: metrics[m][i] / 100.0 for m in COLUMNS})
                rows.append(row)
    frame = pd.DataFrame(rows)
    old = frame[~frame["recent"]].drop(columns="recent").reset_index(drop=True)
    new = frame[frame["recent"]].drop(columns="recent").reset_index(drop=True)
    return old, new


def mechanism_shifts(old, new) -> list[tuple[float, str, str, str]]:
    """(z, metric, service, region) per metric and cell: the shift of the mean mechanism noise
    of the recent buckets against the baseline's, in standard errors, with the model fitted on
    the baseline (sorted, largest |z| first)."""
    from dowhy import gcm
    from dowhy.graph import get_ordered_predecessors
    from threadpoolctl import threadpool_limits

    model = exported_model()
    # One thread: gradient boosting's OpenMP threads on a loaded machine cost more than they
    # give on a few hundred rows, and episodes already run concurrently.
    with threadpool_limits(1):
        gcm.fit(model, old)
    out = []
    for metric in COLUMNS:
        mechanism = model.causal_mechanism(metric)
        parents = get_ordered_predecessors(model.graph, metric)
        noise = {
            key: mechanism.estimate_noise(f[metric].to_numpy(), f[parents].to_numpy()).ravel()
            for key, f in (("old", old), ("new", new))
        }
        for (s, r), part in old.groupby(["service", "region"]):
            mask_new = (new["service"] == s) & (new["region"] == r)
            values = np.r_[part[metric].to_numpy(), new.loc[mask_new, metric].to_numpy()]
            if np.ptp(values) == 0:
                # The same value in all 24 buckets (a cache's hits outside the caches, pending
                # connections without a wait): nothing moved, whatever its prediction did.
                continue
            before, after = noise["old"][part.index], noise["new"][mask_new.to_numpy()]
            if len(before) < 2 or not len(after):
                continue
            # Values are log1p to 0.01: a spread below that is rounding.
            sd = max(float(np.std(before, ddof=1)), 0.01)
            se = sd * np.sqrt(1 / len(before) + 1 / len(after))
            z = (float(np.mean(after)) - float(np.mean(before))) / se
            out.append((z, metric, SERVICES[int(s)], REGIONS[int(r)]))
    out.sort(key=lambda x: -abs(x[0]))
    return out


def cause_of(metric: str, service: str, z: float) -> str:
    """The cause a changed mechanism of ``metric`` at ``service`` points to (the cause
    descriptions)."""
    kind = KIND[service]
    if metric == "requests":
        return "CACHE_NODE_LOSS" if kind == "database" and z > 0 else "TRAFFIC_SURGE"
    if metric == "hits":
        return "CACHE_NODE_LOSS"
    if metric in ("consumers", "queue_depth") or kind == "queue":
        return "QUEUE_CONSUMER_STALL"
    if metric in ("errors", "memory_pct"):
        return "BAD_DEPLOY"
    if metric in ("connections_pending", "connections_active"):
        return "CONFIG_CHANGE"
    if metric == "cpu_steal_pct":
        return "NOISY_NEIGHBOUR"
    if metric == "cpu_pct":
        return "DB_REPLICA_SATURATION" if kind == "database" else "NOISY_NEIGHBOUR"
    # Latency: a dependency's own is a slow dependency; a cache's, its nodes; ours, a neighbour.
    if kind in ("database", "search", "external"):
        return "SLOW_DEPENDENCY"
    return "CACHE_NODE_LOSS" if kind == "cache" else "NOISY_NEIGHBOUR"


def answer(shifts: list[tuple[float, str, str, str]]) -> tuple[str, str, str]:
    """(cause, slice, reason) from the ranked mechanism shifts."""
    if not shifts or abs(shifts[0][0]) < Z_MIN:
        return "NO_ANOMALY", "", f"No mechanism moved beyond {Z_MIN} standard errors."
    z, metric, service, region = shifts[0]
    cause = cause_of(metric, service, z)
    if cause == "TRAFFIC_SURGE":
        slice_text = ""
    elif cause == "SLOW_DEPENDENCY":
        pulled = {r for *_, r in shifts}
        moved = {r for zz, m, s, r in shifts if m == metric and s == service and abs(zz) >= Z_MIN}
        whole = len(pulled) > 1 and moved == pulled  # slow in every region read
        slice_text = f"service={service}" if whole else f"service={service}&region={region}"
    else:
        slice_text = f"service={service}&region={region}"
    reason = (
        f"The largest mechanism change is {metric} of {service} in {region} ({z:+.1f} standard "
        f"errors of its noise): {cause}."
    )
    return cause, slice_text, reason


class ServicesGcmAgent(Agent):
    """DoWhy gcm's fitted model of the observed metrics, from the engine's export, and a
    per-cell scan of its mechanisms' noise (module docstring)."""

    name = "services_gcm"

    async def _call(self, session, name: str, arguments: dict, thought: str) -> str:
        results = await session.turn([{"name": name, "arguments": arguments}], thought)
        return results[0].observation

    async def run(self, session, rng: np.random.Generator) -> None:
        from dowhy.gcm.util.general import set_random_seed

        regions = []
        for _, _, region in _ALERT.findall(session.prompt):
            if region in REGIONS and region not in regions:
                regions.append(region)
        data = {}
        for region in regions:
            if session.done:
                return
            data[region] = last_json_object(
                await self._call(
                    session,
                    "python",
                    {"code": _rows_code(region)},
                    f"Every service's metrics in {region}: the last {RECENT} buckets and the "
                    f"same times on the {DAYS_BACK} days before.",
                )
            )
        if session.done:
            return
        if not data:
            cause, slice_text, reason = "NO_ANOMALY", "", "No alert names a region."
        else:
            # Seeded per episode from its rng; no await in between (concurrent episodes).
            set_random_seed(int(rng.integers(2**31 - 1)))
            cause, slice_text, reason = answer(mechanism_shifts(*frames(data)))
        await self._call(session, "submit", {"root_cause": cause, "slice": slice_text}, reason)
