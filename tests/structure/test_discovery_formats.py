"""Issue 28: the discovery formats (BIF, DCDI / gCastle regime arrays, perturbation table) and
``causaltrace export-discovery``: each read back by the library that consumes it (pgmpy's
``BIFReader``, DCDI's own parsing of its csv files) or by the documented reader."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.cli import main
from causaltrace.errors import CausalTraceError
from causaltrace.structure.formats import (
    NON_TARGETING,
    bif_text,
    cpt,
    discretize,
    perturbation_labels,
    read_regime_arrays,
    write_perturbation_table,
    write_regime_arrays,
)
from causaltrace.structure.graphs import scm_truth
from causaltrace.structure.samples import sample_units

REGIMES = ["do:visits=100", "shift:orders=1@channel=email", "do:visits=100,shift:orders=1"]


@pytest.fixture(scope="module")
def scm():
    return load_domain("example").scm


@pytest.fixture(scope="module")
def rows(scm):
    return sample_units(scm, 150, seed=0, columns=scm.order, regimes=REGIMES)


# -- discretization ------------------------------------------------------------------------


def test_discretize_rule():
    # Few distinct values: kept as states.
    d = discretize(np.array([3, 1, 1, 2, 3.0]), "x", bins=5)
    assert d.kind == "values" and d.cuts == (1.0, 2.0, 3.0)
    assert d.codes(np.array([1, 2, 3.0])).tolist() == [0, 1, 2] and d.describe(2) == "= 3.0"
    with pytest.raises(CausalTraceError, match="not one of its states"):
        d.codes(np.array([4.0]))
    # 1..100 in 4 bins: cuts at the 1/4, 2/4, 3/4 quantiles (linear: 25.75, 50.5, 75.25),
    # intervals (c[s-1], c[s]]: 25 values each.
    d = discretize(np.arange(1, 101.0), "x", bins=4)
    assert d.kind == "quantiles" and d.cuts == (25.75, 50.5, 75.25)
    assert np.bincount(d.codes(np.arange(1, 101.0))).tolist() == [25, 25, 25, 25]
    assert (d.describe(0), d.describe(1), d.describe(3)) == ("<= 25.75", "(25.75, 50.5]", "> 75.25")
    # Ties: 60 zeros then 1..40. The j/5 quantiles are 0, 0, 0.4 (between x[59] = 0 and
    # x[60] = 1 at position 59.4) and 20.2 (position 79.2); unique cuts 0, 0.4, 20.2. No value
    # lies in (0, 0.4], so cut 0.4 is dropped: states (-inf, 0], (0, 20.2], (20.2, inf).
    x = np.concatenate([np.zeros(60), np.arange(1, 41.0)])
    d = discretize(x, "x", bins=5)
    assert d.cuts == pytest.approx((0.0, 20.2))
    assert np.bincount(d.codes(x)).tolist() == [60, 20, 20]
    with pytest.raises(CausalTraceError, match="bins must be >= 2"):
        discretize(x, "x", bins=1)


def test_cpt_laplace_hand_checked():
    # child [0, 0, 1] given parent [0, 0, 1], 2 states each, alpha 1:
    # P(. | p=0) = (2+1, 0+1) / 4; P(. | p=1) = (0+1, 1+1) / 3.
    table = cpt(np.array([0, 0, 1]), [np.array([0, 0, 1])], [2, 2], alpha=1.0)
    np.testing.assert_allclose(table, [[0.75, 0.25], [1 / 3, 2 / 3]])


# -- BIF -----------------------------------------------------------------------------------


def read_bif(text: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgmpy.readwrite import BIFReader

        return BIFReader(string=text, include_properties=True).get_model()


def test_bif_read_back_by_pgmpy_has_the_true_structure(scm, rows):
    # Every node a column: the DAG with tag_fire_rate (constant in this unit) isolated, so
    # orders has two parents and tag_fire_rate one state.
    truth = scm_truth(scm, rows.columns, constant=rows.constant)
    dag = truth.column_dag
    obs = rows.rows(0)
    disc = [discretize(obs[:, k], c, 4) for k, c in enumerate(rows.columns)]
    model = read_bif(bif_text(dag, obs, disc, name="example"))
    assert set(model.nodes()) == set(dag.nodes)
    assert set(model.edges()) == set(dag.to_networkx().edges())
    assert sorted(model.get_parents("orders")) == ["checkout_rate", "visits"]
    assert model.check_model()
    for d in disc:
        assert model.get_cpds(d.column).state_names[d.column] == list(d.states)
        assert model.nodes[d.column]["cuts"] == " ".join(repr(c) for c in d.cuts)
    # The CPT pgmpy reads is the Laplace estimate: orders | visits, checkout_rate.
    col = {c: i for i, c in enumerate(rows.columns)}
    codes = {c: disc[col[c]].codes(obs[:, col[c]]) for c in ("visits", "checkout_rate", "orders")}
    cards = [disc[col[c]].n_states for c in ("visits", "checkout_rate", "orders")]
    want = cpt(codes["orders"], [codes["visits"], codes["checkout_rate"]], cards)
    got = model.get_cpds("orders")
    assert got.variables == ["orders", "visits", "checkout_rate"]
    np.testing.assert_allclose(got.values, np.moveaxis(want, -1, 0), rtol=1e-15)


def test_bif_refuses_a_graph_that_is_not_a_dag(scm, rows):
    truth = scm_truth(scm, rows.columns, constant=rows.constant)
    obs = rows.rows(0)
    disc = [discretize(obs[:, k], c) for k, c in enumerate(rows.columns)]
    with pytest.raises(Exception, match="must be a DAG"):
        bif_text(truth.pag, obs, disc)


# -- regime arrays -------------------------------------------------------------------------


def test_regime_arrays_read_back_equal(tmp_path, scm, rows):
    truth = scm_truth(scm, rows.columns, constant=rows.constant)
    written = write_regime_arrays(tmp_path, rows, truth)
    assert {p.name for p in written} >= {"data_interv1.npy", "regime1.csv", "intervention1.csv"}
    back = read_regime_arrays(tmp_path)
    assert back.columns == rows.columns
    np.testing.assert_array_equal(back.data, rows.data)
    np.testing.assert_array_equal(back.regime, rows.regime)
    np.testing.assert_array_equal(back.targets, rows.targets)
    assert back.mag == truth.mag and back.pag == truth.pag
    np.testing.assert_array_equal(back.dag, truth.mag.to_adjacency())
    np.testing.assert_array_equal(back.cpdag, truth.cpdag.to_adjacency())
    assert [r["name"] for r in back.regimes] == list(rows.regime_names)
    assert back.regimes[3]["unit_targets"] == ["visits", "orders"]
    # DCDI's loader reads the csv files with np.genfromtxt and csv.reader: same answers.
    dcdi_regimes = np.genfromtxt(tmp_path / "regime1.csv", delimiter=",").astype(int)
    np.testing.assert_array_equal(dcdi_regimes, rows.regime)
    with open(tmp_path / "intervention1.csv") as f:
        masks = [[int(x) for x in row] for row in csv.reader(f)]
    visits, orders = rows.columns.index("visits"), rows.columns.index("orders")
    assert masks[0] == [] and masks[150] == [visits] and masks[450] == [visits, orders]
    np.testing.assert_array_equal(np.load(tmp_path / "data1.npy"), rows.rows(0))


def test_regime_arrays_reader_catches_disagreeing_files(tmp_path, rows):
    write_regime_arrays(tmp_path, rows)
    assert read_regime_arrays(tmp_path).dag is None  # no truth given: no graph files
    mask = np.load(tmp_path / "targets1.npy")
    mask[0, 0] = 1
    np.save(tmp_path / "targets1.npy", mask)
    with pytest.raises(CausalTraceError, match="mask differ"):
        read_regime_arrays(tmp_path)
    (tmp_path / "regime1.csv").unlink()
    with pytest.raises(CausalTraceError, match=r"missing regime1\.csv"):
        read_regime_arrays(tmp_path)


# -- perturbation table ----------------------------------------------------------------------


def test_perturbation_table(tmp_path, rows):
    path = write_perturbation_table(tmp_path / "p.csv", rows)
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["perturbation", "regime", *rows.columns]
    assert len(frame) == len(rows.data)
    np.testing.assert_array_equal(frame[list(rows.columns)].to_numpy(), rows.data)  # exact
    by_regime = frame.groupby("regime", sort=False)["perturbation"].unique()
    assert by_regime["observational"].tolist() == [NON_TARGETING]
    assert by_regime["do_visits_100"].tolist() == ["visits"]
    # The email slice misses the unit's cell (search): those rows were not perturbed.
    assert by_regime["shift_orders_1_at_channel-email"].tolist() == [NON_TARGETING]
    assert by_regime["do_visits_100__shift_orders_1"].tolist() == ["visits+orders"]
    assert perturbation_labels(rows)[0] == NON_TARGETING


# -- the command ---------------------------------------------------------------------------


def test_export_discovery_command(tmp_path, capsys):
    out = tmp_path / "ex"
    args = ["export-discovery", "--domain", "example", "--out", str(out), "--samples", "60"]
    assert main([*args, "--regime", "do:visits=100", "--bins", "3"]) == 0
    names = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
    assert {"truth.json", "network.bif", "perturbations.csv", "regimes.json"} <= names
    model = read_bif((out / "network.bif").read_text())
    assert set(model.edges()) == {("visits", "orders"), ("orders", "tracked_orders")}
    back = read_regime_arrays(out / "regimes")
    assert back.data.shape == (120, 3) and back.pag.edge_strings() == (
        "visits o-o orders",
        "orders o-o tracked_orders",
    )
    before = (out / "truth.json").read_bytes()
    assert main([*args, "--regime", "do:visits=100", "--bins", "3"]) == 0
    assert (out / "truth.json").read_bytes() == before  # same arguments, same bytes
    # Services' observed columns are confounded: no BIF, and the README says why.
    svc = tmp_path / "svc"
    assert (
        main(["export-discovery", "--domain", "services", "--out", str(svc), "--samples", "20"])
        == 0
    )
    assert not (svc / "network.bif").exists()
    assert "<->" in (svc / "README.txt").read_text()


def test_export_discovery_bad_cell_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "bad"
    argv = ["export-discovery", "--domain", "example", "--out", str(out), "--cell", "channel=email"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches 4 cells" in err
    assert not out.exists()  # checked before anything is written
