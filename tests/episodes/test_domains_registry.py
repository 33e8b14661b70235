import numpy as np
import pytest

from causaltrace import Domain, DomainError, available_domains, load_domain
from causaltrace.cli import main

pytestmark = pytest.mark.sandbox


def test_example_domain_is_registered():
    assert available_domains()["example"] == "causaltrace_domains.example:ExampleDomain"
    domain = load_domain("example", {"days": 28})
    assert isinstance(domain, Domain)
    assert domain.scm.panel.n_time == 28
    assert set(domain.scm.intervention_points) == {"TRAFFIC_DROP", "CHECKOUT_BUG", "TRACKING_LOSS"}


def test_load_by_path_and_errors():
    assert load_domain("causaltrace_domains.example:ExampleDomain").name == "example"
    with pytest.raises(DomainError, match=r"unknown domain 'nope'.*example"):
        load_domain("nope")
    with pytest.raises(DomainError, match="cannot load domain"):
        load_domain("causaltrace_domains.example:Missing")
    with pytest.raises(DomainError, match="not a Domain subclass"):
        load_domain("numpy:ndarray")


def test_example_tracking_loss_leaves_real_orders(rng):
    scm = load_domain("example").scm
    draw = scm.point("TRACKING_LOSS").sample(rng, scm.panel)
    worlds = scm.simulate(scm.interventions_for(draw), seed=3)
    assert np.array_equal(worlds.factual["orders"], worlds.counterfactual["orders"])
    lost = worlds.effect("tracked_orders")
    assert lost.sum() < 0
    assert np.all(lost[~draw.slice.mask(scm.panel)] == 0)


def test_cli_simulate_prints_summary(capsys):
    assert main(["simulate", "--domain", "example", "--seed", "1", "--cause", "TRAFFIC_DROP"]) == 0
    out = capsys.readouterr().out
    assert "drawn cause: {'point': 'TRAFFIC_DROP'" in out
    visits = next(line for line in out.splitlines() if line.startswith("visits"))
    factual, counterfactual = (float(v) for v in visits.split()[1:3])
    assert factual < counterfactual


def test_example_domain_runs_the_whole_pipeline(tmp_path):
    """A domain is a folder: the example domain generates a verified dataset and an agent runs
    through the sandboxed environment, with no engine change."""
    import asyncio

    from causaltrace.agents import make_agent
    from causaltrace.datasets.generation import Job, acceptance_report, run
    from causaltrace.env import DatasetSource, DiagnosisSession
    from causaltrace.tools import ToolConfig, ToolRuntime

    job = Job.from_config(
        {
            "out_dir": str(tmp_path),
            "domain": {"name": "example"},
            "dataset": {"name": "ex", "split": "ex", "seed": 1, "n_episodes": 6, "shard_size": 3},
        }
    )
    assert run(job, show_progress=False)["manifest_written"]
    assert acceptance_report(tmp_path)["episodes"].sum() == 6
    source = DatasetSource(tmp_path)

    async def episode():
        async with (
            ToolRuntime(ToolConfig()) as runtime,
            DiagnosisSession(runtime, source, source.episode_ids[0]) as session,
        ):
            out = await session.step(
                {"name": "sql", "arguments": {"query": "SELECT sum(orders) AS o FROM shop_daily"}}
            )
            await make_agent("random").run(session, np.random.default_rng(1))
            return out.observation, session.result

    observation, result = asyncio.run(episode())
    assert "o" in observation and result["reason"] == "submitted"
