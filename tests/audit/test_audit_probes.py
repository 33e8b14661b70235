"""The audit's probes, graph distinguishability and channel measurement, each checked on a case
where the answer is known: features independent of the cause by construction (the leakage
probe must stay at chance), a planted leak and a planted one-feature rule (the probes must find
them), two example causes whose observed reach is computed by hand, and a planted duplicate
cause the graph cannot tell apart."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _audit_support import episode

from causaltrace import SCM, InterventionPoint, InterventionPrior, Scale
from causaltrace.audit import distinguish as dist
from causaltrace.audit.channels import channel_audit
from causaltrace.audit.probes import leakage_probe, shortcut_probe
from causaltrace.audit.stats import wilson
from causaltrace_domains.example import ExampleDomain

CAUSES = np.array(["A", "B", "C", "D"])


def noise_features(n: int, k: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = CAUSES[np.arange(n) % len(CAUSES)]  # balanced: chance is 0.25
    X = pd.DataFrame(rng.normal(size=(n, k)), columns=[f"f{i}" for i in range(k)])
    return X, y


def test_wilson_interval():
    p, lo, hi = wilson(5, 10)
    assert (
        p == 0.5 and lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    )
    assert wilson(0, 10)[1] == 0.0 and wilson(10, 10)[2] == pytest.approx(1.0)


def test_leakage_probe_is_at_chance_on_independent_features():
    # 240 episodes, features drawn independently of the cause: the out-of-fold accuracy is
    # Bin(240, 0.25)/240, whose Wilson lower bound exceeds 0.25 with probability about 2.5%
    # (one-sided 95% interval); the seed is fixed.
    X, y = noise_features(240, 8, seed=1)
    probe = leakage_probe(X, y, np.random.default_rng(0))
    assert probe.chance == 0.25
    assert probe.verdict == "no leak detected"
    assert probe.low <= 0.25 <= probe.high or probe.accuracy < 0.25


@pytest.mark.parametrize("probe", [leakage_probe, shortcut_probe])
def test_probes_hold_out_only_causes_seen_twice(probe):
    """A small audit (``episodes=4``) has causes seen once, which a stratified split can
    neither train on and test nor stratify (scikit-learn raised ValueError): those episodes
    are left out of the probe, and with fewer than 4 left it is not run."""
    clean_X, clean_y = noise_features(40, 4, seed=2)
    extra = pd.DataFrame(
        np.ones((3, clean_X.shape[1])), columns=clean_X.columns, index=[40, 41, 42]
    )
    X = pd.concat([clean_X, extra])
    y = np.concatenate([clean_y, ["E", "F", "G"]])
    result = probe(X, y, np.random.default_rng(0))
    assert result.n == 40  # the three causes seen once are not scored
    # ... and the rest is probed exactly as without them (same draws, same folds).
    assert result == probe(clean_X, clean_y, np.random.default_rng(0))
    tiny = probe(X.iloc[-4:], y[-4:], np.random.default_rng(0))  # D, E, F, G: once each
    assert tiny.n == 0 and np.isnan(tiny.accuracy)


def test_leakage_probe_detects_a_planted_leak():
    # The same noise plus one feature equal to the cause's index: a forest reads it exactly.
    X, y = noise_features(240, 8, seed=1)
    X["planted"] = pd.Series(y).map({c: i for i, c in enumerate(CAUSES)}).to_numpy(float)
    probe = leakage_probe(X, y, np.random.default_rng(0))
    assert probe.verdict == "leak"
    assert probe.accuracy > 0.95 and probe.low > 0.9
    assert probe.top_features[0][0] == "planted"


def test_shortcut_probe_finds_a_planted_rule():
    # Cause C exactly when f3 > 1, else the cause is uniform over A, B, D: the best depth-2
    # tree gets C right (about 16% of episodes) and guesses among the rest at 1/3, so about
    # 0.16 + 0.84/3 = 0.44; its rule must split on f3 at about 1.
    X, y = noise_features(300, 5, seed=2)
    rng = np.random.default_rng(5)
    y = np.where(X["f3"] > 1.0, "C", rng.choice(["A", "B", "D"], size=len(X)))
    probe = shortcut_probe(X, y, np.random.default_rng(0), depth=1)
    assert probe.top_features[0][0] == "f3"
    split = float(re.search(r"f3 <=\s*(-?[\d.]+)", probe.rule).group(1))
    assert abs(split - 1.0) < 0.1, probe.rule
    # A planted deterministic rule on two features: the tree must be (nearly) perfect.
    y2 = np.where(X["f0"] > 0, np.where(X["f1"] > 0, "A", "B"), "C")
    exact = shortcut_probe(X, y2, np.random.default_rng(0), depth=2)
    assert exact.accuracy > 0.95 and exact.above_chance
    assert {name for name, _ in exact.top_features} == {"f0", "f1"}


# -- graph distinguishability -------------------------------------------------------------------
def test_graph_reach_of_the_example_causes():
    # By hand, from domains/example/domain.py: observed nodes are visits, orders and
    # tracked_orders (demand, checkout_rate and tag_fire_rate are latent).
    #   TRAFFIC_DROP scales demand        -> visits -> orders -> tracked_orders
    #   CHECKOUT_BUG scales checkout_rate ->           orders -> tracked_orders
    #   TRACKING_LOSS scales tag_fire_rate ->                    tracked_orders
    # so CHECKOUT_BUG and TRACKING_LOSS are separated by orders alone, TRAFFIC_DROP and
    # CHECKOUT_BUG by visits alone.
    scm = ExampleDomain({}).scm
    reach = dist.graph_reach(scm, np.random.default_rng(0))
    assert reach["TRAFFIC_DROP"].targets == ("demand",)
    assert reach["TRAFFIC_DROP"].reached == {"visits", "orders", "tracked_orders"}
    assert reach["CHECKOUT_BUG"].reached == {"orders", "tracked_orders"}
    assert reach["TRACKING_LOSS"].reached == {"tracked_orders"}
    sep = dist.separating_nodes(reach)
    assert sep[("CHECKOUT_BUG", "TRACKING_LOSS")] == {"orders"}
    assert sep[("TRAFFIC_DROP", "CHECKOUT_BUG")] == {"visits"}
    assert dist.indistinguishable_pairs(reach) == []
    matrix = dist.separation_matrix(reach)
    assert matrix.loc["TRAFFIC_DROP", "TRACKING_LOSS"] == 2


class TwinCauseExample(ExampleDomain):
    """The shop plus TAG_GLITCH, which intervenes on the same node as TRACKING_LOSS."""

    def build_scm(self) -> SCM:
        base = super().build_scm()
        twin = InterventionPoint(
            "TAG_GLITCH",
            lambda d: [Scale("tag_fire_rate", where=d.slice, window=d.window, factor=0.5)],
            InterventionPrior(onset=(-10, -10)),
        )
        points = [*base.intervention_points.values(), twin]
        return SCM(list(base.nodes.values()), base.panel, points, name=base.name)


def test_graph_flags_causes_on_the_same_node():
    reach = dist.graph_reach(TwinCauseExample({}).scm, np.random.default_rng(0))
    assert dist.indistinguishable_pairs(reach) == [("TRACKING_LOSS", "TAG_GLITCH")]


def test_confusion_counts():
    conf = dist.confusion(["A", "A", "B"], ["A", "B", "B"], ["A", "B"])
    assert conf.loc["A", "A"] == 1 and conf.loc["A", "B"] == 1 and conf.loc["B", "B"] == 1


# -- channels -------------------------------------------------------------------------------------
def test_channels_measured_from_labels():
    # TRAFFIC_DROP removes visits everywhere (volume, rates untouched); CHECKOUT_BUG cuts orders
    # per visit in its slice (rate; visits unchanged, so neither volume nor mix moves).
    domain = ExampleDomain({})
    labels = [
        episode(domain, cause, seed, 0.5, sl).label.to_dict()
        for cause, sl in (("TRAFFIC_DROP", ""), ("CHECKOUT_BUG", "channel=search"))
        for seed in range(3)
    ]
    audit = channel_audit(domain, labels, threshold=0.05)
    assert audit is not None
    assert audit.moved.loc["TRAFFIC_DROP", "volume"] == 1.0
    assert audit.moved.loc["TRAFFIC_DROP", "rate"] == 0.0
    assert audit.moved.loc["CHECKOUT_BUG", "rate"] == 1.0
    assert audit.moved.loc["CHECKOUT_BUG", "volume"] == 0.0
    assert audit.moved.loc["CHECKOUT_BUG", "mix"] == 0.0
    # the example declares no channels: every channel that moves is flagged as undeclared
    assert ("CHECKOUT_BUG", "rate", "not declared, moved in 100%") in audit.flags()
