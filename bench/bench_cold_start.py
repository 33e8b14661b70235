"""The first episodes of a fresh install (issue 25, item 4): no compilation in them.

    python bench/bench_cold_start.py [--episodes 12] [--preset small]

Generates the README main job's split (``dataset=ads_smoke``, lazy) twice in fresh processes:
once with an empty numba cache (``NUMBA_CACHE_DIR`` pointed at a new directory: what a fresh
install has) and once with the cache that first run warmed. Prints each episode's wall time per
attempt, and the first episode's time per attempt over the median of the run: the goal is no
first-episode outlier above 3x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# One process: time accept_episode per episode of the split's plan.
PROBE = """
import json, sys, time
t0 = time.perf_counter()
from causaltrace.episodes.acceptance import accept_episode
from causaltrace.datasets.generation import Job
from causaltrace.episodes.composition import assignments
from causaltrace.episodes.sampling import EpisodeSpec
n, preset = int(sys.argv[1]), sys.argv[2]
job = Job.from_config({"out_dir": "unused", "domain": {"name": "ads", "preset": preset},
    "dataset": {"name": "smoke", "split": "smoke", "seed": 7, "n_episodes": n,
                "composition": {"kind": "quotas", "total": n, "sliced": 2 * n // 3, "two_d": n // 5}}})
domain = job.make_domain()
plan = assignments(domain.scm, job.dataset.composition, split="smoke", dataset_seed=7, n_episodes=n)
start = time.perf_counter() - t0
rows = []
for i, a in enumerate(plan):
    spec = EpisodeSpec(f"smoke-{i:06d}", "smoke", i, 7, a.cause, a.slice_order, also=a.also)
    t = time.perf_counter()
    _, verdicts = accept_episode(domain, spec, job.verifier, 400)
    rows.append({"seconds": time.perf_counter() - t, "attempts": len(verdicts)})
print(json.dumps({"startup": start, "episodes": rows}))
"""


def run(cache: Path, n: int, preset: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(n), preset],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(name: str, result: dict) -> float:
    per_attempt = [e["seconds"] / e["attempts"] for e in result["episodes"]]
    median = statistics.median(per_attempt)
    ratio = per_attempt[0] / median
    print(
        f"{name}: start-up {result['startup']:.1f} s; per attempt: first episode "
        f"{per_attempt[0] * 1000:.0f} ms, median {median * 1000:.0f} ms, max "
        f"{max(per_attempt) * 1000:.0f} ms -> first / median {ratio:.2f}x  (goal <= 3x)"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--preset", default="small")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "numba-cache"
        t = time.perf_counter()
        cold = run(cache, args.episodes, args.preset)
        cold_wall = time.perf_counter() - t
        # The warm-up process may still be compiling: wait for its marker (at most 10 min).
        deadline = time.monotonic() + 600
        while not list(cache.rglob("causaltrace-kernels-*.json")) and time.monotonic() < deadline:
            time.sleep(1)
        t = time.perf_counter()
        warm = run(cache, args.episodes, args.preset)
        warm_wall = time.perf_counter() - t
    ratios = (summary("empty numba cache", cold), summary("warm numba cache ", warm))
    print(f"wall: {cold_wall:.1f} s cold, {warm_wall:.1f} s warm")
    print(json.dumps({"first_over_median": [round(r, 2) for r in ratios]}))


if __name__ == "__main__":
    main()
