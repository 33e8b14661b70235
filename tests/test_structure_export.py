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

from causaltrace.cli import main
from causaltrace.domain import load_domain
from causaltrace.structure_export import world_seeds

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
    assert list(do.columns) == [*obs.columns, "regime"]
    assert set(do["regime"]) == {REGIME}
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
    assert graph["regimes"][0]["do"] == {"node": "orders", "value": 5.0}
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
