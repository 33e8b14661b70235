"""The services domain needs diagnosis, not a glance: harmless changes where the alert is,
confusers that share a first symptom, concurrent causes, and difficulty tiers.

Every episode comes from the engine's ``build_episode`` on the default config with fixed seeds.
Shares over episodes are checked against binomial bounds: a share whose expectation is at least
``p`` falls below ``binom.ppf(0.001, n, p) / n`` with probability at most 0.1% (so a correct
generator fails the check about once in a thousand seeds, a broken one almost always), and the
seeds are fixed, so the test is deterministic.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import binom

from causaltrace import Do, InterventionDraw, Slice, Step, Window, load_domain
from causaltrace.core.seeds import episode_streams
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace_domains.services import changes
from causaltrace_domains.services.alert import monitor_readings, page
from causaltrace_domains.services.causes import CAUSES, cause_change
from causaltrace_domains.services.config import AlertDecoys, ServicesConfig
from causaltrace_domains.services.topology import APP

CONFIGS = Path(__file__).resolve().parents[2] / "domains" / "services" / "conf" / "dataset"
TIERS = ("easy", "medium", "hard", "expert")
SEED = 20261207
# Causes that are not a change: every deploy or config edit in their episodes is harmless.
NOT_CHANGES = ("NO_ANOMALY", "SLOW_DEPENDENCY", "NOISY_NEIGHBOUR", "DB_REPLICA_SATURATION")
EPISODES_PER_CAUSE = 12
BUCKET = np.timedelta64(15, "m")


@pytest.fixture(scope="module")
def domain():
    return load_domain("services")


@pytest.fixture(scope="module")
def harmless(domain):
    """Episodes of causes that are not changes, over several seeds (4 causes x 12 seeds)."""
    return [
        build_episode(domain, EpisodeSpec(f"d-{i:06d}", "d", i, SEED + i, cause, None))
        for cause in NOT_CHANGES
        for i in range(EPISODES_PER_CAUSE)
    ]


def lower_bound(n: int, p: float) -> float:
    """The share a binomial(n, p) stays above with probability 99.9%."""
    return float(binom.ppf(0.001, n, p)) / n


def bucket_of(domain, times: pd.Series) -> np.ndarray:
    start = domain.scm.panel.time.values[0].astype("datetime64[m]")
    return ((times.to_numpy().astype("datetime64[m]") - start) // BUCKET).astype(int)


def alerted_cell_changes(domain, episode) -> tuple[str, str, pd.DataFrame] | None:
    """The first alert's service and region (an application service's), and the change-log rows
    there within the causes' onset range; None when the first alert is not on an app service."""
    service, region = page(monitor_readings(episode.tables))[0].scope.split("@")
    if service not in APP:
        return None
    log = episode.tables["change_log"]
    first, last = domain.change_onsets()
    when = bucket_of(domain, log["change_time"])
    rows = log[
        (log["service"] == service) & (log["region"] == region) & (when >= first) & (when <= last)
    ]
    return service, region, rows


@pytest.mark.slow
def test_alerted_service_and_region_carry_harmless_changes_of_each_kind(domain, harmless):
    """In episodes whose cause is no change, the alerted application service and region often
    had a deploy and a config edit at the times a cause's change would be. The page's cells get
    Poisson(1.0) deploys and Poisson(1.5 + 0.3) config edits there (pool resizes that would bind
    become other config edits, still config), so a deploy is there with probability at least
    1 - e^-1.0 = 0.63 and a config edit at least 1 - e^-1.8 = 0.83 (scattered changes only add;
    the means are read from the config, AlertDecoys)."""
    means = AlertDecoys()
    seen = [alerted_cell_changes(domain, e) for e in harmless]
    seen = [s for s in seen if s is not None]
    n = len(seen)
    assert n >= 30  # most of these causes page on an application service first
    deploys = sum(bool((rows["change_type"] == "deploy").any()) for _, _, rows in seen) / n
    configs = sum(bool((rows["change_type"] == "config").any()) for _, _, rows in seen) / n
    pools = sum(bool((rows["field"] == changes.POOL_FIELD).any()) for _, _, rows in seen) / n
    assert deploys >= lower_bound(n, 1 - math.exp(-means.deploy)), deploys
    assert configs >= lower_bound(n, 1 - math.exp(-(means.pool + means.config))), configs
    # Pool resizes where the alert is: most cells do not bind (those that would make them other
    # edits), so well over a third of alerted cells show one.
    assert pools >= 0.35, pools
    # ... and they are cuts as often as not: the kind of edit a pool-cut cause is.
    cuts = [
        int(r["new_value"]) < int(r["old_value"])
        for _, _, rows in seen
        for _, r in rows[rows["field"] == changes.POOL_FIELD].iterrows()
    ]
    assert len(cuts) >= 10 and np.mean(cuts) >= 0.5


