"""``causaltrace-eval``: run an agent over a dataset split, score it and write a report.

    causaltrace-eval agent=random
    causaltrace-eval agent=openai agent.model=Qwen/Qwen3-8B agent.base_url=http://localhost:8000/v1 \\
        domain=ads dataset=ads_test concurrency=16
    causaltrace-eval -m agent=random,teacher,localizer      # one run directory per agent

Writes ``results.jsonl``, ``transcripts/``, ``summary.md``, ``metrics.json``,
``confusion.png`` and ``report.html`` under ``out_dir`` (default
``runs/<agent>-<dataset>``); the four reports only when every selected episode has a result.
Re-running the same command resumes: episodes already scored are not run again. Before
anything is generated or written, the agent's preflight runs (the ``openai`` agent: one ``GET
{base_url}/models``, ``agent.preflight=false`` skips it), so an unreachable model server fails
in seconds. If ``dataset_dir`` holds no dataset yet, it is generated first from the same
``domain``, ``dataset`` and ``verifier`` configs (as ``causaltrace-generate`` would).

Exit status: 0 when every selected episode has a result; 1 when the run could not be completed
(the model server is unreachable or refuses the requests, or episodes' tools could not start:
those episodes are not recorded, so re-running the same command retries them); 2 for a user
error (a bad or missing option, an unknown episode or agent...), reported in one line
(``--debug`` or ``HYDRA_FULL_ERROR=1`` for the traceback).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from causaltrace.agents import make_agent
from causaltrace.apps.configs import CONFIG_PATH, register_search_path
from causaltrace.apps.errors import run_hydra_app, run_task
from causaltrace.apps.schema import EvalConfig, options
from causaltrace.core.files import json_load
from causaltrace.datasets.generation import Job, run
from causaltrace.env import DatasetSource, EnvConfig
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.eval import evaluate
from causaltrace.eval.harness import check_agent
from causaltrace.tools import ToolConfig

log = logging.getLogger(__name__)


def ensure_dataset(plain: Mapping[str, Any]) -> Path:
    """The dataset directory, generated first if it has no manifest."""

    root = Path(str(plain["dataset_dir"]))
    manifest = root / "manifest.json"
    if not manifest.exists():
        print(
            f"{root} has no dataset yet: generating it "
            f"(domain {plain['domain'].get('name')}, dataset {plain['dataset'].get('name')})"
        )
        job = Job.from_config(
            {
                "out_dir": str(root),
                "domain": plain["domain"],
                "dataset": plain["dataset"],
                "verifier": plain.get("verifier") or {},
            }
        )
        summary = run(job, 0, 1, bool(plain.get("progress", True)))
        if not summary["manifest_written"]:
            raise CausalTraceError(f"generating {root} did not finish (no manifest written)")
        return root
    written = json_load(manifest).get("config") or {}
    wanted = {"domain": dict(plain["domain"]), "name": plain["dataset"].get("name")}
    found = {"domain": written.get("domain"), "name": (written.get("dataset") or {}).get("name")}
    if found != wanted:
        log.warning(
            "%s was generated with %s, not the configured %s; evaluating the dataset as it is",
            root,
            found,
            wanted,
        )
    return root


def evaluate_from_config(cfg: DictConfig | Mapping[str, Any]):
    """Everything ``causaltrace-eval`` does, from a (resolved) config; returns the summary."""

    opts = options(EvalConfig, cfg)
    if isinstance(cfg, DictConfig):
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    else:
        plain = dict(cfg)
    agent_cfg = dict(plain.get("agent") or {})
    if not agent_cfg.get("name"):
        raise CausalTraceError("agent config: missing key 'name' (e.g. agent=random)")
    missing = sorted(f"agent.{k}" for k, v in agent_cfg.items() if v == "???")
    if missing:
        raise CausalTraceError(
            f"{missing[0]} is required and not set: add {missing[0]}=... to the command line"
        )
    episodes = plain.get("episodes")
    if episodes is not None and not isinstance(episodes, list | tuple):
        raise CausalTraceError(f"episodes must be a list of episode ids, got {episodes!r}")
    run_options = {
        name: getattr(opts, name)
        for name in (
            "concurrency",
            "seed",
            "limit",
            "progress",
            "rerun_errors",
            "episode_timeout",
            "n_boot",
        )
    }
    env_config = EnvConfig.from_mapping(plain.get("env") or {})
    tool_config = ToolConfig.from_mapping(plain.get("tools") or {})
    agent = make_agent(agent_cfg["name"], agent_cfg)
    asyncio.run(check_agent(agent))  # before a dataset is generated or a file written
    source = DatasetSource(ensure_dataset(plain))
    summary = asyncio.run(
        evaluate(
            agent,
            source,
            plain["out_dir"],
            env_config=env_config,
            episodes=list(episodes) if episodes is not None else None,
            tool_config=tool_config,
            preflight=False,  # checked above
            **run_options,
        )
    )
    text = summary.summary_text() if summary.metrics is not None else ""
    if text:
        print(text)
    print(f"ran {summary.ran} episode(s), resumed {summary.resumed}; outputs in {summary.out_dir}")
    if summary.aborted:
        raise RunFailure(
            f"{summary.aborted}; {len(summary.failed)} episode(s) were not run to the end and "
            f"not recorded: re-run the same command to retry them"
        )
    if summary.failed:
        first = sorted(summary.failed)[0]
        raise RunFailure(
            f"{len(summary.failed)} episode(s) could not start (first: {first}: "
            f"{summary.failed[first]}); re-run the same command to retry them"
        )
    return summary


@hydra.main(config_path=CONFIG_PATH, config_name="eval", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    run_task("causaltrace-eval", evaluate_from_config, cfg)


def main() -> None:
    register_search_path()
    sys.exit(run_hydra_app("causaltrace-eval", _main))


if __name__ == "__main__":
    main()
