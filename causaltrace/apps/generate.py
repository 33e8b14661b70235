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

from causaltrace.apps.configs import CONFIG_PATH, register_search_path
from causaltrace.apps.errors import run_hydra_app, run_task
from causaltrace.apps.schema import GenerateConfig, options
from causaltrace.datasets.generation import (
    Job,
    acceptance_report,
    check_existing,
    pending_shards,
    run,
    write_manifest,
)
from causaltrace.datasets.ray_executor import generate_with_ray


def generate(cfg: DictConfig) -> dict:
    opts = options(GenerateConfig, cfg)
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    job = Job.from_config(plain)
    num_workers, worker_index, progress = opts.num_workers, opts.worker_index, opts.progress
    if opts.executor == "ray":
        check_existing(job)  # refuse here, not in each Ray task
        results = generate_with_ray(
            plain, num_workers, address=opts.ray.address, num_cpus=opts.ray.num_cpus
        )
        summary = {
            "episodes": sum(r["episodes"] for r in results),
            "attempts": sum(r["attempts"] for r in results),
            "manifest_written": write_manifest(job) is not None,
            "shards": [],
        }
    else:
        pending_shards(job, worker_index, num_workers)  # checks the worker index
        summary = run(job, worker_index, num_workers, progress)
    if summary["manifest_written"]:
        print(f"dataset complete: {job.out_dir}")
        print(acceptance_report(job.out_dir).to_string())
    else:
        print(f"worker {worker_index} done; other workers' shards are pending")
    print(json.dumps({k: v for k, v in summary.items() if k != "shards"}, sort_keys=True))
    return summary


@hydra.main(config_path=CONFIG_PATH, config_name="generate", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    run_task("causaltrace-generate", generate, cfg)


def main() -> None:
    register_search_path()
    sys.exit(run_hydra_app("causaltrace-generate", _main))


if __name__ == "__main__":
    main()
