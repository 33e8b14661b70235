"""The services gcm baseline's pieces: its sandbox code, the export it fits, and its scan on
synthetic tables with a planted fault (no episode, no tools)."""

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dowhy", reason="the dowhy extra: pip install -e '.[dowhy]'")

from dowhy.gcm.util.general import set_random_seed
from threadpoolctl import threadpool_limits

from causaltrace_domains.services.agents_gcm import (
    COLUMNS,
    SERVICES,
    Z_MIN,
    _rows_code,
    answer,
    cause_of,
    exported_model,
    frames,
    mechanism_shifts,
)


def _tables(planted: str, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Three days of 15-minute buckets in one region; in the last 8 buckets the planted metric
    of the planted service moves (``errors`` of cart x5, or ``hits`` of product_cache x0.6)."""
    rng = np.random.default_rng(seed)
    ts = pd.date_range("2026-03-02", periods=288, freq="15min")
    rows, cache, queue = [], [], []
    for k, service in enumerate(SERVICES):
        level = 1000.0 * (k + 1)
        requests = rng.poisson(level, 288).astype(float)
        errors = rng.poisson(0.002 * level, 288).astype(float)
        hits = rng.binomial(requests.astype(int), 0.9).astype(float)
        if planted == "errors" and service == "cart":
            errors[-8:] = rng.poisson(0.01 * level, 8)
        if planted == "hits" and service == "product_cache":
            hits[-8:] = rng.binomial(requests[-8:].astype(int), 0.55)
        for t in range(288):
            rows.append(
                {
                    "ts": ts[t],
                    "service": service,
                    "region": "us_east",
                    "requests": requests[t],
                    "errors": errors[t],
                    "latency_p50_ms": 20 + k + rng.normal(0, 0.5),
                    "latency_p99_ms": 80 + 3 * k + rng.normal(0, 2),
                    "cpu_pct": 30 + rng.normal(0, 1.2),
                    "cpu_steal_pct": 0.8 * np.exp(rng.normal(0, 0.5)),
                    "memory_pct": 50 + rng.normal(0, 0.8),
                    "connections_active": 5 * np.exp(rng.normal(0, 0.03)),
                    "connections_pending": 0.0,
                }
            )
            if service.endswith("_cache"):
                cache.append({"ts": ts[t], "cache": service, "region": "us_east", "hits": hits[t]})
            if service == "order_queue":
                queue.append(
                    {
                        "ts": ts[t],
                        "queue": service,
                        "region": "us_east",
                        "consumers": 1.5 * np.exp(rng.normal(0, 0.03)),
                        "depth": 12 * np.exp(rng.normal(0, 0.05)),
                    }
                )
    frame = pd.DataFrame(rows)
    sm = ["ts", "service", "region", "requests", "errors", "latency_p50_ms", "latency_p99_ms"]
    return {
        "service_metrics": frame[sm],
        "saturation": frame.drop(columns=sm[3:]),
        "cache_metrics": pd.DataFrame(cache),
        "queue_metrics": pd.DataFrame(queue),
    }


def _run_sandbox_code(tables) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_rows_code("us_east"), dict(tables))
    return json.loads(out.getvalue())


def test_the_export_is_the_observed_projection():
    model = exported_model()
    # Every observed metric has a hidden parent in the SCM: all learned, with the service and
    # region as parents, and the few directed paths between metrics through hidden nodes.
    assert set(model.graph.nodes) == {*COLUMNS, "service", "region"}
    assert {("requests", "errors"), ("requests", "hits")} <= set(model.graph.edges())
    assert all(model.graph.has_edge("service", m) for m in COLUMNS)


@pytest.mark.parametrize(
    "planted,cause,slice_text",
    [
        ("errors", "BAD_DEPLOY", "service=cart&region=us_east"),
        ("hits", "CACHE_NODE_LOSS", "service=product_cache&region=us_east"),
    ],
)
def test_planted_fault_is_found(planted, cause, slice_text):
    data = _run_sandbox_code(_tables(planted))
    assert set(data) == set(SERVICES)
    assert len(data["cart"]["errors"]) == 24 and data["cart"]["hits"] == [0] * 24
    set_random_seed(0)
    with threadpool_limits(1):
        shifts = mechanism_shifts(*frames({"us_east": data}))
    # Five times cart's 6 errors per bucket moves log1p by about 1.5 against a per-bucket
    # spread of about 0.38 (a Poisson(6) in log1p): 1.5 / (0.38 * sqrt(1/16 + 1/8)) = 9
    # standard errors; a cut of the hit rate from 0.9 to 0.55 is 0.5 in log1p against a spread
    # at the 0.01 rounding. Both beyond Z_MIN = 6, and first.
    assert abs(shifts[0][0]) > Z_MIN
    got, got_slice, _ = answer(shifts)
    assert (got, got_slice) == (cause, slice_text)


def test_cause_rule_reads_the_descriptions():
    assert cause_of("cpu_steal_pct", "orders_db", 9.0) == "NOISY_NEIGHBOUR"
    assert cause_of("cpu_pct", "orders_db", 9.0) == "DB_REPLICA_SATURATION"
    assert cause_of("latency_p99_ms", "payments_api", 9.0) == "SLOW_DEPENDENCY"
    assert cause_of("connections_pending", "cart", 9.0) == "CONFIG_CHANGE"
    assert cause_of("queue_depth", "order_queue", 9.0) == "QUEUE_CONSUMER_STALL"
    assert answer([(2.0, "errors", "cart", "us_east")])[0] == "NO_ANOMALY"
