"""The tutorial's steps after the domain: config, generation, inspection, evaluation, and the
domain's contract check.

Run it with ``python3 docs/tutorial/run_tutorial.py [OUT_DIR]`` from any directory; the
test ``tests/domains/test_tutorial.py`` runs the same functions (see ``docs/tutorial-new-domain.md``).
"""

from __future__ import annotations

# --8<-- [start:setup]
import asyncio
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the domain is found as ``shop_domain:ShopDomain``
    sys.path.insert(0, str(HERE))
# --8<-- [end:setup]


# --8<-- [start:check]
def check():
    """Check the domain against every contract the engine relies on: it raises
    DomainContractError, naming the failed check, at the first one it breaks."""
    from shop_domain import ShopDomain

    from causaltrace.episodes.check import check_domain

    result = check_domain(ShopDomain())
    print(result)
    return result


# --8<-- [end:check]


# --8<-- [start:config]
def compose_config(out_dir: str) -> dict:
    """The project's generation config with the tutorial's domain and dataset configs, as
    ``causaltrace-generate`` composes it."""
    from causaltrace.apps.configs import compose_config as compose

    overrides = [
        f"hydra.searchpath=[file://{HERE / 'conf'}]",  # adds conf/domain and conf/dataset
        "domain=shop",
        "dataset=shop_small",
        f"out_dir={out_dir}",
    ]
    return compose("generate", overrides)


# --8<-- [end:config]


# --8<-- [start:generate]
def generate(out_dir: str) -> dict:
    """Generate the verified split (what ``causaltrace-generate`` does, in-process)."""
    from causaltrace.datasets.generation import Job, acceptance_report, run

    job = Job.from_config(compose_config(out_dir))
    summary = run(job, show_progress=False)
    print(f"{summary['episodes']} episodes from {summary['attempts']} attempts")
    print(acceptance_report(out_dir))
    return summary


# --8<-- [end:generate]


# --8<-- [start:inspect]
def inspect(out_dir: str, episode: str | None = None) -> dict:
    """What the agent sees of one episode (its prompt and tables), and the hidden label."""
    from causaltrace.datasets.storage import read_episode_tables
    from causaltrace.env import DatasetSource

    source = DatasetSource(out_dir)
    episode = episode or source.episode_ids[0]
    tables = read_episode_tables(source.visible_dir(episode))
    print(source.prompt(episode))
    for name, frame in tables.items():
        print(f"\n{name}: {len(frame)} rows\n{frame.head(3)}")
    label = source.label(episode)
    print(f"\nhidden label: {label.cause} on {label.slice!r} from day {label.onset}")
    return tables


# --8<-- [end:inspect]


# --8<-- [start:agent]
def scripted_agent():
    """One SQL query, then a rule: the slice whose visits, or orders per visit, fell most."""
    from causaltrace.agents import Agent

    query = """
    WITH d AS (SELECT *, date > (SELECT max(date) FROM sales_daily) - INTERVAL 7 DAY AS recent
               FROM sales_daily),
    s AS (SELECT 'store=' || store AS slice, * FROM d
          UNION ALL SELECT 'channel=' || channel AS slice, * FROM d)
    SELECT slice,
      ln(avg(visits) FILTER (recent) / avg(visits) FILTER (NOT recent)) AS FOOTFALL_DROP,
      ln(sum(orders) FILTER (recent) / sum(visits) FILTER (recent))
        - ln(sum(orders) FILTER (NOT recent) / sum(visits) FILTER (NOT recent))
        AS CHECKOUT_OUTAGE
    FROM s GROUP BY slice"""

    class ScriptedAgent(Agent):
        name = "scripted"

        async def run(self, session, rng) -> None:
            (result,) = await session.turn([{"name": "sql", "arguments": {"query": query}}])
            header, _, *rows = result.observation.splitlines()[:-1]  # drop "(n rows)"
            causes = [c.strip() for c in header.split("|")[1:]]
            changes = [
                (float(value), cause, cells[0].strip())
                for cells in (row.split("|") for row in rows)
                for cause, value in zip(causes, cells[1:])
            ]
            _, cause, slice_text = min(changes)  # the steepest fall
            submit = {"root_cause": cause, "slice": slice_text}
            await session.turn([{"name": "submit", "arguments": submit}])

    return ScriptedAgent()


# --8<-- [end:agent]


# --8<-- [start:teacher]
def teacher():
    """The engine's domain-free teacher, given the bakeries' signatures as data."""
    from omegaconf import OmegaConf

    from causaltrace.agents import make_agent

    config = OmegaConf.load(HERE / "conf" / "agent" / "shop_teacher.yaml")
    return make_agent(config.name, OmegaConf.to_container(config))


# --8<-- [end:teacher]


# --8<-- [start:evaluate]
def evaluate(out_dir: str, run_dir: str, agent_name: str = "random"):
    """Run an agent over every episode, score it with the default reward, write reports."""
    from causaltrace.agents import make_agent
    from causaltrace.env import DatasetSource
    from causaltrace.eval import evaluate as run_agent

    made = {"scripted": scripted_agent, "teacher": teacher}
    agent = made[agent_name]() if agent_name in made else make_agent(agent_name)
    summary = asyncio.run(
        run_agent(agent, DatasetSource(out_dir), run_dir, progress=False, n_boot=200)
    )
    overall = summary.metrics.overall
    print(
        f"{agent_name}: mean reward {overall['mean_reward'].value:.3f}, "
        f"full attribution {overall['full_attr_at_1'].value:.3f} "
        f"over {len(summary.records)} episodes"
    )
    return summary


# --8<-- [end:evaluate]


def main(out_dir: str | None = None) -> None:
    root = Path(out_dir or tempfile.mkdtemp(prefix="shop-"))
    check()
    generate(str(root / "data"))
    inspect(str(root / "data"))
    for agent in ("random", "scripted", "teacher"):
        evaluate(str(root / "data"), str(root / f"run-{agent}"), agent)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
