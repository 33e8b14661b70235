"""Issue 14 (structure learning): ``causaltrace export-structure`` on the example domain.

The export writes sampled worlds (observational, and under whole-panel ``--do``) flattened to
one row per (world, cell, time step), and the true graph as JSON, GML and an adjacency CSV.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from causaltrace import Do
from causaltrace.cli import main
from causaltrace.episodes.domain import load_domain
from causaltrace.model.slices import Slice
from causaltrace.structure.export import world_seeds

SAMPLES = 30
DO_ORDERS = "orders=5"
REGIME = "do_orders_5"


@pytest.fixture(scope="module")
def scm():
    return load_domain("example").scm


def export(out: Path, *args: str) -> int:
    return main(["export-structure", "--domain", "example", "--out", str(out), *args])


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export")
    assert export(out, "--samples", str(SAMPLES), "--seed", "7", "--do", DO_ORDERS) == 0
    return out


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_files_and_columns(exported, scm):
    assert sorted(files(exported)) == [
        "README.txt",
        "adjacency.csv",
        "graph.gml",
        "graph.json",
        f"interventional/{REGIME}.parquet",
        "observational.parquet",
    ]
    key = ["world", "channel", "region", "time"]
    obs = pd.read_parquet(exported / "observational.parquet")
    assert list(obs.columns) == [*key, "visits", "orders", "tracked_orders"]
    assert list(obs.columns[len(key) :]) == list(scm.observed)  # latent nodes left out
    assert len(obs) == SAMPLES * scm.panel.size
    assert not obs.duplicated(key).any()
    do = pd.read_parquet(exported / "interventional" / f"{REGIME}.parquet")
    assert list(do.columns) == [*obs.columns, "regime", "intervened"]
    assert set(do["regime"]) == {REGIME}
    assert set(do["intervened"]) == {"orders"}  # a whole-panel do touches every row
    # Row order: world, then cell, then time; world 0 is the sample of its spawned seed.
    world0 = scm.sample(world_seeds(7, 0, SAMPLES)[0])
    first = obs[obs["world"] == 0]
    np.testing.assert_array_equal(first["visits"].to_numpy(), world0["visits"].ravel())
    assert list(first["time"].iloc[: scm.panel.n_time]) == list(
        pd.to_datetime(scm.panel.time.values)
    )
    readme = (exported / "README.txt").read_text()
    assert "docs/causal-structure.md" in readme and "GIVEN the panel coordinates" in readme


def test_include_latent_adds_the_latent_columns(tmp_path, scm):
    assert export(tmp_path, "--samples", "2", "--include-latent") == 0
    obs = pd.read_parquet(tmp_path / "observational.parquet")
    assert list(obs.columns[4:]) == list(scm.order)
    assert set(scm.latent) <= set(obs.columns)


def test_graph_files_match_the_scm_graph(exported, scm):
    truth = set(scm.graph.edges())
    adj = pd.read_csv(exported / "adjacency.csv", index_col=0)
    assert list(adj.index) == list(adj.columns) == list(scm.order)
    assert set(adj.to_numpy().ravel()) <= {0, 1}
    assert {(u, v) for u in adj.index for v in adj.columns if adj.loc[u, v] == 1} == truth
    graph = json.loads((exported / "graph.json").read_text())
    assert {tuple(e) for e in graph["edges"]} == truth
    assert {n["name"]: n["observed"] for n in graph["nodes"]} == {
        n: scm.nodes[n].observed for n in scm.order
    }
    (regime,) = graph["regimes"]
    assert regime["targets"] == ["orders"] and regime["spec"] == "do:orders=5"
    (iv,) = regime["interventions"]
    assert (iv["kind"], iv["node"], iv["value"], iv["hard"]) == ("do", "orders", 5.0, True)
    assert iv["whole_panel"] and iv["mutilated"] and iv["slice"] == {}
    assert iv["cells"] == list(range(scm.panel.n_cells))
    assert {tuple(e) for e in graph["regimes"][0]["cut_edges"]} == {
        ("visits", "orders"),
        ("checkout_rate", "orders"),
    }
    gml = nx.read_gml(exported / "graph.gml")
    assert set(gml.edges()) == truth
    assert {n: bool(d["observed"]) for n, d in gml.nodes(data=True)} == {
        n: scm.nodes[n].observed for n in scm.order
    }


def test_with_panel_adds_the_coordinates(tmp_path, scm):
    assert export(tmp_path, "--samples", "1", "--with-panel") == 0
    truth = set(scm.graph_with_panel().edges())
    adj = pd.read_csv(tmp_path / "adjacency.csv", index_col=0)
    assert list(adj.index) == [*scm.panel_coordinates, *scm.order]
    assert {(u, v) for u in adj.index for v in adj.columns if adj.loc[u, v] == 1} == truth
    graph = json.loads((tmp_path / "graph.json").read_text())
    assert {tuple(e) for e in graph["edges"]} == truth
    assert [n["name"] for n in graph["nodes"] if n["coordinate"]] == list(scm.panel_coordinates)
    assert set(nx.read_gml(tmp_path / "graph.gml").edges()) == truth


def test_do_sets_the_node_and_leaves_non_descendants_alone(exported, scm):
    obs = pd.read_parquet(exported / "observational.parquet")
    do = pd.read_parquet(exported / "interventional" / f"{REGIME}.parquet")
    assert (do["orders"] == 5).all()
    assert (do["tracked_orders"] <= 5).all()  # a descendant follows
    assert "visits" not in scm.descendants("orders")
    # visits is not a descendant of orders: its distribution under do(orders=5) is unchanged.
    # Both regimes cover the same units (cell x time step), SAMPLES independent worlds each,
    # and unit means differ a lot (channel, weekday), so the standard error of the difference
    # of the overall means is computed within units: per unit, var(mean_obs - mean_do) =
    # s2_obs/n + s2_do/n (independent worlds, independent regimes); the overall difference is
    # the average over the U units, so its SE is sqrt(sum of those variances) / U. A pooled SE
    # would count the between-unit spread, which the shared design cancels, and be far looser.
    # Tolerance: 5 SE (a false alarm about once in 1.7 million).
    key = ["channel", "region", "time"]
    a = obs.groupby(key, observed=True)["visits"].agg(["mean", "var"])
    b = do.groupby(key, observed=True)["visits"].agg(["mean", "var"]).loc[a.index]
    diff = float((a["mean"] - b["mean"]).mean())
    se = float(np.sqrt((a["var"] / SAMPLES + b["var"] / SAMPLES).sum()) / len(a))
    assert se > 0
    assert abs(diff) < 5 * se, (diff, se)
    # The regimes use independent noise: the test is not passing because the draws are shared.
    assert not np.array_equal(obs["visits"].to_numpy(), do["visits"].to_numpy())


def test_same_arguments_same_bytes(tmp_path):
    args = ("--samples", "3", "--seed", "11", "--do", "visits=100", "--do", "orders=2")
    assert export(tmp_path / "a", *args) == 0
    assert export(tmp_path / "b", *args) == 0
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert len(a) == 7 and a == b
    assert export(tmp_path / "c", "--samples", "3", "--seed", "12") == 0
    other = files(tmp_path / "c")
    assert other["observational.parquet"] != a["observational.parquet"]


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (("--do", "nosuchnode=1"), "unknown node 'nosuchnode'"),
        (("--do", "visits"), "expected node=value"),
        (("--do", "=3"), "expected node=value"),
        (("--do", "visits=lots"), "value 'lots' is not a number"),
        (("--do", "visits=1.5"), "integer"),
        (("--samples", "0"), "--samples must be >= 1"),
    ],
)
def test_bad_arguments_one_line_exit_2(tmp_path, capsys, args, culprit):
    out = tmp_path / "out"
    assert export(out, *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("causaltrace: error: "), err
    assert culprit in err
    assert not out.exists()  # checked before anything is written


def test_bad_domain_through_the_real_command(tmp_path):
    argv = ["export-structure", "--domain", "nope", "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [sys.executable, "-m", "causaltrace", *argv, "--do", "visits=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown domain 'nope'" in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


# -- regimes: sliced, soft and multi-node interventions -----------------------------------------
# The engine shares noise across worlds with the same seed, so a regime's frame built with the
# observational worlds' seeds (regime_frame's own code path, as the export calls it) differs from
# the observational frame only where the interventions and their descendants say: outside a
# slice, and for non-descendants everywhere, the values are equal bit for bit.


def _pair(scm, spec: str, samples: int = 6, seed: int = 3):
    from causaltrace.structure.export import parse_regime, regime_frame

    regime = parse_regime(spec, scm)
    seeds = world_seeds(seed, 0, samples)
    obs = regime_frame(scm, scm.order, seeds)  # every node, latent ones too
    return regime, obs, regime_frame(scm, scm.order, seeds, regime)


def test_sliced_do_sets_only_the_slice(scm):
    regime, obs, do = _pair(scm, "do:orders=5@channel=search")
    inside = (do["channel"] == "search").to_numpy()
    assert 0 < inside.sum() < len(do)
    assert (do.loc[inside, "orders"] == 5).all()
    assert (do.loc[inside, "tracked_orders"] <= 5).all()  # a descendant follows
    for node in scm.order:  # outside the slice nothing moves
        np.testing.assert_array_equal(do.loc[~inside, node], obs.loc[~inside, node])
    for node in ("demand", "visits", "checkout_rate"):  # non-descendants of orders
        np.testing.assert_array_equal(do[node], obs[node])
    assert set(do["intervened"]) == {"orders", ""}
    assert ((do["intervened"] == "orders").to_numpy() == inside).all()
    assert regime.name == "do_orders_5_at_channel-search"


def test_shift_is_soft_and_adds_the_delta(scm):
    _, obs, sh = _pair(scm, "shift:visits=100")
    # visits is an integer count: rint(x + 100) = x + 100 exactly.
    np.testing.assert_array_equal(sh["visits"] - obs["visits"], 100)
    np.testing.assert_array_equal(sh["demand"], obs["demand"])  # an ancestor: unchanged
    np.testing.assert_array_equal(sh["checkout_rate"], obs["checkout_rate"])
    # orders ~ Binomial(visits, rate) by inverse CDF of a shared uniform: the extra orders have
    # mean 100 * rate per row. The coupled difference of two binomials has variance at most
    # that of Binomial(100, rate) <= 100 * rate; averaged over N rows its SE is at most
    # sqrt(mean(100 * rate) / N). Tolerance 5 SE (a false alarm about once in 1.7 million).
    extra = (sh["orders"] - obs["orders"]).to_numpy(float)
    expected = 100 * obs["checkout_rate"].to_numpy()
    se = np.sqrt(expected.mean() / len(extra))
    assert abs(extra.mean() - expected.mean()) < 5 * se, (extra.mean(), expected.mean(), se)
    assert (extra >= 0).all()  # inverse CDF is monotone in the trials


def test_sliced_scale_multiplies_inside_only(scm):
    _, obs, sc = _pair(scm, "scale:visits=0.5@region=north")
    inside = (sc["region"] == "north").to_numpy()
    np.testing.assert_array_equal(
        sc.loc[inside, "visits"], np.rint(0.5 * obs.loc[inside, "visits"].to_numpy())
    )
    np.testing.assert_array_equal(sc.loc[~inside, "visits"], obs.loc[~inside, "visits"])
    np.testing.assert_array_equal(sc["demand"], obs["demand"])


def test_multi_node_regime(scm):
    regime, obs, mm = _pair(scm, "do:visits=100,shift:orders=1@channel=email")
    assert regime.targets == ("visits", "orders")
    assert (mm["visits"] == 100).all()
    email = (mm["channel"] == "email").to_numpy()
    assert set(mm.loc[email, "intervened"]) == {"visits,orders"}
    assert set(mm.loc[~email, "intervened"]) == {"visits"}
    # orders in email cells is Binomial(100, rate) + 1: at least 1; elsewhere it can be 0.
    assert (mm.loc[email, "orders"] >= 1).all()
    for node in ("demand", "checkout_rate", "tag_fire_rate"):  # non-descendants
        np.testing.assert_array_equal(mm[node], obs[node])


def test_regime_flags_files_and_metadata(tmp_path, scm):
    args = (
        "--samples",
        "2",
        "--shift",
        "visits=10",
        "--do",
        "orders=5@channel=search&region=north",
        "--regime",
        "do:visits=100,scale:orders=2@channel=email",
    )
    assert export(tmp_path, *args) == 0
    graph = json.loads((tmp_path / "graph.json").read_text())
    names = [r["name"] for r in graph["regimes"]]
    assert names == [
        "shift_visits_10",
        "do_orders_5_at_channel-search_region-north",
        "do_visits_100__scale_orders_2_at_channel-email",
    ]
    for r in graph["regimes"]:
        assert (tmp_path / r["file"]).is_file()
    shift, sliced, multi = graph["regimes"]
    assert shift["interventions"][0]["hard"] is False and shift["cut_edges"] == []
    (iv,) = sliced["interventions"]
    codes = {d: scm.panel.codes(d) for d in ("channel", "region")}
    want = np.flatnonzero((codes["channel"] == 0) & (codes["region"] == 0))
    assert iv["cells"] == want.tolist() and iv["n_cells"] == 1
    assert iv["slice"] == {"channel": "search", "region": "north"}
    assert not iv["whole_panel"] and not iv["mutilated"] and sliced["cut_edges"] == []
    assert multi["targets"] == ["visits", "orders"]
    assert [i["mutilated"] for i in multi["interventions"]] == [True, False]
    assert multi["cut_edges"] == [["demand", "visits"]]
    # Command-line order gives the seeds: regime k (1-based) uses spawn key k.
    sliced_rows = pd.read_parquet(tmp_path / sliced["file"])
    world0 = scm.simulate(
        [Do("orders", where=Slice.of(channel="search", region="north"), value=5.0)],
        seed=world_seeds(0, 2, 2)[0],
        counterfactual=False,
    ).factual
    np.testing.assert_array_equal(
        sliced_rows.loc[sliced_rows["world"] == 0, "orders"], world0["orders"].ravel()
    )
    readme = (tmp_path / "README.txt").read_text()
    assert "--regime do:orders=5@channel=search&region=north" in readme
    assert "visits shifted by 10 on every cell, every time step (soft)" in readme


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (("--shift", "visits=1@channel=nope"), "nope"),
        (("--scale", "visits=2@"), "empty slice"),
        (("--regime", "do:visits=1,shift:visits=2"), "given twice"),
        (("--regime", "push:visits=1"), "must start with one of do:, shift:, scale:"),
        (("--shift", "visits=inf"), "not finite"),
        (("--do", "orders=5", "--regime", "do:orders=5"), "the same regime is given twice"),
    ],
)
def test_bad_regimes_one_line_exit_2(tmp_path, capsys, args, culprit):
    out = tmp_path / "out"
    assert export(out, *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and culprit in err, err
    assert not out.exists()
