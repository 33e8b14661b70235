"""The services domain: registered by entry point, deterministic, every cause generated and
accepted, every accepted alert made by the hidden cause where the cause implies, no import of
the ads domain, and the unchanged environment scoring it end to end.

Episodes come from the engine's own ``build_episode`` and ``verify_episode`` on the default
config (11 services x 3 regions x 288 buckets), with fixed seeds.
"""

from __future__ import annotations

import ast
import asyncio
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from causaltrace import available_domains, load_domain
from causaltrace.episodes.acceptance import verify_episode
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace.episodes.verify import VerifierConfig
from causaltrace_domains.services.alert import monitor_readings
from causaltrace_domains.services.causes import CAUSES, GROUPS, NO_SIGNAL
from causaltrace_domains.services.topology import EDGES, QUEUE

PACKAGE = Path(__file__).resolve().parents[2] / "domains" / "services"
SEED = 20261201
ATTEMPTS = 8  # attempts per cause; every cause is accepted within them at this seed
# ... except a pool cut, accepted about one time in three (a cut that leaves the pool above the
# requests in flight binds nothing and raises no alert): 16 attempts miss with probability
# (2/3)^16 < 0.2%.
ATTEMPTS_BY_CAUSE = {"CONFIG_CHANGE": 16}
# Which node each cause intervenes on (its footprint must stay inside its slice).
TARGET = {
    "TRAFFIC_SURGE": "demand",  # (and the traffic mix, buy_share)
    "SLOW_DEPENDENCY": "io_ms",
    "BAD_DEPLOY": "error_prob",
    "DB_REPLICA_SATURATION": "cpu_capacity",
    "CACHE_NODE_LOSS": "cache_health",
    "CONFIG_CHANGE": "pool_limit",
    "NOISY_NEIGHBOUR": "cpu_stolen",
    "QUEUE_CONSUMER_STALL": "consumer_capacity",
}


pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def domain():
    return load_domain("services")


@pytest.fixture(scope="module")
def episodes(domain):
    """Per cause, its first ``ATTEMPTS`` attempts with their verdicts."""
    out = {}
    for cause in CAUSES:
        out[cause] = []
        for i in range(ATTEMPTS_BY_CAUSE.get(cause, ATTEMPTS)):
            spec = EpisodeSpec(f"t-{i:06d}", "t", i, SEED, cause, None)
            episode = build_episode(domain, spec)
            out[cause].append((episode, verify_episode(domain, episode, VerifierConfig())))
    return out


def accepted(episodes, cause):
    return [e for e, v in episodes[cause] if v.accepted]


def parquet_bytes(tables) -> dict[str, bytes]:
    out = {}
    for name, frame in tables.items():
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        out[name] = buffer.getvalue()
    return out


def test_registered_by_entry_point_with_every_kind_of_cause(domain):
    assert available_domains()["services"] == "causaltrace_domains.services:ServicesDomain"
    scm = domain.scm
    assert scm.panel.dimension_names == ("service", "region")
    assert scm.panel.shape == (33, 288)  # 11 services x 3 regions, 3 days of 15-minute buckets
    assert len(scm.intervention_points) >= 9
    groups = {domain.cause_group(c) for c in scm.intervention_points}
    assert groups == set(GROUPS)
    assert domain.no_signal_causes() == ("NO_ANOMALY",)


def test_generation_is_byte_identical_for_a_seed(domain, episodes):
    for cause in ("BAD_DEPLOY", "SLOW_DEPENDENCY", "NO_ANOMALY"):
        first = episodes[cause][0][0]
        again = build_episode(domain, first.spec)
        assert again.prompt == first.prompt
        assert parquet_bytes(again.tables) == parquet_bytes(first.tables)
        assert again.label.to_dict() == first.label.to_dict()
    other = build_episode(domain, EpisodeSpec("t-000000", "t", 0, SEED + 1, "BAD_DEPLOY", None))
    assert (
        parquet_bytes(other.tables)["service_metrics"]
        != parquet_bytes(first.tables)["service_metrics"]
    )


