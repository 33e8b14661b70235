"""Concurrent causes (issue 13), generation side, on the example domain: a composition's share
of concurrent episodes, both causes in the factual world and neither in the counterfactual,
single-cause episodes unchanged by the concurrent stream, the verifier's rule for pairs, the
prompt flag moved from the dataset config to the domain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causaltrace import InterventionDraw, Slice, Window, load_domain
from causaltrace.datasets.generation import Job, run
from causaltrace.datasets.reading import find_spec, load_labels
from causaltrace.datasets.storage import DatasetLayout
from causaltrace.episodes.acceptance import verify_episode
from causaltrace.episodes.composition import assignments, second_causes, target_nodes
from causaltrace.episodes.labels import OracleLabel
from causaltrace.episodes.sampling import EpisodeSpec, build_episode, build_visible
from causaltrace.episodes.verify import VerifierConfig, verify_concurrent
from causaltrace.errors import CausalTraceError

SENTENCE = "One or more root causes may be at work"


@pytest.fixture(scope="module")
def domain():
    return load_domain("example")


def _job(out: Path, composition: dict, n: int = 12) -> Job:
    return Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "example", "days": 56},
            "dataset": {
                "name": "ex_cc",
                "split": "cc",
                "seed": 3,
                "n_episodes": n,
                "composition": composition,
                "materialize": True,
                "shard_size": 6,
                "max_attempts": 80,
            },
            "verifier": {},
        }
    )


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """The same split with concurrent share 0 (no key at all) and 0.5."""
    root = tmp_path_factory.mktemp("concurrent")
    single, mixed = root / "single", root / "mixed"
    run(_job(single, {"kind": "prior"}), show_progress=False)
    run(_job(mixed, {"kind": "prior", "concurrent": 0.5}), show_progress=False)
    return single, mixed


# -- composition -------------------------------------------------------------------------------
def test_prior_share_and_second_causes(domain):
    scm = domain.scm
    base = assignments(scm, {"kind": "prior"}, split="s", dataset_seed=5, n_episodes=40)
    plan = assignments(
        scm, {"kind": "prior", "concurrent": 0.3}, split="s", dataset_seed=5, n_episodes=40
    )
    assert sum(1 for a in plan if a.also) == 12  # round(0.3 * 40)
    # The first causes are the schedule's without concurrent episodes.
    assert [(a.cause, a.slice_order) for a in plan] == [(a.cause, a.slice_order) for a in base]
    assert all(not a.also for a in base)
    for a in plan:
        if a.also:
            (second,) = a.also
            assert second != a.cause
            assert not target_nodes(scm, second) & target_nodes(scm, a.cause)
    # Deterministic in (seed, split); another split picks others.
    again = assignments(
        scm, {"kind": "prior", "concurrent": 0.3}, split="s", dataset_seed=5, n_episodes=40
    )
    assert again == plan
    other = assignments(
        scm, {"kind": "prior", "concurrent": 0.3}, split="t", dataset_seed=5, n_episodes=40
    )
    assert [a.also for a in other] != [a.also for a in plan]


def test_quota_count(domain):
    config = {"kind": "quotas", "total": 18, "sliced": 12, "two_d": 4, "concurrent": 5}
    plan = assignments(domain.scm, config, split="q", dataset_seed=1, n_episodes=18)
    assert sum(1 for a in plan if a.also) == 5
    base = assignments(
        domain.scm, {**config, "concurrent": 0}, split="q", dataset_seed=1, n_episodes=18
    )
    assert [(a.cause, a.slice_order) for a in plan] == [(a.cause, a.slice_order) for a in base]


def test_second_causes_are_other_mechanisms_and_never_no_signal():
    ads = load_domain("ads", {"preset": "small"})
    options = second_causes(ads.scm, "BUDGET_CAP")
    assert "NO_ANOMALY" not in options and "BUDGET_CAP" not in options
    # A large budget cut on a smart-bidding campaign starts a learning period (CPC and CVR):
    # BUDGET_CAP shares the cvr node with LANDING_PAGE_BREAK, which therefore cannot join it.
    assert target_nodes(ads.scm, "BUDGET_CAP") >= {"budget_change", "cvr", "expected_cpc"}
    assert "LANDING_PAGE_BREAK" not in options and len(options) == 9
    assert target_nodes(ads.scm, "TRACKING_OUTAGE") == {"tag_fire_rate"}


@pytest.mark.parametrize(
    "value, match",
    [(-0.1, "share in"), (2.5, "whole count"), (True, "share in"), (50, "only")],
)
def test_bad_concurrent_values_are_named(domain, value, match):
    with pytest.raises(CausalTraceError, match=match):
        assignments(
            domain.scm,
            {"kind": "prior", "concurrent": value},
            split="s",
            dataset_seed=5,
            n_episodes=40,
        )


# -- worlds ------------------------------------------------------------------------------------
def test_both_causes_act_in_the_factual_world_and_neither_in_the_counterfactual(domain):
    panel = domain.scm.panel
    first = InterventionDraw(
        "CHECKOUT_BUG", Slice.of(channel="search"), 0.7, Window(onset=panel.n_time - 14)
    )
    second = InterventionDraw(
        "TRACKING_LOSS", Slice.of(region="north"), 0.6, Window(onset=panel.n_time - 10)
    )
    spec = EpisodeSpec("w-0", "w", 0, 9, "CHECKOUT_BUG", 1, also=("TRACKING_LOSS",))
    episode = build_episode(domain, spec, draw=first, also=(second,))
    worlds = episode.worlds
    checkout = worlds.factual["checkout_rate"] != worlds.counterfactual["checkout_rate"]
    tag = worlds.factual["tag_fire_rate"] != worlds.counterfactual["tag_fire_rate"]
    in_first = first.slice.mask(panel)
    in_second = second.slice.mask(panel)
    # Each cause moves its own node, only inside its slice and from its onset on.
    assert checkout[in_first, first.window.onset :].all()
    assert not checkout[~in_first].any() and not checkout[:, : first.window.onset].any()
    assert tag[in_second, second.window.onset :].all()
    assert not tag[~in_second].any() and not tag[:, : second.window.onset].any()
    # The counterfactual has neither: it is the world of an episode without any cause.
    quiet = build_episode(
        domain,
        EpisodeSpec("w-0", "w", 0, 9, "CHECKOUT_BUG", 1),
        draw=InterventionDraw("CHECKOUT_BUG", first.slice, 0.0, first.window),
    )
    for node in ("orders", "tracked_orders", "tag_fire_rate", "checkout_rate"):
        np.testing.assert_array_equal(worlds.counterfactual[node], quiet.worlds.factual[node])
    # The label: the first cause in its fields, the second in also, effects in both slices.
    label = episode.label
    assert label.causes == (("CHECKOUT_BUG", "channel=search"), ("TRACKING_LOSS", "region=north"))
    (other,) = label.also
    assert other.onset == second.window.onset and other.strength == pytest.approx(0.6)
    assert label.effect_in_slice["orders"].effect < 0
    assert other.effect_in_slice["tracked_orders"].effect < 0
    assert OracleLabel.from_dict(json.loads(label.to_json())) == label


def test_second_draw_has_its_own_stream(domain):
    """The spec's second cause is drawn from the concurrent stream: the first cause's draw,
    the background and the noise are the single-cause episode's."""
    single = EpisodeSpec("x-3", "x", 3, 4, "CHECKOUT_BUG", None)
    pair = EpisodeSpec("x-3", "x", 3, 4, "CHECKOUT_BUG", None, also=("TRAFFIC_DROP",))
    a, b = build_episode(domain, single), build_episode(domain, pair)
    assert a.draw == b.draw and not a.also and b.also[0].point == "TRAFFIC_DROP"
    np.testing.assert_array_equal(
        a.worlds.counterfactual["orders"], b.worlds.counterfactual["orders"]
    )
    assert (a.worlds.factual["demand"] != b.worlds.factual["demand"]).any()
    assert a.label.to_dict().keys() == OracleLabel.from_dict(a.label.to_dict()).to_dict().keys()
    assert "also" not in a.label.to_dict() and "also" not in single.to_dict()
    assert EpisodeSpec.from_dict(json.loads(json.dumps(pair.to_dict()))) == pair
    # A lazy split's rebuild (no counterfactual, no label) draws the same second cause.
    tables, prompt = build_visible(domain, pair)
    assert prompt == b.prompt
    for name, frame in b.tables.items():
        pd.testing.assert_frame_equal(tables[name], frame)