def test_the_causes_change_takes_the_place_of_one_alerted_decoy():
    """A cause's own change in an alerted cell replaces one harmless change of its kind there:
    with the same draws, the cell gets exactly one fewer (none below zero)."""
    cells = [("catalog", "us_east"), ("cart", "eu_west")]
    means = {"deploy": 3.0, "pool": 2.0, "config": 0.5}
    taken = {("catalog", "us_east", "deploy"): 1}
    free = changes.alerted_slots(cells, (276, 283), means, {}, np.random.default_rng(5))
    less = changes.alerted_slots(cells, (276, 283), means, taken, np.random.default_rng(5))

    def count(slots, service, kind):
        return sum(s.service == service and s.kind == kind for s in slots)

    # (the first cell's first kind: its Poisson draw comes first in both, so it is the same)
    assert count(free, "catalog", "deploy") >= 1
    assert count(less, "catalog", "deploy") == count(free, "catalog", "deploy") - 1
    assert all(276 <= s.bucket <= 283 for s in free)
    assert {s.kind for s in free} == set(changes.KINDS)
    queue = changes.alerted_slots(
        [("order_queue", "us_east")], (276, 283), means, {}, np.random.default_rng(5)
    )
    assert queue == []  # no deploys or config edits on the queue


def test_decoy_cells_are_the_alerted_ones_then_others_up_to_a_fixed_number():
    """The cells that get changes at the causes' times are the page's application cells first,
    then random other application cells, always the configured number: how many changes the
    log has at those times does not follow the page (whose length follows the cause)."""
    rng = np.random.default_rng(3)
    for alerted in (
        [],
        [("order_queue", "us_east")],
        [("catalog", "us_west"), ("frontend", "us_west"), ("catalog", "us_west")],
        [("cart", "eu_west"), ("checkout", "eu_west"), ("frontend", "eu_west")],
    ):
        cells = changes.decoy_cells(alerted, 3, rng)
        mine = list(dict.fromkeys(c for c in alerted if c[0] in APP))
        assert len(cells) == len(set(cells)) == 3
        assert cells[: len(mine)] == mine
        assert all(service in APP for service, _ in cells)


def observed_nodes(domain) -> list[str]:
    return [name for name, node in domain.scm.nodes.items() if node.observed]


def decoy_pool_interventions(domain, episode) -> list[Do]:
    """Every harmless pool resize the change log shows, as the intervention it would be: the
    pool set to its new value from its bucket until the next pool change in its cell."""
    log = episode.tables["change_log"]
    pool = log[log["field"] == changes.POOL_FIELD].copy()
    pool["bucket"] = bucket_of(domain, pool["change_time"])
    own = {
        (d.slice.as_dict()["service"], d.slice.as_dict()["region"], d.window.onset)
        for d in episode.draws
        if cause_change(d.point) == "config"
    }
    out = []
    for (service, region), rows in pool.groupby(["service", "region"]):
        rows = rows.sort_values("change_time")
        buckets = rows["bucket"].tolist()
        for i, (_, row) in enumerate(rows.iterrows()):
            if (service, region, row["bucket"]) in own:
                continue  # the cause's own cut
            end = next((b for b in buckets[i + 1 :] if b > row["bucket"]), None)
            out.append(
                Do(
                    "pool_limit",
                    where=Slice.of(service=service, region=region),
                    window=Window(onset=int(row["bucket"]), end=end),
                    value=float(row["new_value"]),
                )
            )
    return out


