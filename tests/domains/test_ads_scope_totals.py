"""The monitor's scope totals are pandas' group sums by date and campaign, bit for bit: the
alert of every episode (and whether an attempt passes the explained-alert gate) depends on them,
so computing them faster must not move a single bit. Checked against pandas as installed, on
the default account over several seeds, with the rows in report order, shuffled, and with the
campaign as plain strings."""

import numpy as np
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.core.seeds import episode_streams
from causaltrace_domains.ads.alert import TOTALS, scope_totals


def pandas_scope_totals(perf_daily: pd.DataFrame) -> dict[str, pd.DataFrame]:
    frame = perf_daily[["date", "campaign", *TOTALS]]
    out = {"account": frame.groupby("date", sort=True)[list(TOTALS)].sum()}
    by_campaign = frame.groupby(["campaign", "date"], sort=True, observed=True)[list(TOTALS)].sum()
    for campaign, rows in by_campaign.groupby(level=0, observed=True, sort=False):
        out[f"campaign={campaign}"] = rows.droplevel(0)
    return out


@pytest.fixture(scope="module")
def domain():
    return load_domain("ads")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scope_totals_equal_pandas_group_sums(domain, seed):
    scm = domain.scm
    streams = episode_streams(seed, "scope", seed, 0)
    cause = list(scm.intervention_points)[seed * 4]
    draw = scm.point(cause).sample(streams.draw, scm.panel)
    world = scm.simulate(scm.interventions_for(draw), seed=streams.noise).factual
    report = domain.monitor_tables(world)["perf_daily"]
    rng = np.random.default_rng(seed)
    frames = {
        "report order": report,
        "shuffled": report.iloc[rng.permutation(len(report))],
        "plain strings": report.astype({"campaign": object}),
    }
    for name, frame in frames.items():
        ours, theirs = scope_totals(frame), pandas_scope_totals(frame)
        assert list(ours) == list(theirs), name
        for scope, daily in theirs.items():
            for column in TOTALS:
                expected = daily[column].to_numpy()
                got = np.asarray(ours[scope][column])
                # Exact: cost and conversion value are compensated sums in row order.
                assert got.dtype == expected.dtype and np.array_equal(got, expected), (
                    name,
                    scope,
                    column,
                )
