"""``causaltrace-generate``: generate a dataset split with Hydra.

    causaltrace-generate dataset=ads_test
    causaltrace-generate dataset=ads_train dataset.n_episodes=10000 out_dir=data/train
    causaltrace-generate -m launcher=joblib num_workers=2 worker_index=0,1   # 2 processes
    causaltrace-generate executor=ray num_workers=2                        # 2 Ray tasks

Each multirun job is one worker; workers split the shards by index, so any number of them
writes the same bytes, and re-running a command after a kill finishes the split. Re-running it
over a finished split reports it finished (``"attempts": 0``) and writes nothing. A run into a
directory that holds a dataset (or shards) of another config refuses and names what differs;
one made by another generator (a refactor: another source fingerprint) is accepted when a
sample of its episodes regenerates byte for byte, and refused otherwise, naming the first
differing episode and file. User errors print one line (``--debug`` or ``HYDRA_FULL_ERROR=1``:
traceback).
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
    acceptance_report,
    manifest_content,
    pending_shards,
    run,
    write_manifest,
)
from causaltrace.datasets.job import Job
from causaltrace.datasets.ray_executor import generate_with_ray
from causaltrace.datasets.split_check import check_existing, describe_generator


def generate(cfg: DictConfig) -> dict:
    opts = options(GenerateConfig, cfg)
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    job = Job.from_config(plain)
    num_workers, worker_index, progress = opts.num_workers, opts.worker_index, opts.progress
    if opts.executor == "ray":
        verified = check_existing(job)  # refuse here, not in each Ray task
        already_finished = not pending_shards(job)
        results = generate_with_ray(
            plain,
            num_workers,
            address=opts.ray.address,
            num_cpus=opts.ray.num_cpus,
            checked=True,
        )
        summary = {
            "episodes": sum(r["episodes"] for r in results),
            "attempts": sum(r["attempts"] for r in results),
            "already_finished": already_finished,
            "manifest_written": write_manifest(job) is not None,
            "shards": [],
        }
        if summary["manifest_written"]:
            summary["content_sha256"] = manifest_content(job.out_dir)
        if verified:
            summary["verified"] = [c.to_dict() for c in verified]
    else:
        pending_shards(job, worker_index, num_workers)  # checks the worker index
        summary = run(job, worker_index, num_workers, progress)
    current = job.identity()["generator"]
    for check in summary.get("verified", ()):
        print(
            f"{job.out_dir}: made by another generator (recorded code sha256 "
            f"{str(check['recorded_code_sha256'])[:12]}; this one: "
            f"{describe_generator(current)}); {check['description']}. Its content is this "
            "generator's too."
        )
    if summary["manifest_written"]:
        if summary.get("already_finished"):
            print(f"dataset already finished: {job.out_dir} (nothing written)")
        else:
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
