import math

import numpy as np
import pytest
from _scoring_data import example_space, label, synthetic_labels, synthetic_space

from causaltrace.scoring import (
    EpisodeOutcome,
    ac_at_k,
    avg_at_k,
    bootstrap_ci,
    compute_metrics,
    confusion_matrix,
    parse_answer,
    plot_confusion,
    score_episodes,
)
from causaltrace.scoring.metrics import bootstrap_means


def outcome(space, lab, answer, **counts):
    return EpisodeOutcome.from_parsed(parse_answer(answer, space, **counts), lab)


@pytest.fixture
def outcomes():
    space, labs = synthetic_space(), synthetic_labels()
    return [
        # no-signal: right, then wrong
        outcome(space, labs["none"], {"root_cause": "NO_ANOMALY"}, tool_calls=2, turns=3),
        outcome(space, labs["none"], {"root_cause": "CAMPAIGN_PAUSED"}, tool_calls=4, turns=5),
        # 1D: exact; 1D: right cause, wrong slice
        outcome(space, labs["budget_1d"], {"root_cause": "BUDGET_CAP", "slice": "device=mobile"}),
        outcome(space, labs["bid"], {"root_cause": "BID_DROP", "slice": "geo=us"}),
        # 2D: exact slice but wrong cause (ranked second); 2D: unparsed
        outcome(
            space,
            labs["budget_2d"],
            {
                "root_cause": "BID_DROP",
                "slice": "device=tablet&geo=eu",
                "ranking": ["BID_DROP", "BUDGET_CAP"],
            },
        ),
        outcome(space, labs["browser_2d"], "I don't know", tool_calls=6, turns=1),
    ]


def test_point_metrics_by_hand(outcomes):
    report = compute_metrics(outcomes, n_boot=200, seed=1)
    m = {k: v.value for k, v in report.overall.items()}
    assert m["full_attr_at_1"] == pytest.approx(2 / 6)
    assert m["cause_accuracy"] == pytest.approx(3 / 6)
    assert m["slice_exact_1d"] == pytest.approx(1 / 2)  # budget_1d exact, bid wrong
    assert m["slice_exact_2d"] == pytest.approx(1 / 2)  # budget_2d exact (wrong cause), unparsed
    assert m["no_signal_accuracy"] == pytest.approx(1 / 2)
    assert m["parse_rate"] == pytest.approx(5 / 6)
    assert m["mean_tool_calls"] == pytest.approx((2 + 4 + 6) / 6)
    assert m["ac@1"] == pytest.approx(3 / 6)
    assert m["ac@3"] == pytest.approx(4 / 6)  # budget_2d's truth is ranked 2nd
    assert m["avg@3"] == pytest.approx((3 + (3 - 2 + 1) / 3) / 6)
    assert "mean_reward" not in m
    assert report.overall["slice_exact_1d"].n == 2
    assert set(report.by_group) == {"no-signal", "delivery", "measurement"}
    assert report.by_group["delivery"]["full_attr_at_1"].value == pytest.approx(1 / 3)
    assert "no_signal_accuracy" not in report.by_group["delivery"]
    assert report.by_cause["NO_ANOMALY"]["cause_accuracy"].value == pytest.approx(0.5)
    for mv in report.overall.values():
        assert mv.low - 1e-12 <= mv.value <= mv.high + 1e-12 or math.isclose(mv.low, mv.high)


def test_confusion_matrix(outcomes):
    frame = confusion_matrix(outcomes, causes=synthetic_space().causes)
    assert list(frame.index) == list(synthetic_space().causes)
    assert frame.loc["NO_ANOMALY", "NO_ANOMALY"] == 1
    assert frame.loc["NO_ANOMALY", "CAMPAIGN_PAUSED"] == 1
    assert frame.loc["BROWSER_TRACKING", "(no answer)"] == 1
    assert int(frame.to_numpy().sum()) == len(outcomes)
    norm = confusion_matrix(outcomes, normalize=True)
    np.testing.assert_allclose(norm.sum(axis=1).to_numpy(), 1.0)