@pytest.mark.parametrize("cause", ["TRAFFIC_SURGE", "CONFIG_CHANGE", "NOISY_NEIGHBOUR"])
def test_harmless_pool_resizes_change_no_metric(domain, cause):
    """Applying every harmless pool resize of the change log to the SCM, with the episode's own
    noise, background and cause, leaves every observed node bit for bit the same: the resized
    pool stays above the requests in flight for as long as it stands, and a pool that does not
    bind enters no mechanism. (Deploys and other config edits carry no intervention at all.)
    Surges and pool cuts make pools bind, so resizes there must avoid those cells and times."""
    tested = 0
    for i in range(6):
        episode = build_episode(
            domain, EpisodeSpec(f"p-{i:06d}", "p", i, SEED + 50 + i, cause, None)
        )
        decoys = decoy_pool_interventions(domain, episode)
        if not decoys:
            continue
        spec = episode.spec
        noise = episode_streams(spec.dataset_seed, spec.split, spec.index, spec.attempt).noise
        scm = domain.scm
        base = scm.intervene(episode.background.interventions)
        interventions = (*scm.interventions_for(episode.draw), *decoys)
        with_decoys = base.simulate(interventions, seed=noise, counterfactual=False).factual
        for node in observed_nodes(domain):
            assert np.array_equal(with_decoys[node], episode.worlds.factual[node]), (cause, node)
        # ... while the same resize cut to half the requests in flight would show: the check
        # can fail.
        cut = decoys[0]
        cell = int(np.flatnonzero(cut.where.mask(scm.panel))[0])
        world = episode.worlds.factual
        in_flight = world["request_rate"][cell] * world["latency_mean"][cell] / 1000.0
        standing = cut.window.weights(scm.panel.n_time) > 0
        peak = float(in_flight[standing].max())
        tight = Do(cut.node, where=cut.where, window=cut.window, value=0.5 * peak)
        squeezed = base.simulate(
            (*scm.interventions_for(episode.draw), tight), seed=noise, counterfactual=False
        ).factual
        assert not np.array_equal(squeezed["connections_pending"], world["connections_pending"])
        tested += len(decoys)
    assert tested >= 3, cause


def test_decoys_touch_only_the_change_log(domain):
    """The metrics tables do not depend on the harmless changes: rendering the same world with
    none of the background's scattered changes gives the same metric tables (the log differs)."""
    episode = build_episode(domain, EpisodeSpec("m-000000", "m", 0, SEED, "NO_ANOMALY", None))
    bare = type(episode.background)(episode.background.interventions, {"changes": ()})
    rng = episode_streams(SEED, "m", 0, 0).render
    tables = domain.render(episode.worlds.factual, episode.draw, bare, rng)
    for name in ("service_metrics", "saturation", "cache_metrics", "queue_metrics"):
        pd.testing.assert_frame_equal(tables[name], episode.tables[name])
    assert not tables["change_log"].equals(episode.tables["change_log"])


CONFUSERS = ("SLOW_DEPENDENCY", "DB_REPLICA_SATURATION", "NOISY_NEIGHBOUR")
STRENGTH = {"SLOW_DEPENDENCY": 4.0, "DB_REPLICA_SATURATION": 0.6, "NOISY_NEIGHBOUR": 0.5}


def test_slow_dependency_saturated_replica_and_noisy_neighbour_share_a_first_symptom():
    """On the same database, region, onset and noise, the three causes page with the same first
    alert (the caller's p99); each one's own signature fires on the database and the other two's
    do not; and each declares the other two as confusers, so the verifier checks that. (Without
    background blips, which page on their own and could outrank a cause's first symptom.)"""
    domain = load_domain("services", {"blips": [1.0]})
    n = domain.scm.panel.n_time
    where = Slice.of(service="catalog_db", region="us_east")
    cells = where.mask(domain.scm.panel)
    for seed in (1, 2):
        firsts = set()
        for cause in CONFUSERS:
            draw = InterventionDraw(cause, where, STRENGTH[cause], Window(n - 10, profile=Step()))
            episode = build_episode(
                domain, EpisodeSpec("c-000000", "c", 0, SEED + seed, cause, None), draw=draw
            )
            first = page(monitor_readings(episode.tables))[0]
            firsts.add((first.kpi, first.scope))
            evidence = domain.evidence(episode.tables)
            for other in CONFUSERS:
                snr = evidence.statistic(other, cells, n - 10).snr
                if other == cause:
                    assert snr >= 2.0, (cause, snr)
                else:
                    assert snr < 1.0, (cause, other, snr)
        assert firsts == {("latency_p99_ms", "catalog@us_east")}, firsts
    for cause in CONFUSERS:
        declared = set(domain.scm.point(cause).info.confusers)
        assert set(CONFUSERS) - {cause} <= declared, cause


