"""Difficulty knobs: priors narrowed as declared, the SNR band held on the visible tables, the
difficulty recorded in every label, bad knobs named."""

from __future__ import annotations

import math
import os
import re
from collections import Counter

import numpy as np
import pytest

from causaltrace import DomainError, Ramp, Step, load_domain
from causaltrace.datasets.generation import Job, run
from causaltrace.datasets.reading import load_labels, rebuild_episode
from causaltrace.episodes.difficulty import Difficulty, DifficultyError
from causaltrace.episodes.verify import VerifierConfig

SEEDS = (0, 1, 2)


def example(difficulty=None):
    return load_domain("example", {"name": "example", "difficulty": difficulty})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"snr": [3, 2]}, "difficulty.snr"),
        ({"strength": [0.5, 1.5]}, "difficulty.strength"),
        ({"onset": "late"}, "difficulty: onset must be a list of 2 values"),
        ({"profile": "zigzag"}, "difficulty.profile"),
        ({"two_d_share": 2}, "difficulty.two_d_share"),
        ({"snr_band": [1, 2]}, "unknown key(s) ['snr_band']"),
    ],
)
def test_bad_knobs_are_named(bad, message):
    with pytest.raises(DifficultyError, match=re.escape(message)):
        Difficulty.from_mapping(bad)


def test_a_domain_knob_must_be_declared():
    with pytest.raises(DomainError, match=r"\['days'\].*does not declare"):
        example({"domain": {"days": 30}})
    ads = load_domain("ads", {"preset": "small", "difficulty": {"domain": {"decoy_edits": [9, 9]}}})
    assert ads.settings.decoy_edits == (9, 9)


def test_a_tier_knob_merges_into_the_domain_config_key_by_key():
    """A tier that sets part of a nested key (the background's alert probability) keeps the
    rest the domain config sets there (its twins): the committed tiers dial the background on
    top of the domain's twins."""
    from causaltrace_domains.ads.background import background_prior

    config = {
        "preset": "small",
        "background": {"twins": {"quiet_share": 0.04}, "alert_probability": 0.2},
        "difficulty": {"domain": {"background": {"alert_probability": 0.7}}},
    }
    ads = load_domain("ads", config)
    assert ads.config["background"] == {"twins": {"quiet_share": 0.04}, "alert_probability": 0.7}
    prior = background_prior(ads.settings)
    assert prior.twins.quiet_share == 0.04 and prior.alert_probability == 0.7


def test_default_difficulty_changes_nothing():
    plain, dialled = example(), example({"tier": "any"})
    for name, point in plain.scm.intervention_points.items():
        assert dialled.scm.point(name).prior == point.prior


@pytest.mark.parametrize("seed", SEEDS)
def test_draws_follow_the_narrowed_prior(seed):
    """Strength and onset fall in the declared quantiles of the prior's ranges; the profile is
    the one asked for; 2D slices make up ``two_d_share`` of sliced draws."""
    share = 0.8
    base = example()
    domain = example(
        {"strength": [0.5, 1.0], "onset": [0.0, 0.25], "profile": "ramp", "two_d_share": share}
    )
    rng = np.random.default_rng(seed)
    n = 600
    panel = domain.scm.panel
    for name in ("CHECKOUT_BUG", "TRACKING_LOSS"):
        lo, hi = base.scm.point(name).prior.strength
        first, last = (o if o >= 0 else panel.n_time + o for o in base.scm.point(name).prior.onset)
        draws = [domain.scm.point(name).sample(rng, panel) for _ in range(n)]
        assert all(lo + 0.5 * (hi - lo) <= d.strength <= hi for d in draws)
        assert all(first <= d.window.onset <= first + round(0.25 * (last - first)) for d in draws)
        assert all(d.window.profile == Ramp(3) for d in draws)
        two_d = sum(len(d.slice.conditions) == 2 for d in draws)
        # Binomial(600, 0.8): sd = sqrt(600 * 0.8 * 0.2) = 9.8; 4 sd is a 6e-5 false alarm.
        assert abs(two_d - share * n) <= 4 * math.sqrt(n * share * (1 - share))