def test_plot_confusion_writes_a_png(outcomes, tmp_path):
    path = plot_confusion(confusion_matrix(outcomes), tmp_path / "confusion.png")
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_report_frames(outcomes):
    report = compute_metrics(outcomes, n_boot=100)
    frame = report.to_frame()
    assert list(frame.columns) == ["scope", "key", "metric", "value", "ci_low", "ci_high", "n"]
    assert set(frame["scope"]) == {"overall", "group", "cause"}
    assert report.to_dict()["overall"]["parse_rate"]["n"] == 6


def test_bootstrap_is_seeded_and_vectorized():
    x = np.random.default_rng(0).random((50, 3))
    a = bootstrap_means(x, n_boot=300, rng=7)
    b = bootstrap_means(x, n_boot=300, rng=7, max_block=1000)  # blocks of 20 replicates
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    c = bootstrap_means(x, n_boot=300, rng=8)
    assert not np.array_equal(a[1], c[1])
    constant = bootstrap_ci(np.ones(20))
    assert (constant.value, constant.low, constant.high) == (1.0, 1.0, 1.0)
    empty = bootstrap_ci(np.array([np.nan, np.nan]))
    assert empty.n == 0 and math.isnan(empty.value)


def test_bootstrap_width_matches_the_normal_approximation():
    # For a mean of n = 400 Bernoulli draws the bootstrap distribution is close to normal with
    # sd s / sqrt(n), so the 95% interval's width is close to 2 * 1.96 * s / sqrt(n). With
    # B = 4000 replicates the Monte Carlo sd of each 2.5% / 97.5% percentile is about
    # sqrt(0.025 * 0.975 / B) / phi(1.96) = 0.042 sd, i.e. ~1.5% of the width; binomial
    # discreteness adds ~1/(n * width) ~ 3%. A 10% tolerance is > 3 combined sds.
    rng = np.random.default_rng(2024)
    x = (rng.random(400) < 0.3).astype(float)
    ci = bootstrap_ci(x, n_boot=4000, seed=11)
    expected = 2 * 1.959964 * x.std() / math.sqrt(len(x))
    assert ci.high - ci.low == pytest.approx(expected, rel=0.10)
    assert ci.low < x.mean() < ci.high


def test_bootstrap_coverage():
    # 300 data sets of n = 100 Bernoulli(0.3): the share of 95% intervals holding 0.3 has
    # sd sqrt(0.95 * 0.05 / 300) = 0.0126; the percentile bootstrap undercovers slightly at
    # this n (~0.93-0.95). Accept [0.89, 0.99], about 4 sds around 0.94.
    rng = np.random.default_rng(99)
    hits = 0
    for i in range(300):
        x = (rng.random(100) < 0.3).astype(float)
        ci = bootstrap_ci(x, n_boot=500, seed=i)
        hits += ci.low <= 0.3 <= ci.high
    assert 0.89 <= hits / 300 <= 0.99


def test_ac_at_k_rcaeval():
    rankings = [["A", "B", "C"], ["B", "A"], ["C"], []]
    truths = ["A", "A", "A", "A"]
    assert ac_at_k(rankings, truths, 1) == 0.25
    assert ac_at_k(rankings, truths, 2) == 0.5
    assert avg_at_k(rankings, truths, 2) == pytest.approx((0.25 + 0.5) / 2)
    with pytest.raises(ValueError):
        ac_at_k(rankings, truths[:2], 1)


def test_score_episodes_end_to_end():
    space = example_space()
    labs = [
        label("CHECKOUT_BUG", "channel=search", "segment-specific", episode_id="e1"),
        label("TRAFFIC_DROP", None, "site-wide", episode_id="e2"),
    ]
    outputs = ['{"root_cause": "CHECKOUT_BUG", "slice": "channel=search"}', "unsure"]
    outs = score_episodes(zip(outputs, labs), space)
    assert [o.reward for o in outs] == [pytest.approx(1.0), 0.0]
    report = compute_metrics(outs, causes=space.causes, n_boot=50)
    assert report.overall["mean_reward"].value == pytest.approx(0.5)
    assert list(report.confusion.index) == list(space.causes)