# -- datasets ----------------------------------------------------------------------------------
def test_concurrent_share_of_a_generated_split(datasets):
    _, mixed = datasets
    labels = load_labels(mixed)
    concurrent = [lab for lab in labels.values() if lab.get("also")]
    assert len(concurrent) == 6  # round(0.5 * 12)
    for lab in concurrent:
        (other,) = lab["also"]
        assert other["cause"] != lab["cause"]
        spec = find_spec(mixed, lab["episode_id"])
        assert spec.also == (other["cause"],)


def test_single_cause_episodes_are_byte_identical(datasets):
    """Every single-cause episode of the mixed split has the tables, spec and label bytes of
    the same index in the split without concurrent episodes (only the prompt's wording
    differs, split-wide)."""
    single, mixed = datasets
    a, b = DatasetLayout(single), DatasetLayout(mixed)
    labels_a = {r["episode_id"]: json.dumps(r, sort_keys=True) for r in a.all_labels()}
    labels_b = {r["episode_id"]: r for r in b.all_labels()}
    specs_a = {r["episode_id"]: r for r in _rows(single, "specs")}
    specs_b = {r["episode_id"]: r for r in _rows(mixed, "specs")}
    compared = 0
    for episode, label in labels_b.items():
        if label.get("also"):
            continue
        assert json.dumps(label, sort_keys=True) == labels_a[episode]
        assert specs_b[episode] == specs_a[episode]
        dir_a, dir_b = a.episode_dir(episode), b.episode_dir(episode)
        tables = sorted(p.name for p in dir_a.iterdir() if p.suffix == ".parquet")
        assert tables
        for name in tables:
            assert (dir_a / name).read_bytes() == (dir_b / name).read_bytes(), name
        compared += 1
    assert compared == 6