def test_concurrent_episode_renders_each_causes_change(domain):
    """A concurrent split's episode logs a deploy for its bad deploy and a pool cut for its
    config change, each in its cell at its onset; its prompt says several causes may be at work
    and how to submit them; its page names the cells of both (different services and regions)."""
    concurrent = load_domain("services", {"concurrent": True})
    n = concurrent.scm.panel.n_time
    deploy = InterventionDraw(
        "BAD_DEPLOY", Slice.of(service="catalog", region="us_east"), 60.0, Window(n - 10)
    )
    cut = InterventionDraw(
        "CONFIG_CHANGE", Slice.of(service="checkout", region="us_west"), 0.95, Window(n - 9)
    )
    spec = EpisodeSpec("k-000000", "k", 0, SEED, "BAD_DEPLOY", None, also=("CONFIG_CHANGE",))
    episode = build_episode(concurrent, spec, draw=deploy, also=(cut,))
    log = episode.tables["change_log"]
    when = bucket_of(concurrent, log["change_time"])
    deploys = log[
        (log["service"] == "catalog")
        & (log["region"] == "us_east")
        & (log["change_type"] == "deploy")
        & (when == n - 10)
    ]
    cuts = log[
        (log["service"] == "checkout")
        & (log["region"] == "us_west")
        & (log["field"] == changes.POOL_FIELD)
        & (when == n - 9)
    ]
    assert len(deploys) >= 1
    assert len(cuts) == 1 and int(cuts.iloc[0]["new_value"]) < int(cuts.iloc[0]["old_value"])
    assert "One or more root causes may be at work" in episode.prompt
    assert "submit(causes)" in episode.prompt
    shown = {a.scope.split("@")[1] for a in page(monitor_readings(episode.tables))}
    assert {"us_east", "us_west"} <= shown, shown
    assert episode.prompt.count("ALERT: ") == len(page(monitor_readings(episode.tables)))


def test_difficulty_knobs_are_declared_and_checked():
    domain = load_domain(
        "services",
        {"difficulty": {"tier": "x", "domain": {"noise": 1.5, "alert_decoys": {"deploy": 2.0}}}},
    )
    assert domain.settings.noise == 1.5 and domain.settings.alert_decoys.deploy == 2.0
    assert set(domain.difficulty_knobs) <= {f for f in ServicesConfig.__dataclass_fields__}
    with pytest.raises(Exception, match="does not declare"):
        load_domain("services", {"difficulty": {"domain": {"nonsense": 1}}})
    with pytest.raises(Exception, match="unknown key"):
        load_domain("services", {"surprise": 1})


def tier_config(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("tier", TIERS)
def test_tier_configs_load_and_generate(tmp_path, tier):
    """Each tier's config builds its domain (knobs declared, priors narrowed) and generates
    verified episodes that record the tier; the hard tiers ask for concurrent episodes."""
    from causaltrace.datasets.generation import Job, run
    from causaltrace.datasets.reading import load_labels

    dataset = tier_config(f"services_{tier}")
    assert dataset["n_episodes"] == 96 and dataset["materialize"] is False
    concurrent = (dataset["composition"].get("concurrent") or 0) > 0
    assert concurrent == (tier in ("hard", "expert"))
    dataset.update(n_episodes=2, shard_size=2)
    if concurrent:
        dataset["composition"] = {**dataset["composition"], "concurrent": 1}
    job = Job.from_config(
        {"out_dir": str(tmp_path), "domain": {"name": "services"}, "dataset": dataset}
    )
    assert run(job, show_progress=False)["manifest_written"]
    labels = list(load_labels(tmp_path).values())
    assert len(labels) == 2
    assert {label["extra"]["difficulty"]["tier"] for label in labels} == {tier}
    assert sum(bool(label.get("also")) for label in labels) == (1 if concurrent else 0)


def test_test_split_config_is_balanced_quotas(domain):
    from causaltrace.episodes.composition import assignments

    dataset = tier_config("services_test")
    plan = assignments(
        domain.scm,
        dataset["composition"],
        split=dataset["split"],
        dataset_seed=dataset["seed"],
        n_episodes=dataset["n_episodes"],
    )
    counts = pd.Series([a.cause for a in plan]).value_counts()
    assert len(plan) == dataset["n_episodes"] and set(counts) == {22}
    assert set(counts.index) == set(CAUSES)


def test_rule_probe_reads_the_page_and_the_log(domain):
    """The measurement script's features come from the prompt and the change log only, and see
    a deploy in the alerted cell where there is one."""
    from causaltrace_domains.services.rule_probe import episode_features, parse_alerts

    episode = build_episode(domain, EpisodeSpec("r-000000", "r", 0, SEED, "BAD_DEPLOY", None))
    alerts = parse_alerts(episode.prompt)
    assert len(alerts) == episode.prompt.count("ALERT: ") >= 1
    features = episode_features(episode.prompt, episode.tables["change_log"])
    service, region = alerts[0]["service"], alerts[0]["region"]
    where = episode.draw.slice.as_dict()
    if (service, region) == (where["service"], where["region"]):
        assert features["n:deploy@cell:w4"] >= 1