def test_every_cause_is_generated_and_accepted(episodes):
    for cause, runs in episodes.items():
        assert all(e.draw.point == cause for e, _ in runs)
        assert accepted(episodes, cause), (cause, [v.reasons for _, v in runs])


def test_realistic_magnitudes(episodes):
    """What an SRE would believe: p99 in hundreds of ms at the frontend, error rates 0.1-5%,
    CPU 20-90% at the daily peak, cache hit rates above 90%, without a cause."""
    world = episodes["NO_ANOMALY"][0][0].worlds.factual
    frontend = slice(0, 3)  # service-major cells: the frontend's three regions first
    p99 = world["latency_p99_ms"][frontend]
    assert 150 < np.median(p99) < 800
    errors = world["errors"][frontend].sum() / world["requests"][frontend].sum()
    assert 0.001 <= errors <= 0.05  # what users see: the frontend's error rate
    peak_cpu = world["cpu_pct"].max(axis=1)
    assert 20 <= np.median(peak_cpu) <= 90
    hits = episodes["NO_ANOMALY"][0][0].tables["cache_metrics"]["hit_rate"]
    assert hits.median() > 0.9


def reached_from(service: str) -> set[str]:
    """Services whose metrics a fault of ``service`` can move: its callers (latency and
    errors travel up the call graph), for a cache the database its misses load, and for
    orders_db the order queue (its consumer writes there); transitively."""
    up: dict[str, set[str]] = {}
    for e in EDGES:
        up.setdefault(e.callee, set()).add(e.caller)
        if e.on_miss_of is not None:  # a cache's misses load the database behind it
            up.setdefault(e.on_miss_of, set()).add(e.callee)
    up.setdefault("orders_db", set()).add(QUEUE)
    out, todo = set(), [service]
    while todo:
        for other in up.get(todo.pop(), ()):
            if other not in out:
                out.add(other)
                todo.append(other)
    return out


def test_accepted_alerts_move_where_and_how_the_cause_implies(domain, episodes):
    for cause, spec in CAUSES.items():
        for episode in accepted(episodes, cause):
            worlds, draw = episode.worlds, episode.draw
            factual = {r.key: r for r in monitor_readings(episode.tables)}
            counter = {
                r.key: r for r in monitor_readings(domain.monitor_tables(worlds.counterfactual))
            }
            alert = episode.alert
            assert alert is not None
            key = (alert.kpi, alert.scope)
            assert factual[key].fired
            if spec.group == NO_SIGNAL:
                # nothing injected: both worlds are the same, the alert is a false alarm
                assert counter[key].current == factual[key].current
                continue
            # adverse in the factual world, not (or much less) without the cause
            assert factual[key].adverse_move > counter[key].adverse_move
            assert not counter[key].fired
            assert alert.explained_share >= 0.5
            service, region = alert.scope.split("@")
            where = draw.slice.as_dict()
            if "region" in where:
                assert region == where["region"], (cause, alert.scope, where)
            if "service" in where:
                assert service == where["service"] or service in reached_from(where["service"]), (
                    cause,
                    alert.scope,
                    where,
                )


def test_the_cause_acts_inside_its_slice_only(domain, episodes):
    panel = domain.scm.panel
    for cause, node in TARGET.items():
        for episode in accepted(episodes, cause):
            effect = episode.worlds.effect(node)
            inside = episode.draw.slice.mask(panel)
            assert np.all(effect[~inside] == 0), cause
            assert np.any(effect[inside][:, episode.draw.window.onset :] != 0), cause
            assert np.all(effect[:, : episode.draw.window.onset] == 0), cause