def test_prompt_flag_comes_from_the_dataset(datasets):
    single, mixed = datasets
    manifest_single = json.loads((single / "manifest.json").read_text())
    manifest_mixed = json.loads((mixed / "manifest.json").read_text())
    assert "concurrent" not in manifest_single["config"]["domain"]
    assert manifest_mixed["config"]["domain"]["concurrent"] is True
    prompts_single = [r["prompt"] for r in DatasetLayout(single).all_index()]
    prompts_mixed = [r["prompt"] for r in DatasetLayout(mixed).all_index()]
    assert all(SENTENCE in p for p in prompts_mixed)  # single-cause episodes' prompts too
    assert not any(SENTENCE in p for p in prompts_single)
    # Without the key the prompt is the single-cause one, byte for byte.
    plain = load_domain("example", {"days": 56})
    assert not plain.concurrent
    assert "Answer with submit(root_cause, slice); the slice is" in prompts_single[0]


def test_ads_prompt_builder_flag():
    from causaltrace_domains.ads.alert import task_prompt

    args = ("ALERT TEXT", {"perf_daily": 3}, {"device": ("mobile",)}, "EUR", 7, 4)
    plain = task_prompt(*args)
    assert plain == task_prompt(*args, concurrent=False)
    assert "The root cause is exactly one of:" in plain and SENTENCE not in plain
    both = task_prompt(*args, concurrent=True)
    assert SENTENCE in both and '"causes": [' in both
    assert "exactly one" not in both


# -- verifier ----------------------------------------------------------------------------------
def test_verifier_rejects_a_pair_with_an_undetectable_cause(domain):
    panel = domain.scm.panel
    first = InterventionDraw(
        "CHECKOUT_BUG", Slice.of(channel="search"), 0.8, Window(onset=panel.n_time - 14)
    )
    spec = EpisodeSpec("v-0", "v", 0, 21, "CHECKOUT_BUG", 1, also=("TRAFFIC_DROP",))

    def verdict(strength: float):
        second = InterventionDraw("TRAFFIC_DROP", Slice(()), strength, Window(panel.n_time - 12))
        episode = build_episode(domain, spec, draw=first, also=(second,))
        return episode, verify_concurrent(
            domain.scm,
            domain.evidence(episode.tables),
            episode.draws,
            alert_onset=domain.alert_onset(),
            no_signal=domain.no_signal_causes(),
            configs=[VerifierConfig(), VerifierConfig()],
        )

    weak_episode, weak = verdict(0.0)
    assert not weak.accepted
    assert "second_undetectable" in [r.split(":")[0] for r in weak.reasons], weak.reasons
    assert "second:snr" in weak.stats and weak.stats["snr"] >= 1.0  # the first is detected
    _, strong = verdict(0.4)
    assert strong.accepted, strong.reasons
    assert strong.stats["second:snr"] >= 1.0
    # The engine's verdict (alert gate first, then both causes) names the same reason.
    engine = verify_episode(domain, weak_episode, VerifierConfig(check_alert=False))
    assert engine.reason == "second_undetectable", engine.reasons


