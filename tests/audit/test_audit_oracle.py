"""The audit's oracle (causaltrace/episodes/oracle.py) on the example shop: it finds strong causes
with their exact slice, prefers the slice that matches over its parent or child, falls to the
no-signal answer on pure noise, and reaches a high ceiling on a generated dataset.

Tolerances are binomial: with k of n required, a solver whose true rate is p fails the test
with probability P(Bin(n, p) < k); the numbers are given at each assertion. Seeds are fixed, so
a run is deterministic; the margins say how far a regression must go before a test fails.
"""

from __future__ import annotations

from collections import Counter

import pytest
from _audit_support import NoSignalExample, episode

from causaltrace import InterventionDraw, Slice, Window
from causaltrace.audit import OracleSolver, posterior_margin
from causaltrace.audit.data import AuditDataset
from causaltrace.datasets.generation import Job, run
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace.model.slices import parse_slice

N = 20


@pytest.fixture(scope="module")
def domain():
    return NoSignalExample({})


@pytest.fixture(scope="module")
def oracle(domain):
    return OracleSolver(domain)


@pytest.mark.parametrize(
    "cause, sl",
    [
        ("TRAFFIC_DROP", ""),
        ("CHECKOUT_BUG", "channel=search"),
        ("TRACKING_LOSS", "region=north"),
        ("CHECKOUT_BUG", "channel=search&region=north"),  # 2D: not its 1D parents
    ],
)
def test_strong_cause_and_exact_slice(domain, oracle, cause, sl):
    # Strength 0.6 to 0.8 moves these slices by 10+ standard errors. 18 of 20 required: a
    # solver right 95% of the time fails with P(Bin(20, .95) < 18) = 0.075, one right 70% of
    # the time passes with P(Bin(20, .7) >= 18) = 0.035.
    strength = 0.8 if "&" in sl else 0.6
    got = Counter()
    for seed in range(N):
        top = oracle.answer(episode(domain, cause, seed, strength, sl).tables)
        got[(top.cause, top.slice)] += 1
    assert got[(cause, sl or None)] >= 18, got.most_common(4)


def test_pure_noise_maps_to_no_signal(domain, oracle):
    # No cause at all: every hypothesis is noise. The scan threshold holds the family-wise rate
    # of a false find near 5%; 26 of 30 required: P(Bin(30, .05) > 4) = 0.016, and a solver
    # that cried wolf 30% of the time would pass with P(Bin(30, .3) <= 4) = 0.03.
    got = Counter()
    margins = []
    for seed in range(30):
        ranked = oracle.rank(episode(domain, "NO_ANOMALY", seed).tables)
        got[ranked[0].cause] += 1
        margins.append(posterior_margin(ranked))
    assert got["NO_ANOMALY"] >= 26, got
    assert all(0.0 <= m <= 1.0 for m in margins)


def test_ranking_is_a_posterior(domain, oracle):
    ranked = oracle.rank(episode(domain, "CHECKOUT_BUG", 3, 0.6, "channel=search").tables)
    total = sum(h.posterior for h in ranked)
    assert total == pytest.approx(1.0)
    assert [h.posterior for h in ranked] == sorted((h.posterior for h in ranked), reverse=True)
    # every candidate slice of every signal cause, plus the no-signal hypothesis
    assert len(ranked) == sum(oracle.n_slices.values()) + 1
    assert ranked[0].posterior > 0.9 and posterior_margin(ranked) > 0.8


@pytest.mark.slow
def test_ceiling_on_a_generated_dataset(tmp_path):
    # 40 episodes of the example shop drawn from its prior and accepted by the verifier. The
    # oracle was measured at 0.9 FullAttr@1 on 60 such episodes; 30 of 40 required: a solver
    # right 90% of the time fails with P(Bin(40, .9) < 30) = 0.002.
    job = Job.from_config(
        {
            "out_dir": str(tmp_path / "ds"),
            "domain": {"name": "example"},
            "dataset": {
                "name": "ex",
                "split": "ex",
                "seed": 3,
                "n_episodes": 40,
                "shard_size": 20,
                "composition": {"kind": "prior"},
            },
            "verifier": {},
        }
    )
    run(job, 0, 1, False)
    data = AuditDataset(tmp_path / "ds", {"name": "example"}, tmp_path / "cache")
    oracle = OracleSolver(data.domain)
    full = 0
    for ep in data:
        top = oracle.answer(ep.tables())
        truth = parse_slice(ep.label["slice"]).canonical() or None
        full += top.cause == ep.label["cause"] and top.slice == truth
    assert len(data) == 40
    assert full >= 30, full
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.parquet"))


def test_answer_set_names_two_causes_where_the_tables_show_two(domain, oracle):
    """The oracle's set answer reads the number of causes from the evidence: a strong checkout
    bug with a strong tracking loss elsewhere is two findings; either alone is one. 17 of 20
    required for each: a solver right 95% of the time fails with P(Bin(20, .95) < 17) = 0.016;
    one that guessed the count (a coin) passes with P(Bin(20, .5) >= 17) = 0.0013."""
    scm = domain.scm
    onset = scm.panel.n_time - 10
    bug = InterventionDraw("CHECKOUT_BUG", Slice.of(channel="search"), 0.6, Window(onset=onset))
    loss = InterventionDraw("TRACKING_LOSS", Slice.of(region="north"), 0.6, Window(onset=onset))
    pairs = singles = 0
    for seed in range(N):
        spec = EpisodeSpec(
            f"p-{seed}", "audit-set", seed, 11, "CHECKOUT_BUG", None, 0, ("TRACKING_LOSS",)
        )
        both = build_episode(domain, spec, draw=bug, also=(loss,))
        got = {(h.cause, h.slice) for h in oracle.answer_set(both.tables)}
        pairs += got == {("CHECKOUT_BUG", "channel=search"), ("TRACKING_LOSS", "region=north")}
        alone = oracle.answer_set(
            episode(domain, "CHECKOUT_BUG", seed, 0.6, "channel=search").tables
        )
        singles += [(h.cause, h.slice) for h in alone] == [("CHECKOUT_BUG", "channel=search")]
    assert pairs >= 17 and singles >= 17, (pairs, singles)


@pytest.fixture(scope="module")
def ads():
    from causaltrace import load_domain

    return load_domain("ads")


@pytest.mark.slow
def test_a_slice_stops_where_every_footprint_stops(ads):
    """Bots on one geo (ads' INVALID_TRAFFIC, the default configuration): the bot rate rises on
    every placement there, but CTR, its second footprint, clearly rises only where bots are a
    large share of the clicks (display). The rest of the geo still moves in invalid clicks, so
    the oracle answers the geo, not geo and display (on the tiers of 2026-12-02 it had
    answered the 2D child in 7 of 9 such episodes). Strength 10, the middle of the prior's
    5-25: the geo's rest then shows invalid clicks at tens of standard errors. What is tested
    is the slice: an episode's background may hold a larger account-wide move that the
    oracle rightly reads first (no alert gate here), so the cause itself is asked of half."""
    oracle = OracleSolver(ads)
    answers = [
        oracle.answer(episode(ads, "INVALID_TRAFFIC", seed, 10.0, "geo=us_west", back=7).tables)
        for seed in range(6)
    ]
    named = [a.slice for a in answers if a.cause == "INVALID_TRAFFIC"]
    assert len(named) >= 3 and set(named) == {"geo=us_west"}, answers
