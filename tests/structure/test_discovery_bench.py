"""Issue 28: the discovery benchmark's core (bench/discovery_truth.py) on the example domain.

The oracle rows must score SHD 0 (the learners reach their targets when the tests are exact),
and a learner's row must carry the scores of what it found.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "discovery_truth.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("discovery_truth_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_oracles_score_zero_and_ges_finds_the_chain(bench):
    case = bench.build_case("example+latent", 600, 0)
    assert case.constant == ("tag_fire_rate",) and "tag_fire_rate" not in case.columns
    rows = {r.method: r for r in bench.evaluate(case, ["pc-oracle", "fci-oracle", "ges-bic"])}
    assert rows["pc-oracle"].scores.shd == rows["fci-oracle"].scores.shd == 0
    assert rows["pc-oracle"].sid == "0..4"  # demand --- visits: 2 DAGs, the truth's and one more
    assert rows["ges-bic"].target == "cpdag" and rows["ges-bic"].true_edges == 4
    assert "| example+latent | pc-oracle | cpdag |" in bench.table(list(rows.values()))


def test_confounded_columns_are_scored_against_the_pag(bench):
    case = bench.build_case("services@frontend", 40, 0)
    assert case.truth.cpdag is None
    (row,) = bench.evaluate(case, ["pc-oracle", "fci-oracle"])  # no CPDAG: PC's oracle skipped
    assert row.method == "fci-oracle" and row.scores.shd == 0