def test_signature_comes_from_the_cause(domain, episodes):
    """The verifier's statistic on the true slice is detectable on the factual tables (the
    verifier's SNR of at least 1) and not on the counterfactual world's tables rendered by the
    same code."""
    panel = domain.scm.panel
    for cause in TARGET:
        for episode in accepted(episodes, cause)[:2]:
            draw = episode.draw
            cells = None if draw.slice.is_whole_panel else draw.slice.mask(panel)
            onset = draw.window.onset
            counter_tables = domain.render(
                episode.worlds.counterfactual, draw, episode.background, np.random.default_rng(0)
            )
            real = domain.evidence(episode.tables).statistic(cause, cells, onset)
            none = domain.evidence(counter_tables).statistic(cause, cells, onset)
            assert real.snr >= 1.0 and real.z > 0, cause
            assert none.snr < 1.0, cause


def test_change_log_shows_the_causes_that_are_changes(episodes):
    for cause, kind in (("BAD_DEPLOY", "deploy"), ("CONFIG_CHANGE", "config")):
        for episode in accepted(episodes, cause):
            log = episode.tables["change_log"]
            where = episode.draw.slice.as_dict()
            rows = log[
                (log["service"] == where["service"])
                & (log["region"] == where["region"])
                & (log["change_type"] == kind)
            ]
            assert len(rows) >= 1
            if kind == "config":
                row = rows[rows["field"] == "db.pool.max_connections"].iloc[0]
                assert int(row["new_value"]) < int(row["old_value"])
    # the log shows the latest changes: its length never depends on the cause
    lengths = {len(e.tables["change_log"]) for runs in episodes.values() for e, _ in runs}
    assert lengths == {24}


def test_domain_never_imports_ads():
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.startswith("causaltrace_domains.ads") for n in names), path
    code = (
        "import sys\n"
        "from causaltrace import load_domain\n"
        "from causaltrace.episodes.sampling import EpisodeSpec, build_episode\n"
        "import causaltrace_domains.services.agents\n"
        "d = load_domain('services')\n"
        "build_episode(d, EpisodeSpec('a-000000', 'a', 0, 1, 'CACHE_NODE_LOSS', None))\n"
        "bad = [m for m in sys.modules if m.startswith('causaltrace_domains.ads')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE.parents[1])


def test_environment_scores_a_services_episode_end_to_end(tmp_path):
    """Generation, the sandboxed tools, the session and the TRACE reward, unchanged: the true
    answer earns 1, a wrong one less; the scripted teacher runs through the tools."""
    from causaltrace.agents import make_agent
    from causaltrace.datasets.generation import Job, run
    from causaltrace.env import DatasetSource, DiagnosisSession
    from causaltrace.tools import ToolConfig, ToolRuntime

    job = Job.from_config(
        {
            "out_dir": str(tmp_path),
            "domain": {"name": "services"},
            "dataset": {
                "name": "svc",
                "split": "svc",
                "seed": 3,
                "n_episodes": 2,
                "shard_size": 2,
                "composition": {"kind": "prior"},
            },
        }
    )
    assert run(job, show_progress=False)["manifest_written"]
    source = DatasetSource(tmp_path)
    episode = source.episode_ids[0]
    label = source.label(episode)
    wrong = "NO_ANOMALY" if label.cause != "NO_ANOMALY" else "TRAFFIC_SURGE"

    async def answer(cause, slice_text, agent=None):
        async with (
            ToolRuntime(ToolConfig()) as runtime,
            DiagnosisSession(runtime, source, episode) as session,
        ):
            if agent is not None:
                await make_agent(agent).run(session, np.random.default_rng(0))
                return session.result
            out = await session.step(
                {
                    "name": "sql",
                    "arguments": {"query": "SELECT count(*) AS n FROM service_metrics"},
                }
            )
            assert "9504" in out.observation  # 33 cells x 288 buckets
            await session.step(
                {"name": "submit", "arguments": {"root_cause": cause, "slice": slice_text}}
            )
            return session.result

    right = asyncio.run(answer(label.cause, label.slice or ""))
    assert right["reason"] == "submitted"
    assert right["reward"]["score"] == pytest.approx(1.0)
    other = asyncio.run(answer(wrong, ""))
    assert other["reward"]["score"] < 1.0
    taught = asyncio.run(answer(None, None, agent="services_teacher"))
    assert taught["reason"] == "submitted"
    assert taught["answer"]["root_cause"] in CAUSES