@pytest.mark.parametrize("tier_profile", ["step", "ramp"])
def test_the_profile_knob_only_picks_shapes_the_prior_allows(tier_profile):
    """An edit is a step: a tier asking for ramps leaves step-only causes (budget, bid,
    approval edits) as steps, so the change history's one logged edit stays the whole change;
    causes whose prior allows ramps get the tier's ramp."""
    plain = load_domain("ads", {"preset": "small"})
    tier = load_domain("ads", {"preset": "small", "difficulty": {"profile": tier_profile}})
    asked = {"step": Step(), "ramp": Ramp(3)}[tier_profile]
    for name, point in plain.scm.intervention_points.items():
        allowed = {type(p) for p in point.prior.profiles}
        dialled = tier.scm.point(name).prior.profiles
        if name == "NO_ANOMALY" or type(asked) not in allowed:
            assert dialled == point.prior.profiles, name
        else:
            assert dialled == (asked,), name
    for edit in ("BUDGET_CAP", "BID_MODIFIER_CHANGE", "AD_DISAPPROVAL"):
        assert tier.scm.point(edit).prior.profiles == (Step(),)


def test_step_profile_and_no_signal_causes_keep_their_prior():
    ads = load_domain("ads", {"preset": "small", "difficulty": {"profile": "step"}})
    plain = load_domain("ads", {"preset": "small"})
    assert ads.scm.point("NO_ANOMALY").prior == plain.scm.point("NO_ANOMALY").prior
    assert all(
        p.prior.profiles == (Step(),)
        for n, p in ads.scm.intervention_points.items()
        if n != "NO_ANOMALY"
    )


def test_snr_band_is_in_units_of_the_typical_snr():
    tier = Difficulty(snr=(0.5, 1.5))
    config = tier.verifier(VerifierConfig(snr=1.0), typical_snr=10.0)
    # The band bounds the detection SNR only; the detection floor and the identifiability
    # thresholds stay the verifier's own.
    assert (config.snr, config.snr_band) == (1.0, (5.0, 15.0))


def generate(tmp_path, difficulty, n=24, seed=5):
    cfg = {
        "out_dir": str(tmp_path / "ds"),
        "domain": {"name": "example"},
        "dataset": {
            "name": "tier",
            "split": "tier",
            "seed": seed,
            "n_episodes": n,
            "shard_size": n,
            "max_attempts": 300,
            "difficulty": difficulty,
        },
        "verifier": {},
    }
    job = Job.from_config(cfg)
    run(job, show_progress=False)
    return job, load_labels(job.out_dir)


@pytest.fixture(scope="module")
def banded(tmp_path_factory):
    band = {"tier": "band", "snr": [0.5, 1.0], "profile": "step"}
    return generate(tmp_path_factory.mktemp("band"), band)


def test_accepted_episodes_hold_the_snr_band_and_record_it(banded):
    """Every accepted episode's detection SNR, measured on its visible tables, lies in the
    band (in units of its cause's typical SNR, but never below the verifier's floor of 1); the
    label records the tier, the knobs, where the draw fell and what was measured."""
    job, labels = banded
    domain = example()
    assert len(labels) == 24
    for label in labels.values():
        record = label["extra"]["difficulty"]
        typical = domain.scm.point(label["cause"]).info.typical_snr
        assert record["tier"] == "band"
        assert record["knobs"]["snr"] == [0.5, 1.0]
        measured = record["measured"]
        assert max(0.5 * typical, 1.0) <= measured["snr"] < 1.0 * typical
        assert measured["relative_snr"] == pytest.approx(measured["snr"] / typical)
        assert 0.0 <= measured["oracle_margin"] <= 1.0
        assert 0.0 <= measured["oracle_posterior_true"] <= 1.0
        assert record["draw"]["profile"] == "step"
        order = len(label["slice"].split("&")) if label["slice"] else 0
        assert record["draw"]["slice_order"] == order
    # The manifest's domain config carries the tier, so rebuilds draw from the same priors.
    assert job.domain["difficulty"]["snr"] == [0.5, 1.0]


