"""``causaltrace-eval``: run an agent over a dataset split, score it and write a report.

    causaltrace-eval agent=random
    causaltrace-eval agent=openai agent.model=Qwen/Qwen3-8B agent.base_url=http://localhost:8000/v1 \\
        domain=ads dataset=ads_test concurrency=16
    causaltrace-eval -m agent=random,teacher,localizer      # one run directory per agent

Writes ``results.jsonl``, ``transcripts/``, ``summary.md``, ``metrics.json``,
``confusion.png`` and ``report.html`` under ``out_dir`` (default
``runs/<agent>-<dataset>``). Re-running the same command resumes: episodes already scored
are not run again. If ``dataset_dir`` holds no dataset yet, it is generated first from the same
``domain``, ``dataset`` and ``verifier`` configs (as ``causaltrace-generate`` would).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from causaltrace.apps.config_dir import config_dir
from causaltrace.errors import CausalTraceError

log = logging.getLogger(__name__)


def ensure_dataset(plain: Mapping[str, Any]) -> Path:
    """The dataset directory, generated first if it has no manifest."""
    from causaltrace.generation import Job, run

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
    written = json.loads(manifest.read_text(encoding="utf-8")).get("config") or {}
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
    from causaltrace.agents import make_agent
    from causaltrace.env import DatasetSource, EnvConfig
    from causaltrace.eval import evaluate
    from causaltrace.tools import ToolConfig

    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    agent_cfg = dict(plain["agent"])
    if not agent_cfg.get("name"):
        raise CausalTraceError("agent config: missing key 'name' (e.g. agent=random)")
    source = DatasetSource(ensure_dataset(plain))
    agent = make_agent(agent_cfg["name"], agent_cfg)
    episodes = plain.get("episodes")
    summary = asyncio.run(
        evaluate(
            agent,
            source,
            plain["out_dir"],
            concurrency=int(plain.get("concurrency", 4)),
            seed=int(plain.get("seed", 0)),
            env_config=EnvConfig.from_mapping(plain.get("env") or {}),
            limit=plain.get("limit"),
            episodes=list(episodes) if episodes is not None else None,
            tool_config=ToolConfig.from_mapping(plain.get("tools") or {}),
            progress=bool(plain.get("progress", True)),
            rerun_errors=bool(plain.get("rerun_errors", False)),
            episode_timeout=plain.get("episode_timeout"),
            n_boot=int(plain.get("n_boot", 1000)),
        )
    )
    print(summary.summary_text())
    print(f"ran {summary.ran} episode(s), resumed {summary.resumed}; outputs in {summary.out_dir}")
    if summary.failed:
        print(
            f"{len(summary.failed)} episode(s) could not start; re-run the same command to "
            f"retry them",
            file=sys.stderr,
        )
    return summary


@hydra.main(config_path=config_dir(), config_name="eval", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    evaluate_from_config(cfg)


def main() -> None:
    sys.exit(_main())


if __name__ == "__main__":
    main()
