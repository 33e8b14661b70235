"""``causaltrace-generate``: generate a dataset split with Hydra.

    causaltrace-generate dataset=ads_test
    causaltrace-generate dataset=ads_train dataset.n_episodes=10000 out_dir=data/train
    causaltrace-generate -m launcher=joblib num_workers=2 worker_index=0,1   # 2 processes
    causaltrace-generate executor=ray num_workers=2                        # 2 Ray tasks

Each multirun job is one worker; workers split the shards by index, so any number of them
writes the same bytes, and re-running a command after a kill finishes the split. A run into a
directory that holds a dataset (or shards) of another config or generator refuses and names
what differs. User errors print one line (``--debug`` or ``HYDRA_FULL_ERROR=1``: traceback).
"""

from __future__ import annotations

import json
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from causaltrace.apps.config_dir import config_dir
from causaltrace.apps.errors import option, run_hydra_app, run_task
from causaltrace.datasets.generation import (
    Job,
    acceptance_report,
    check_existing,
    pending_shards,
    run,
    write_manifest,
)
from causaltrace.datasets.ray_executor import generate_with_ray
from causaltrace.errors import CausalTraceError


def generate(cfg: DictConfig) -> dict:
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    job = Job.from_config(plain)
    executor = plain.get("executor", "local")
    num_workers = option(plain, "num_workers", int, 1, minimum=1)
    worker_index = option(plain, "worker_index", int, 0, minimum=0)
    progress = option(plain, "progress", bool, True)
    if executor == "ray":
        ray_cfg = plain.get("ray") or {}
        check_existing(job)  # refuse here, not in each Ray task
        results = generate_with_ray(
            plain,
            num_workers,
            address=ray_cfg.get("address"),
            num_cpus=ray_cfg.get("num_cpus"),
        )
        summary = {
            "episodes": sum(r["episodes"] for r in results),
            "attempts": sum(r["attempts"] for r in results),
            "manifest_written": write_manifest(job) is not None,
            "shards": [],
        }
    elif executor == "local":
        pending_shards(job, worker_index, num_workers)  # checks the worker index
        summary = run(job, worker_index, num_workers, progress)
    else:
        raise CausalTraceError(f"executor must be 'local' or 'ray', got {executor!r}")
    if summary["manifest_written"]:
        print(f"dataset complete: {job.out_dir}")
        print(acceptance_report(job.out_dir).to_string())
    else:
        print(f"worker {worker_index} done; other workers' shards are pending")
    print(json.dumps({k: v for k, v in summary.items() if k != "shards"}, sort_keys=True))
    return summary


@hydra.main(config_path=config_dir(), config_name="generate", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    run_task("causaltrace-generate", generate, cfg)


def main() -> None:
    sys.exit(run_hydra_app("causaltrace-generate", _main))


if __name__ == "__main__":
    main()