def test_a_rebuilt_episode_has_the_same_draw_record(banded):
    job, labels = banded
    first = sorted(labels)[0]
    rebuilt = rebuild_episode(job.out_dir, first).label.extra["difficulty"]
    stored = labels[first]["extra"]["difficulty"]
    assert rebuilt["draw"] == stored["draw"] and rebuilt["knobs"] == stored["knobs"]


def test_tiers_separate_measured_snr(banded, tmp_path):
    """A weak tier's episodes all measure below a strong tier's, on the same domain."""
    _, weak = banded
    _, strong = generate(tmp_path, {"tier": "strong", "snr": [1.2, None]}, n=12, seed=6)

    def relative(labels):
        return [lab["extra"]["difficulty"]["measured"]["relative_snr"] for lab in labels.values()]

    assert max(relative(weak)) < 1.0 < 1.2 <= min(relative(strong))

    # The oracle (the model known, the draw not) finds the strong tier's causes at least as
    # often as the weak tier's, and puts no less posterior on the truth on average.
    def oracle(labels, key):
        return [lab["extra"]["difficulty"]["measured"][key] for lab in labels.values()]

    def hits(labels):
        return [
            m["oracle_answer"]["cause"] == lab["cause"]
            for lab in labels.values()
            for m in [lab["extra"]["difficulty"]["measured"]]
        ]

    assert np.mean(hits(strong)) >= np.mean(hits(weak))
    assert np.mean(oracle(strong, "oracle_posterior_true")) >= np.mean(
        oracle(weak, "oracle_posterior_true")
    )
    assert Counter(lab["extra"]["difficulty"]["tier"] for lab in strong.values()) == {"strong": 12}


def test_dataset_and_domain_difficulty_together_are_refused(tmp_path):
    cfg = {
        "out_dir": str(tmp_path),
        "domain": {"name": "example", "difficulty": {"tier": "a"}},
        "dataset": {"name": "x", "split": "x", "seed": 1, "n_episodes": 1, "difficulty": {}},
    }
    with pytest.raises(Exception, match=r"both dataset\.difficulty and domain\.difficulty"):
        Job.from_config(cfg)


ADS_TIERS = ("easy", "medium", "hard", "expert")


def _ads_tier_difficulty(tier: str):
    """The ads domain's difficulty as the committed tier config sets it."""
    from omegaconf import OmegaConf

    from causaltrace.datasets.job import DatasetSettings
    from causaltrace_domains.ads import conf

    path = os.path.join(os.path.dirname(conf.__file__), "dataset", f"ads_{tier}.yaml")
    raw = OmegaConf.to_container(OmegaConf.load(path))
    settings = DatasetSettings.from_mapping(raw)
    return load_domain("ads", {"preset": "default", "difficulty": settings.difficulty}).difficulty


@pytest.mark.parametrize("tier", ADS_TIERS)
def test_the_ads_tier_configs_build(tier):
    """Each committed tier config is a valid dataset config whose knobs the ads domain accepts,
    and each harder tier's SNR band ends below the band of the tier before it."""
    difficulty = _ads_tier_difficulty(tier)
    assert difficulty.tier == tier
    low, high = difficulty.snr
    assert (high is None) == (tier == "easy")
    assert high is None or low < high
    if tier != "easy":
        previous = _ads_tier_difficulty(ADS_TIERS[ADS_TIERS.index(tier) - 1])
        previous_high = previous.snr[1]
        assert previous_high is None or high < previous_high
    assert len(load_domain("ads", {"preset": "default"}).scm.intervention_points) == 12