def test_the_other_true_cause_is_not_a_confuser(domain):
    """CHECKOUT_BUG and TRACKING_LOSS are declared confusers of each other; in a pair on the
    same slice neither is rejected as 'confusable' with the other."""
    panel = domain.scm.panel
    where = Slice.of(channel="search")
    first = InterventionDraw("CHECKOUT_BUG", where, 0.7, Window(onset=panel.n_time - 14))
    second = InterventionDraw("TRACKING_LOSS", where, 0.7, Window(onset=panel.n_time - 14))
    spec = EpisodeSpec("c-0", "c", 0, 5, "CHECKOUT_BUG", 1, also=("TRACKING_LOSS",))
    episode = build_episode(domain, spec, draw=first, also=(second,))
    verdict = verify_concurrent(
        domain.scm,
        domain.evidence(episode.tables),
        episode.draws,
        alert_onset=domain.alert_onset(),
        no_signal=domain.no_signal_causes(),
        configs=[VerifierConfig(), VerifierConfig()],
    )
    assert not any("confusable" in r for r in verdict.reasons), verdict.reasons


def _rows(root: Path, kind: str) -> list[dict]:
    rows = []
    for path in sorted((root / "private" / kind).glob("shard-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def test_every_cause_of_a_concurrent_episode_makes_a_share_of_a_shown_alert(datasets):
    """Each cause's Shapley share of every alert the prompt shows is in its label part
    (``extra["alert_shares"]``); every cause makes at least the verifier's concurrent share
    (0.25) of one of them, so no label names a fault that could not have moved the page."""
    _, mixed = datasets
    index = {r["episode_id"]: r["prompt"] for r in DatasetLayout(mixed).all_index()}
    concurrent = [lab for lab in load_labels(mixed).values() if lab.get("also")]
    assert concurrent
    for lab in concurrent:
        prompt = index[lab["episode_id"]]
        for part in (lab, *lab["also"]):
            shares = part["extra"]["alert_shares"]
            assert shares and max(shares.values()) >= 0.25, (part["cause"], shares)
            for key in shares:  # kpi@scope of an alert the prompt shows
                kpi = key.split("@")[0]
                assert kpi in prompt or kpi.replace("_", " ") in prompt
        # The shares of one alert add up to the pair's explained share (Shapley efficiency).
        alert = lab["extra"]["alert"]
        key = f"{alert['kpi']}@{alert['scope']}"
        total = lab["extra"]["alert_shares"][key] + lab["also"][0]["extra"]["alert_shares"][key]
        assert total == pytest.approx(alert["explained_share"], abs=1e-9)


def test_every_label_is_one_the_oracle_supports(datasets):
    """Generation's oracle gate: the oracle's answer, recorded in each label's measured
    difficulty, names a true cause of the episode."""
    for root in datasets:
        for lab in load_labels(root).values():
            answer = lab["extra"]["difficulty"]["measured"]["oracle_answer"]
            causes = {lab["cause"], *(a["cause"] for a in lab.get("also") or ())}
            assert answer["cause"] in causes, (lab["episode_id"], answer, causes)


def test_the_background_sees_every_draw_of_its_episode(domain):
    """``Domain.background(rng, draws)`` gets the episode's draws, the first cause first, so a
    domain can place its confounders where the incident is; the background stream is the
    spec's whatever the draws (a domain that ignores them gets the background it had)."""
    seen = []

    class Recording(type(domain)):
        def background(self, rng, draws=()):
            seen.append(tuple(draws))
            return super().background(rng, draws)

    recording = Recording(domain.config)
    panel = recording.scm.panel
    first = InterventionDraw(
        "CHECKOUT_BUG", Slice.of(channel="search"), 0.7, Window(onset=panel.n_time - 14)
    )
    second = InterventionDraw(
        "TRACKING_LOSS", Slice.of(region="north"), 0.6, Window(onset=panel.n_time - 10)
    )
    spec = EpisodeSpec("b-0", "b", 0, 9, "CHECKOUT_BUG", 1, also=("TRACKING_LOSS",))
    episode = build_episode(recording, spec, draw=first, also=(second,))
    assert seen == [(first, second)]
    single = build_episode(recording, EpisodeSpec("b-1", "b", 1, 9, "CHECKOUT_BUG", None))
    assert seen[-1] == (single.draw,)
    assert episode.background == build_episode(domain, spec, draw=first, also=(second,)).background
